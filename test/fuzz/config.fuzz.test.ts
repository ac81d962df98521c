/**
 * Hostile KubeletConfiguration files and command lines: whatever the bytes, the loader
 * answers with a config or a ConfigError (never another error, never a hang), a small
 * file cannot make a huge config (YAML aliases are capped), and Go durations round-trip.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import {
  ConfigError,
  HelpRequestedError,
  VersionRequestedError,
  formatGoDuration,
  loadConfig,
  parseGoDuration,
  parseKubeletConfigFile,
  parseKubeletFlags,
} from '../../src/config/index.ts';
import { KUBELET_FLAGS } from '../../src/config/kubelet-flags.ts';
import { expectBounded, expectTyped, expectTypedAsync, fuzz, fuzzAsync } from './run.ts';

const FIXTURE = readFileSync(
  new URL('../../src/config/testdata/kubeadm-v1.37.2-config.yaml', import.meta.url),
  'utf8',
);
const BASE = parseYaml(FIXTURE) as Record<string, unknown>;
const FIELDS = Object.keys(BASE);
const FLAGS = Object.keys(KUBELET_FLAGS);

const isConfigError = (err: unknown): boolean => err instanceof ConfigError;
const isLoadError = (err: unknown): boolean =>
  err instanceof ConfigError ||
  err instanceof HelpRequestedError ||
  err instanceof VersionRequestedError;

/** Words the config and flag parsers give meaning to: durations, quantities, booleans. */
const word = fc.oneof(
  fc.constantFrom(
    '0s',
    '1h2m3.5s',
    '-1s',
    '1e9h',
    '9999999999999h',
    '.s',
    '1.',
    'NaN',
    'Infinity',
    '100Mi',
    '1e308',
    '-0',
    '10%',
    '101%',
    'memory.available<100Mi',
    'true',
    'False',
    'yes',
    '',
    ' ',
    '\0',
    '${HOME}',
    '0x10',
    '1_000',
    '::1',
    '10.96.0.10',
    'unix:///run/x.sock',
    'key=value:NoSchedule',
    'a=b,c=d',
    '=',
    ',',
    'k8s.io/a=',
    '🙂',
    'a'.repeat(300),
  ),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.integer().map(String),
  fc.double().map(String),
);

/** A value for a field: of the right type or not, nested or not. */
const value = fc.oneof(
  word,
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(word, { maxLength: 4 }),
  fc.dictionary(word, word, { maxKeys: 4 }),
  fc.jsonValue({ maxDepth: 3 }),
);

/** kubeadm's file with some fields changed, dropped or added, as YAML or JSON. */
const mutatedFile = fc
  .record({
    changes: fc.array(fc.tuple(fc.constantFrom(...FIELDS, 'apiVersion', 'kind'), value), {
      maxLength: 6,
    }),
    drops: fc.array(fc.constantFrom(...FIELDS), { maxLength: 3 }),
    extra: fc.dictionary(fc.string({ maxLength: 12 }), value, { maxKeys: 2 }),
    json: fc.boolean(),
  })
  .map(({ changes, drops, extra, json }) => {
    const doc: Record<string, unknown> = { ...BASE };
    for (const [k, v] of changes) doc[k] = v;
    for (const k of drops) Reflect.deleteProperty(doc, k);
    Object.assign(doc, extra);
    return json ? JSON.stringify(doc) : stringifyYaml(doc);
  });

/** Raw text: noise, YAML-shaped noise, or a valid file cut or spliced at random. */
const rawText = fc.oneof(
  fc.string({ maxLength: 400 }),
  fc.string({ unit: 'binary', maxLength: 400 }),
  fc
    .array(
      fc.constantFrom(
        ':',
        '- ',
        '  ',
        '\n',
        '{',
        '}',
        '[',
        ']',
        '&a ',
        '*a',
        '!!str ',
        '!!binary ',
        '<<: *a',
        '"',
        "'",
        '#',
        '---\n',
        '...\n',
        '? ',
        '|',
        '>',
        '%YAML 1.2\n',
        'kind',
        'apiVersion',
        ' KubeletConfiguration',
        ' kubelet.config.k8s.io/v1beta1',
        'syncFrequency: ',
        '1m',
      ),
      { maxLength: 80 },
    )
    .map((parts) => parts.join('')),
  fc
    .tuple(fc.nat(FIXTURE.length), fc.nat(FIXTURE.length), fc.string({ maxLength: 30 }))
    .map(([a, b, s]) => FIXTURE.slice(0, Math.min(a, b)) + s + FIXTURE.slice(Math.max(a, b))),
);

