/**
 * Hostile static pod manifests, from a file or a URL: the decoder answers with pods or a
 * ManifestError (never another error, never a hang, never a pod far larger than its
 * manifest), and both sources report a bad manifest instead of failing.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { FileSource } from '../../src/podsource/file-source.ts';
import { HttpSource } from '../../src/podsource/http-source.ts';
import {
  decodeStaticPod,
  decodeStaticPods,
  ManifestError,
  type DecodeOptions,
} from '../../src/podsource/static-pod.ts';
import { FakeClock } from '../../src/util/clock.ts';
import { MemoryLogger } from '../../src/util/logger.ts';
import { createServer } from '../../src/util/node-http.ts';
import { expectBounded, expectTyped, fuzz, fuzzAsync } from './run.ts';

const TESTDATA = new URL('../../src/podsource/testdata/', import.meta.url);
const SAMPLES = ['web.yaml', 'kitchen-sink.yaml', 'kube-apiserver.yaml', 'weird.yaml'].map((f) =>
  readFileSync(new URL(f, TESTDATA), 'utf8'),
);
const SAMPLE_PODS = SAMPLES.map((text) => parseYaml(text) as Record<string, unknown>);
const OPTIONS: DecodeOptions = {
  nodeName: 'fuzz-node',
  source: '/etc/kubernetes/manifests/x.yaml',
  kind: 'file',
};
const isManifestError = (err: unknown): boolean => err instanceof ManifestError;

const scalar = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom('100m', '1Gi', '-1', '0644', 'yes', 'Always', 'TCP', '', 'a'.repeat(300)),
);
const value = fc.oneof(
  scalar,
  fc.jsonValue({ maxDepth: 3 }),
  fc.array(scalar, { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 10 }), scalar, { maxKeys: 3 }),
);

/** Every path to a value inside `obj` (objects and arrays), up to a depth. */
function paths(obj: unknown, prefix: (string | number)[] = [], depth = 6): (string | number)[][] {
  const out: (string | number)[][] = [prefix];
  if (depth === 0 || obj === null || typeof obj !== 'object') return out;
  for (const [k, v] of Object.entries(obj))
    out.push(...paths(v, [...prefix, Array.isArray(obj) ? Number(k) : k], depth - 1));
  return out;
}

function setAt(obj: unknown, path: readonly (string | number)[], v: unknown): unknown {
  if (path.length === 0) return v;
  const [head = '', ...rest] = path;
  if (Array.isArray(obj)) {
    const copy: unknown[] = [...(obj as unknown[])];
    copy[Number(head)] = setAt(copy[Number(head)], rest, v);
    return copy;
  }
  const copy: Record<string, unknown> = { ...(obj as Record<string, unknown>) };
  copy[String(head)] = setAt(copy[String(head)], rest, v);
  return copy;
}

/** A sample pod with values replaced anywhere in it, as YAML or JSON. */
const mutatedPod = fc
  .nat(SAMPLE_PODS.length - 1)
  .chain((i) => {
    const pod = SAMPLE_PODS[i];
    const all = paths(pod);
    return fc.record({
      pod: fc.constant(pod),
      changes: fc.array(fc.tuple(fc.constantFrom(...all), value), { maxLength: 4 }),
      json: fc.boolean(),
    });
  })
  .map(({ pod, changes, json }) => {
    let doc: unknown = pod;
    for (const [path, v] of changes) doc = setAt(doc, path, v);
    return json ? JSON.stringify(doc) : stringifyYaml(doc);
  });

const rawText = fc.oneof(
  fc.string({ maxLength: 400 }),
  fc.string({ unit: 'binary', maxLength: 400 }),
  fc
    .tuple(fc.constantFrom(...SAMPLES), fc.nat(4000), fc.nat(4000), fc.string({ maxLength: 20 }))
    .map(([s, a, b, noise]) => s.slice(0, Math.min(a, b)) + noise + s.slice(Math.max(a, b))),
  fc
    .array(
      fc.constantFrom(
        'apiVersion: v1\n',
        'kind: Pod\n',
        'kind: PodList\n',
        'items:\n',
        '- ',
        '  ',
        ': ',
        'metadata:',
        ' {name: x}',
        'spec:',
        ' containers:',
        ' [{name: c, image: i}]',
        '&a ',
        '*a',
        '<<: *a\n',
        '---\n',
        '!!binary ',
        '"',
        '{',
        '}',
        '\n',
        'volumes: ',
        'hostPath: {path: /}',
        'secret: {secretName: s}',
        'uid: ',
        '0x1F',
      ),
      { maxLength: 60 },
    )
    .map((parts) => parts.join('')),
);

