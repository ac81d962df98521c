import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { EvictionConfigError } from '../eviction/thresholds.ts';
import { evictedStatus, evictionOptionsOf, type EvictionConfig } from './eviction-wiring.ts';

const config: EvictionConfig = {
  evictionHard: { 'memory.available': '100Mi' },
  evictionSoft: {},
  evictionSoftGracePeriodMs: {},
  evictionMinimumReclaim: {},
  enforceNodeAllocatable: ['pods'],
  evictionPressureTransitionPeriodMs: 300_000,
  evictionMaxPodGracePeriodSeconds: 0,
  imageGCHighThresholdPercent: 85,
  imageGCLowThresholdPercent: 80,
  imageMinimumGCAgeMs: 120_000,
  imageMaximumGCAgeMs: 0,
};

describe('eviction wiring', () => {
  test('the evicted pod ends Failed/Evicted with its DisruptionTarget replacing an older one', () => {
    const condition = {
      type: 'DisruptionTarget',
      status: 'True',
      reason: 'TerminationByKubelet',
      message: 'm',
    };
    const s = evictedStatus(
      {
        phase: 'Succeeded',
        conditions: [
          { type: 'Ready', status: 'False' },
          { type: 'DisruptionTarget', status: 'True', reason: 'Other' },
        ],
      },
      { reason: 'Evicted', message: 'm', condition },
    );
    assert.equal(s.phase, 'Failed');
    assert.equal(s.reason, 'Evicted');
    assert.equal(s.message, 'm');
    assert.deepEqual(s.conditions, [{ type: 'Ready', status: 'False' }, condition]);
  });

  test('options from the configuration; a bad threshold names its field', () => {
    const o = evictionOptionsOf(config);
    assert.deepEqual(
      o.thresholds.map((t) => t.signal),
      ['memory.available', 'allocatableMemory.available'],
    );
    assert.deepEqual(o.imageGc, {
      highThresholdPercent: 85,
      lowThresholdPercent: 80,
      minAgeMs: 120_000,
      maxAgeMs: 0,
    });
    assert.throws(
      () => evictionOptionsOf({ ...config, evictionHard: { 'nodefs.available': '101%' } }),
      (err: unknown) =>
        err instanceof EvictionConfigError && err.field === 'evictionHard[nodefs.available]',
    );
  });
});
