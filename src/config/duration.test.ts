import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  DurationSyntaxError,
  formatGoDuration,
  parseGoDuration,
  parseGoDurationNs,
} from './duration.ts';

describe('parseGoDuration', () => {
  const valid: readonly [string, number][] = [
    ['0', 0],
    ['0s', 0],
    ['+0', 0],
    ['1m0s', 60_000],
    ['10s', 10_000],
    ['1h30m', 5_400_000],
    ['100ms', 100],
    ['1.5s', 1500],
    ['.5s', 500],
    ['5.s', 5000],
    ['-1.5h', -5_400_000],
    ['2h45m30.5s', 9_930_500],
    ['100us', 0.1],
    ['250µs', 0.25],
    ['250μs', 0.25],
    ['1500ns', 0.0015],
    ['1m1m', 120_000],
  ];
  for (const [text, ms] of valid) {
    test(`${text} is ${ms} ms`, () => {
      assert.equal(parseGoDuration(text), ms);
    });
  }

  const invalid = ['', '1', '-', 'abc', '1x', '.s', 's', '1m 30s', '1 m', 'ms', '1.2.3s', '1e3s'];
  for (const text of invalid) {
    test(`${JSON.stringify(text)} is rejected`, () => {
      assert.throws(() => parseGoDuration(text), DurationSyntaxError);
    });
  }

  test('names the unknown unit', () => {
    assert.throws(() => parseGoDuration('5min'), /unknown unit "min" in duration "5min"/);
  });

  test('stays exact in nanoseconds and refuses values beyond int64', () => {
    assert.equal(parseGoDurationNs('2562047h47m16.854775807s'), 2n ** 63n - 1n);
    assert.equal(parseGoDurationNs('-2562047h47m16.854775808s'), -(2n ** 63n));
    assert.throws(() => parseGoDurationNs('2562047h47m16.854775808s'), /out of range/);
    assert.throws(() => parseGoDuration('9999999999h'), /out of range/);
  });
});

describe('formatGoDuration', () => {
  const cases: readonly [number, string][] = [
    [0, '0s'],
    [60_000, '1m0s'],
    [10_000, '10s'],
    [14_400_000, '4h0m0s'],
    [5_400_000, '1h30m0s'],
    [100, '100ms'],
    [1500, '1.5s'],
    [0.25, '250µs'],
    [-90_000, '-1m30s'],
  ];
  for (const [ms, text] of cases) {
    test(`${ms} ms is ${text}`, () => {
      assert.equal(formatGoDuration(ms), text);
      assert.equal(parseGoDuration(text), ms);
    });
  }
});