/** A YAML alias bomb inside a pod: exponential if expanded. */
function aliasBomb(depth: number, width: number): string {
  const lines = ['apiVersion: v1', 'kind: Pod', 'metadata:', '  name: bomb', '  labels:'];
  lines.push('    x0: &a0 ["lol"]');
  for (let i = 1; i <= depth; i++)
    lines.push(
      `    x${i}: &a${i} [${Array.from({ length: width }, () => `*a${i - 1}`).join(', ')}]`,
    );
  return `${lines.join('\n')}\nspec: {containers: [{name: c, image: i}]}\n`;
}

describe('fuzz: static pod manifests', () => {
  test('an alias bomb is a ManifestError (yaml threw a bare ReferenceError)', () => {
    assert.throws(() => decodeStaticPod(aliasBomb(3, 4), OPTIONS), {
      name: 'ManifestError',
      message: /yaml: document contains excessive aliasing/,
    });
  });

  test('null where a struct belongs is its zero value, as encoding/json reads it (a TypeError before)', () => {
    const pod = (spec: string): string =>
      `apiVersion: v1\nkind: Pod\nmetadata: {name: w}\nspec:\n${spec}\n`;
    const image = '  containers: [{name: c, image: i}]';
    assert.throws(() => decodeStaticPod(pod('  containers: [null]'), OPTIONS), {
      name: 'ManifestError',
      message: /spec\.containers\[0\]\.name: Required value/,
    });
    assert.throws(() => decodeStaticPod(pod(`${image}\n  volumes: [null]`), OPTIONS), {
      name: 'ManifestError',
      message: /spec\.volumes\[0\]\.name: Required value/,
    });
    const tolerated = decodeStaticPod(pod(`${image}\n  tolerations: [null]`), OPTIONS);
    assert.equal(tolerated.pod.spec?.tolerations?.length, 2);
  });

  test('a quantity upstream cannot parse is a ManifestError (a QuantityError escaped)', () => {
    const text =
      'apiVersion: v1\nkind: Pod\nmetadata: {name: w}\nspec:\n  containers:\n' +
      '  - {name: c, image: i, resources: {requests: {memory: Always}}}\n';
    assert.throws(() => decodeStaticPod(text, OPTIONS), {
      name: 'ManifestError',
      message: /resources\.requests\[memory\]: Cannot parse quantity "Always"/,
    });
  });

  test('any manifest decodes to a pod or a ManifestError, bounded', (t) => {
    fuzz(
      t,
      fc.property(fc.oneof(rawText, mutatedPod), fc.boolean(), (text, list) => {
        const pods = expectTyped(
          () =>
            list
              ? decodeStaticPods(text, { ...OPTIONS, kind: 'http', source: 'http://x/pods' })
              : [decodeStaticPod(text, OPTIONS)],
          isManifestError,
        );
        for (const p of pods ?? []) expectBounded(text.length, p.pod);
      }),
      400,
    );
  });

  test('alias bombs are refused, not expanded', (t) => {
    fuzz(
      t,
      fc.property(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 2, max: 12 }), (d, w) => {
        const text = aliasBomb(d, w);
        const pod = expectTyped(() => decodeStaticPod(text, OPTIONS), isManifestError);
        if (pod !== undefined) expectBounded(text.length, pod.pod);
      }),
      50,
    );
  });
});

describe('fuzz: static pod sources', () => {
  let dir = '';
  let body: { status: number; bytes: Buffer } = { status: 200, bytes: Buffer.alloc(0) };
  const server = createServer((_req, res) => {
    res.statusCode = body.status;
    res.end(body.bytes);
  });
  let url = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-fuzz-manifests-'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/pods`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await rm(dir, { recursive: true, force: true });
  });

  const common = (problems: string[]) => ({
    nodeName: 'fuzz-node',
    clock: new FakeClock(),
    logger: new MemoryLogger(),
    periodMs: 20_000,
    onUpdate: () => undefined,
    onProblem: (_where: string, message: string) => problems.push(message),
  });

  test('a directory of hostile files is listed, each bad one reported', async (t) => {
    let round = 0;
    await fuzzAsync(
      t,
      fc.asyncProperty(
        fc.array(fc.oneof(rawText, mutatedPod), { minLength: 1, maxLength: 4 }),
        async (texts) => {
          const sub = join(dir, String(round++));

          await mkdir(sub);
          await Promise.all(texts.map((text, i) => writeFile(join(sub, `m${i}.yaml`), text)));
          const problems: string[] = [];
          const source = new FileSource({ ...common(problems), path: sub });
          await source.list();
          for (const p of problems) expectBounded(10_000, p);
        },
      ),
      60,
    );
  });

  test('a URL answering hostile bodies is read, never thrown', async (t) => {
    await fuzzAsync(
      t,
      fc.asyncProperty(
        fc.oneof(rawText, mutatedPod),
        fc.constantFrom(200, 200, 200, 404, 500),
        async (text, status) => {
          body = { status, bytes: Buffer.from(text) };
          const problems: string[] = [];
          const source = new HttpSource({ ...common(problems), url, headers: {} });
          await source.fetchOnce(new AbortController().signal);
        },
      ),
      100,
    );
  });
});