/** A YAML alias bomb of `depth` levels, `width` aliases each: exponential if expanded. */
function aliasBomb(depth: number, width: number): string {
  const lines = ['apiVersion: kubelet.config.k8s.io/v1beta1', 'kind: KubeletConfiguration'];
  lines.push('x0: &a0 ["lol"]');
  for (let i = 1; i <= depth; i++)
    lines.push(`x${i}: &a${i} [${Array.from({ length: width }, () => `*a${i - 1}`).join(', ')}]`);
  return `${lines.join('\n')}\n`;
}

/** A command line: known flags with hostile values, and noise. */
const argv = fc.array(
  fc.oneof(
    fc
      .tuple(fc.constantFrom(...FLAGS), word, fc.constantFrom('--', '-', '--', '---'))
      .map(([f, v, dash]) => `${dash}${f}=${v}`),
    fc.constantFrom(...FLAGS).map((f) => `--${f}`),
    fc.constantFrom(...FLAGS).map((f) => `--${f.replaceAll('-', '_')}`),
    word,
    fc.constantFrom('-v', '-v=9', '-vv', '--', '-', '--=', '--help=maybe', '--version=raw'),
  ),
  { maxLength: 8 },
);

describe('fuzz: KubeletConfiguration loader', () => {
  test('any text is a config or a ConfigError, bounded', (t) => {
    fuzz(
      t,
      fc.property(fc.oneof(rawText, mutatedFile), (text) => {
        const parsed = expectTyped(() => parseKubeletConfigFile(text, '/fuzz.yaml'), isConfigError);
        if (parsed !== undefined) expectBounded(text.length, parsed.file);
      }),
      400,
    );
  });

  test('a mutated kubeadm file loads with defaults and validation, or is refused', async (t) => {
    await fuzzAsync(
      t,
      fc.asyncProperty(mutatedFile, argv, async (text, args) => {
        const config = await expectTypedAsync(
          () =>
            loadConfig(['--config=/etc/berth/config.yaml', ...args], {
              readFile: () => Promise.resolve(text),
              hostname: () => 'fuzz-node',
              cwd: '/',
            }),
          isLoadError,
        );
        if (config !== undefined) expectBounded(text.length + args.join(' ').length, config);
      }),
      300,
    );
  });

  test('an alias bomb is a ConfigError (yaml threw a bare ReferenceError)', () => {
    assert.throws(() => parseKubeletConfigFile(aliasBomb(3, 4), '/bomb.yaml'), {
      name: 'ConfigError',
      message: /invalid YAML: Excessive alias count/,
    });
  });

  test('YAML alias bombs are refused, not expanded', (t) => {
    fuzz(
      t,
      fc.property(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 2, max: 12 }), (d, w) => {
        const text = aliasBomb(d, w);
        const parsed = expectTyped(() => parseKubeletConfigFile(text, '/bomb.yaml'), isConfigError);
        if (parsed !== undefined) expectBounded(text.length, parsed.file);
      }),
      50,
    );
  });
});

describe('fuzz: flag parser', () => {
  test('any argv parses or is a ConfigError naming the problem', (t) => {
    fuzz(
      t,
      fc.property(argv, (args) => {
        const parsed = expectTyped(() => parseKubeletFlags(args), isConfigError);
        if (parsed !== undefined) {
          expectBounded(args.join(' ').length, parsed.values);
          for (const name of parsed.given) assert.ok(Object.hasOwn(KUBELET_FLAGS, name));
        }
      }),
      600,
    );
  });
});

describe('fuzz: Go durations', () => {
  test('past 2^53 ns a duration still formats and parses exactly (it lost digits)', () => {
    assert.equal(formatGoDuration(581_242_528_445), '161456h15m28.445s');
    assert.equal(parseGoDuration('161456h15m28.445s'), 581_242_528_445);
  });

  test('formatGoDuration and parseGoDuration round-trip whole milliseconds', (t) => {
    // Go's time.Duration is int64 nanoseconds: about ±292 years.
    const max = 9_223_372_036_854;
    fuzz(
      t,
      fc.property(fc.integer({ min: -max, max }), (ms) => {
        assert.equal(parseGoDuration(formatGoDuration(ms)), ms);
      }),
      1000,
    );
  });
});
