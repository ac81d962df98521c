import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  cpuMsPer,
  forwardedPort,
  MarkerScanner,
  mibPerSecond,
  parseBytes,
  passOrder,
  poolPasses,
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
});
