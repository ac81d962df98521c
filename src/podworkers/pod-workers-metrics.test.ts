import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { KubeletMetrics } from '../metrics/registry.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { PodWorkers } from './pod-workers.ts';
import type { PodSyncer } from './types.ts';

const settle = async (): Promise<void> => {
  for (let i = 0; i < 20; i++) await new Promise<void>((r) => setImmediate(r));
};

describe('PodWorkers metrics', () => {
  test('pod_worker_duration_seconds by operation: create, update, sync, terminating', async () => {
    const clock = new FakeClock();
    const metrics = new KubeletMetrics();
    const syncer: PodSyncer = {
      syncPod: async () => {
        // The sync takes 2 s of (fake) time.
        await clock.sleep(2000);
        return {};
      },
      syncTerminatingPod: () => Promise.resolve(),
      syncTerminatedPod: () => Promise.resolve(),
    };
    const w = new PodWorkers({ syncer, clock, logger: new MemoryLogger(), metrics });
    const pod: Pod = { metadata: { uid: 'a', name: 'p', namespace: 'ns' } };
    w.update(pod, 'add');
    await settle();
    await clock.advance(2000);
    await settle();
    w.update(pod, 'update');
    await settle();
    await clock.advance(2000);
    await settle();
    w.resyncAll();
    await settle();
    await clock.advance(2000);
    await settle();
    w.update(pod, 'remove');
    await settle();
    await w.waitForgotten('a');
    const text = await metrics.registry.metrics();
    const count = (op: string): string | undefined =>
      new RegExp(
        `^kubelet_pod_worker_duration_seconds_count\\{operation_type="${op}"\\} (\\d+)$`,
        'm',
      ).exec(text)?.[1];
    assert.equal(count('create'), '1');
    assert.equal(count('update'), '1');
    assert.equal(count('sync'), '1');
    assert.equal(count('terminating'), '1');
    assert.equal(count('terminated'), '1');
    assert.match(
      text,
      /^kubelet_pod_worker_duration_seconds_bucket\{le="2\.5",operation_type="create"\} 1$/m,
    );
    assert.match(
      text,
      /^kubelet_pod_worker_duration_seconds_bucket\{le="1",operation_type="create"\} 0$/m,
    );
  });
});
