import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod, PodStatus } from 'kubernetes-types/core/v1.js';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { inNamespace, PODS } from '../kube/types.ts';
import { shutdownStatus } from '../nodeshutdown/pod-manager.ts';
import { PodWorkers } from '../podworkers/pod-workers.ts';
import type { PodSyncer } from '../podworkers/types.ts';
import { StatusManager, statusPatch } from '../status/manager.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { killPodNow, nodeShutdownOf } from './node-shutdown.ts';

const pods = inNamespace(PODS, 'ns');
const NOW = '2026-01-01T00:00:00.000Z';

describe('node shutdown wiring', () => {
  test('killPodNow: the worker stops the pod with the grace given; its terminal status carries the shutdown', async () => {
    const client = new FakeKubeClient();
    const pod = await client.create<Pod>(pods, {
      metadata: { name: 'p', namespace: 'ns' },
      spec: { containers: [{ name: 'c', image: 'busybox' }], terminationGracePeriodSeconds: 30 },
    });
    const clock = new FakeClock();
    const status = new StatusManager({ client, clock, logger: new MemoryLogger() });
    const graces: number[] = [];
    // What the pod sync reports: Running while it runs, Failed (no reason) once stopped.
    const syncer: PodSyncer = {
      syncPod: async (p) => {
        status.set(p, { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] });
        return Promise.resolve({});
      },
      syncTerminatingPod: async (p, grace) => {
        graces.push(grace);
        status.set(p, { phase: 'Failed', conditions: [{ type: 'Ready', status: 'False' }] });
        return Promise.resolve();
      },
      syncTerminatedPod: async (p) => {
        const previous: PodStatus = status.get(p.metadata?.uid ?? '') ?? {};
        // A later report keeps the non-kubelet conditions, not the reason (as generate.ts).
        status.set(p, {
          phase: 'Failed',
          conditions: (previous.conditions ?? []).filter((c) => c.type === 'DisruptionTarget'),
        });
        return Promise.resolve();
      },
    };
    const workers = new PodWorkers({ syncer, clock, logger: new MemoryLogger() });
    workers.update(pod, 'add');
    await clock.advance(0);
    await status.drain();
    const kill = killPodNow(
      () => workers,
      () => status,
      clock,
    );
    const killed = kill(pod, 7, (s) => shutdownStatus(s, NOW), new AbortController().signal);
    // The kill polls the worker on the clock until the pod has stopped.
    for (let i = 0; i < 5; i++) await clock.advance(100);
    await killed;
    await status.drain();
    assert.deepEqual(graces, [7]);
    const stored = await client.get<Pod>(pods, 'p');
    assert.equal(stored.status?.phase, 'Failed');
    assert.equal(stored.status?.reason, 'Terminated');
    assert.equal(
      stored.status?.message,
      'Pod was terminated in response to imminent node shutdown.',
    );
    const dt = stored.status?.conditions?.find((c) => c.type === 'DisruptionTarget');
    assert.equal(dt?.reason, 'TerminationByKubelet');
    assert.equal(dt?.status, 'True');
    await workers.close();
  });

  test("a DisruptionTarget is sent only with a terminal phase, and only the kubelet's own", () => {
    const dt = {
      type: 'DisruptionTarget',
      status: 'True',
      reason: 'TerminationByKubelet',
    };
    const conditions = (s: PodStatus): unknown =>
      (statusPatch(s)['conditions'] as { type: string }[]).map((c) => c.type);
    assert.deepEqual(conditions({ phase: 'Running', conditions: [dt] }), []);
    assert.deepEqual(conditions({ phase: 'Failed', conditions: [dt] }), ['DisruptionTarget']);
    assert.deepEqual(
      conditions({
        phase: 'Failed',
        conditions: [{ ...dt, reason: 'EvictionByEvictionAPI' }],
      }),
      [],
    );
  });

  test('no periods: no manager, so nothing ever connects to the system bus', () => {
    let connects = 0;
    const manager = nodeShutdownOf(
      { periods: [] },
      {
        nodeName: 'n1',
        pods: () => new Map(),
        podWorkers: () => {
          throw new Error('unused');
        },
        status: () => {
          throw new Error('unused');
        },
        syncNodeStatus: async () => Promise.resolve(),
        recorder: { event: () => undefined },
        clock: new FakeClock(),
        logger: new MemoryLogger(),
        rootDir: '/nonexistent',
        connect: () => {
          connects++;
          throw new Error('unused');
        },
      },
    );
    assert.equal(manager, undefined);
    assert.equal(connects, 0);
  });
});
