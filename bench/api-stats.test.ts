import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  cpuMsPer,
  forwardedPort,
  MarkerScanner,
  mibPerSecond,
  pairedDifference,
  positiveInteger,
  parseBytes,
  passOrder,
  poolPasses,
  signTestRank,
  type PassSamples,
} from './api-stats.ts';

describe('api benchmark numbers', () => {
  test('throughput and CPU per unit, none without time or units', () => {
    assert.equal(mibPerSecond(64 * 2 ** 20, 2000), 32);
    assert.equal(mibPerSecond(1, 0), null);
    assert.equal(cpuMsPer(0.5, 10), 50);
    assert.equal(cpuMsPer(1, 0), null);
  });

  test('the marker is found when a chunk boundary cuts it', () => {
    const s = new MarkerScanner('END!');
    assert.equal(s.push(Buffer.from('aaaaE')), false);
    assert.equal(s.push(Buffer.from('N')), false);
    assert.equal(s.push(Buffer.from('D!tail')), true);
    assert.equal(s.bytesBefore, 4);
    assert.equal(s.bytes, 12);
    assert.throws(() => new MarkerScanner(''));
  });

  test("kubectl port-forward's line and sizes parse", () => {
    assert.equal(forwardedPort('Forwarding from 127.0.0.1:41234 -> 8080\n'), 41234);
    assert.equal(forwardedPort('Forwarding from [::1]:41234 -> 8080\n'), undefined);
    assert.equal(parseBytes('64Mi'), 64 * 2 ** 20);
    assert.equal(parseBytes('512'), 512);
    assert.throws(() => parseBytes('1.5Gi'), /Cannot parse size/);
  });

  test('passes alternate the agents and pool into one sample set', () => {
    assert.deepEqual(passOrder(['berth', 'upstream'], 3), [
      ['berth', 'upstream'],
      ['upstream', 'berth'],
      ['berth', 'upstream'],
    ]);
    assert.deepEqual(passOrder(['berth'], 2), [['berth'], ['berth']]);
    const pass = (ms: number, cpu: number): PassSamples => ({
      execMs: [ms, ms + 1],
      execCpuSeconds: cpu,
      firstByteMs: [ms],
      logsMiBps: [ms / 10, null],
      logsCpuSeconds: cpu,
      logsMiB: 64,
      forwardMiBps: [ms],
      forwardCpuSeconds: cpu / 2,
      forwardMiB: 128,
    });
    const pooled = poolPasses([pass(100, 0.2), pass(200, 0.4)]);
    assert.deepEqual(pooled.execMs, [100, 101, 200, 201]);
    assert.deepEqual(pooled.logsMiBps, [10, null, 20, null]);
    assert.equal(cpuMsPer(pooled.execCpuSeconds, pooled.execMs.length), 150);
    assert.equal(cpuMsPer(pooled.forwardCpuSeconds, pooled.forwardMiB), 1.172);
  });

  test('integer options: at least 1, or a clear error', () => {
    assert.equal(positiveInteger('execs', '200'), 200);
    assert.throws(
      () => positiveInteger('execs', '0'),
      /Cannot use --execs 0: it must be an integer >= 1/,
    );
    assert.throws(() => positiveInteger('rounds', '1.5'), /Cannot use --rounds 1\.5/);
    assert.throws(() => positiveInteger('rounds', 'many'), /Cannot use --rounds many/);
  });

  test('sign-test ranks match the exact binomial ones', () => {
    // Checked against the binomial cumulative distribution computed exactly.
    assert.equal(signTestRank(5), 0);
    assert.equal(signTestRank(6), 1);
    assert.equal(signTestRank(20), 6);
    assert.equal(signTestRank(60), 22);
    assert.equal(signTestRank(1000), 469);
    assert.throws(() => signTestRank(-1), /Cannot rank/);
  });

  test('paired differences: median, interval from order statistics, who was lower', () => {
    const b = [10, 10, 10, 10, 10, 10];
    const a = [9, 11, 8, 12, 10.5, 7];
    // Differences sorted: -3, -2, -1, 0.5, 1, 2; k = 1 takes the extremes.
    assert.deepEqual(pairedDifference(a, b), {
      n: 6,
      median: -0.25,
      ci95: [-3, 2],
      aLower: 3,
    });
    // Odd count, too few pairs for an interval.
    assert.deepEqual(pairedDifference([1, 2, 3], [0, 0, 5]), {
      n: 3,
      median: 1,
      ci95: null,
      aLower: 1,
    });
    // A shift hidden in noise that pairs cancel: every pair shares its round's drift.
    const drift = Array.from({ length: 60 }, (_, i) => 100 + 40 * Math.sin(i));
    const shifted = pairedDifference(
      drift.map((x) => x + 2),
      drift,
    );
    assert.equal(shifted.median, 2);
    assert.deepEqual(shifted.ci95, [2, 2]);
    assert.equal(shifted.aLower, 0);
    assert.throws(() => pairedDifference([1], [1, 2]), /Cannot pair/);
  });
});
