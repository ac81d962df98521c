import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from './errors.ts';
import {
  boolFlag,
  durationFlag,
  enumFlag,
  formatUsage,
  intFlag,
  listFlag,
  mapFlag,
  parseFlags,
  stringFlag,
} from './flags.ts';

const table = {
  name: stringFlag('a name'),
  on: boolFlag('a switch', { defaultText: 'true' }),
  count: intFlag('a count', { min: 0, max: 10, defaultText: '3' }),
  v: intFlag('verbosity', { shorthand: 'v', min: 0 }),
  wait: durationFlag('a wait', { deprecated: 'use the file' }),
  mode: enumFlag('a mode', ['a', 'b']),
  items: listFlag('items', (s) => s),
  last: listFlag('items, last wins', (s) => s, { repeat: 'replace' }),
  pairs: mapFlag('pairs', (s) => s),
  help: boolFlag('help', { shorthand: 'h' }),
};

function invalid(argv: readonly string[], message: string | RegExp): void {
  assert.throws(
    () => parseFlags(argv, table),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.equal(err.code, 'BERTH_CONFIG_INVALID');
      if (typeof message === 'string') assert.equal(err.message, message);
      else assert.match(err.message, message);
      return true;
    },
  );
}

describe('parseFlags', () => {
  test('reads --name=value and --name value', () => {
    const a = parseFlags(['--name=x', '--count', '4'], table);
    assert.deepEqual(a.values, { name: 'x', count: 4 });
    assert.deepEqual(a.given, ['name', 'count']);
  });

  test('takes everything after the first "=" as the value, including an empty one', () => {
    assert.equal(parseFlags(['--name=a=b'], table).values.name, 'a=b');
    assert.equal(parseFlags(['--name='], table).values.name, '');
  });

  test('reads booleans as --flag, --flag=true and --flag=false', () => {
    assert.equal(parseFlags(['--on'], table).values.on, true);
    assert.equal(parseFlags(['--on=true'], table).values.on, true);
    assert.equal(parseFlags(['--on=false'], table).values.on, false);
    assert.equal(parseFlags(['--on=0'], table).values.on, false);
    assert.equal(parseFlags(['--on=T'], table).values.on, true);
  });

  test('does not take a separate word as a boolean value', () => {
    invalid(
      ['--on', 'false'],
      'unknown command "false" (boolean flags take their value inline: --on=false)',
    );
  });

  test('reads the verbosity as -v=4, -v 4, -v4, --v=4 and --v 4', () => {
    for (const argv of [['-v=4'], ['-v', '4'], ['-v4'], ['--v=4'], ['--v', '4']]) {
      assert.equal(parseFlags(argv, table).values.v, 4, argv.join(' '));
    }
  });

  test('treats "_" like "-" in names', () => {
    const t = { 'max-pods': intFlag('pods') };
    assert.equal(parseFlags(['--max_pods=5'], t).values['max-pods'], 5);
  });

  test('lets the last occurrence of a scalar flag win', () => {
    assert.equal(parseFlags(['--count=1', '--count=2'], table).values.count, 2);
  });

  test('appends repeated and comma-separated list flags', () => {
    const a = parseFlags(['--items=a,b', '--items', 'c', '--last=x', '--last=y,z'], table);
    assert.deepEqual(a.values.items, ['a', 'b', 'c']);
    assert.deepEqual(a.values.last, ['y', 'z']);
  });

  test('merges repeated map flags', () => {
    const a = parseFlags(['--pairs=a=1,b=2', '--pairs=b=3'], table);
    assert.deepEqual(a.values.pairs, { a: '1', b: '3' });
    invalid(['--pairs=a'], /invalid argument "a" for "--pairs" flag: malformed pair "a"/);
  });

  test('parses durations to milliseconds', () => {
    assert.equal(parseFlags(['--wait=1m30s'], table).values.wait, 90_000);
    invalid(['--wait=5'], /invalid argument "5" for "--wait" flag: missing unit/);
  });

  test('rejects unknown flags naming them', () => {
    invalid(['--foo'], 'unknown flag: --foo');
    invalid(['--foo=1'], 'unknown flag: --foo');
    invalid(['-x'], "unknown shorthand flag: 'x' in -x");
  });

  test('rejects a missing value naming the flag', () => {
    invalid(['--name'], 'flag needs an argument: --name');
    invalid(['--name', '--on'], 'flag needs an argument: --name');
    invalid(['-v'], 'flag needs an argument: -v');
  });

  test('rejects invalid values naming the flag', () => {
    invalid(['--count=abc'], 'invalid argument "abc" for "--count" flag: expected an integer');
    invalid(['--count=11'], /expected an integer from 0 to 10/);
    invalid(['--count=1.5'], /"--count" flag: expected an integer/);
    invalid(['--on=yes'], 'invalid argument "yes" for "--on" flag: expected true or false');
    invalid(['--mode=c'], /"--mode" flag: expected one of a, b/);
  });

  test('accepts negative numbers as separate values', () => {
    const t = { n: intFlag('n') };
    assert.equal(parseFlags(['--n', '-1'], t).values.n, -1);
  });

  test('rejects positional arguments', () => {
    invalid(['run'], 'unknown command "run"');
    invalid(['--', 'x'], 'unknown command "x"');
  });

  test('records the flag in the issue', () => {
    try {
      parseFlags(['--count=x'], table);
      assert.fail('expected an error');
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      assert.equal(err.issues[0]?.field, '--count');
      assert.equal(err.issues[0].source, 'flags');
    }
  });
});

describe('formatUsage', () => {
  const usage = formatUsage(table, { command: 'berth' });

  test('lists every flag, sorted, with its type, default and deprecation', () => {
    assert.match(usage, /^Usage:\n {2}berth \[flags\]\n\nFlags:\n/);
    assert.match(usage, / {6}--count int +a count \(default 3\)/);
    assert.match(usage, / {2}-v, --v int +verbosity/);
    assert.match(usage, /--wait duration +a wait \(DEPRECATED: use the file\)/);
    assert.match(usage, / {6}--on +a switch/);
    const order = [...usage.matchAll(/--([a-z]+)/g)].map((m) => m[1]);
    assert.deepEqual(order, [...order].sort());
  });

  test('keeps lines within 100 columns', () => {
    const long = { x: stringFlag('word '.repeat(60)) };
    for (const line of formatUsage(long, { command: 'b' }).split('\n')) {
      assert.ok(line.length <= 100, line);
    }
  });
});
