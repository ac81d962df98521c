/**
 * Housekeeping on the fake CRI and the fake clock. Its pass (HandlePodCleanups, run by
 * the sync loop's housekeeping tick) kills runtime pods nothing binds here once every
 * source has reported, and removes the volumes of pods that are gone. Its
 * garbage-collection pass keeps the per-object caches of a long-lived berth bounded:
 * the runtime status reader forgets containers and sandboxes the runtime no longer has,
 * and the back-offs drop entries idle past their reset period.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FakeCriClient } from '../cri/fake/index.ts';
import { cri } from '../cri/index.ts';
import { RelistPleg } from '../pleg/generic.ts';
import { PodWorkers } from '../podworkers/pod-workers.ts';
import { Backoff } from '../util/backoff.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FakeVolumeManager } from '../volumes/fake.ts';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { Housekeeping } from './housekeeping.ts';

const IMAGE = '127.0.0.1:5000/berth/busybox:1.35.0';

describe('Housekeeping garbage collection', () => {
  test('prunes runtime caches to the live objects and garbage-collects back-offs', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const client = new FakeCriClient({ clock });
    client.addImage(IMAGE, { preloaded: true });
    const logger = new MemoryLogger();
    const pleg = new RelistPleg({ runtime: client.runtime, clock, logger, onEvents: () => {} });
    const { podSandboxId } = await client.runtime.runPodSandbox({
      config: cri.PodSandboxConfig.fromPartial({
        metadata: { name: 'p', namespace: 'ns', uid: 'u1', attempt: 0 },
        labels: { 'io.kubernetes.pod.uid': 'u1' },
      }),
    });
    const { containerId } = await client.runtime.createContainer({
      podSandboxId,
      config: cri.ContainerConfig.fromPartial({
        metadata: { name: 'c', attempt: 0 },
        labels: { 'io.kubernetes.pod.uid': 'u1', 'io.kubernetes.container.name': 'c' },
        image: { image: IMAGE },
      }),
    });
    await pleg.relist();
    const pruned: ReadonlySet<string>[] = [];
    const backoff = new Backoff(clock, {
      initialMs: 10_000,
      maxMs: 300_000,
      resetAfterMs: 600_000,
    });
    backoff.next('u1/c');
    const housekeeping = new Housekeeping({
      cri: client,
      pleg,
      source: { synced: true, pods: () => new Map() },
      podWorkers: new PodWorkers({
        syncer: {
          syncPod: () => Promise.resolve({}),
          syncTerminatingPod: () => Promise.resolve(),
          syncTerminatedPod: () => Promise.resolve(),
        },
        clock,
        logger,
      }),
      clock,
      logger,
      runtimeCaches: [{ prune: (ids) => pruned.push(ids) }],
      backoffs: [backoff],
    });
    await housekeeping.garbageCollect(AbortSignal.timeout(10_000));
    assert.deepEqual([...(pruned[0] ?? [])].sort(), [containerId, podSandboxId].sort());
    assert.equal(backoff.size, 1, 'a fresh back-off entry is kept');
    // Ten minutes idle: the entry is dropped, and so is the runtime object once gone.
    await clock.advance(600_001);
    await client.runtime.removeContainer({ containerId });
    await client.runtime.stopPodSandbox({ podSandboxId });
    await client.runtime.removePodSandbox({ podSandboxId });
    await pleg.relist();
    await housekeeping.garbageCollect(AbortSignal.timeout(10_000));
    assert.deepEqual([...(pruned[1] ?? [])], []);
    assert.equal(backoff.size, 0);
  });

  test("eviction's reclaim removes every dead container of a pod no worker runs", async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const client = new FakeCriClient({ clock });
    client.addImage(IMAGE, { preloaded: true });
    const logger = new MemoryLogger();
    const pleg = new RelistPleg({ runtime: client.runtime, clock, logger, onEvents: () => {} });
    const { podSandboxId } = await client.runtime.runPodSandbox({
      config: cri.PodSandboxConfig.fromPartial({
        metadata: { name: 'done', namespace: 'ns', uid: 'u2', attempt: 0 },
        labels: { 'io.kubernetes.pod.uid': 'u2' },
      }),
    });
    const { containerId } = await client.runtime.createContainer({
      podSandboxId,
      config: cri.ContainerConfig.fromPartial({
        metadata: { name: 'c', attempt: 0 },
        labels: { 'io.kubernetes.pod.uid': 'u2', 'io.kubernetes.container.name': 'c' },
        image: { image: IMAGE },
      }),
    });
    await client.runtime.startContainer({ containerId });
    await client.runtime.stopContainer({ containerId, timeout: 0 });
    await pleg.relist();
    const housekeeping = new Housekeeping({
      cri: client,
      pleg,
      source: { synced: true, pods: () => new Map() },
      podWorkers: new PodWorkers({
        syncer: {
          syncPod: () => Promise.resolve({}),
          syncTerminatingPod: () => Promise.resolve(),
          syncTerminatedPod: () => Promise.resolve(),
        },
        clock,
        logger,
      }),
      clock,
      logger,
    });
    const ids = async (): Promise<string[]> =>
      (await client.runtime.listContainers({})).containers.map((c) => c.id);
    // The periodic pass keeps the newest dead container per name.
    await housekeeping.garbageCollect(AbortSignal.timeout(10_000));
    assert.deepEqual(await ids(), [containerId]);
    await housekeeping.garbageCollect(AbortSignal.timeout(10_000), { allOfTerminatedPods: true });
    assert.deepEqual(await ids(), []);
  });
});

/** A running runtime pod `uid` (sandbox and one started container) in the fake CRI. */
async function runtimePod(client: FakeCriClient, uid: string): Promise<void> {
  const { podSandboxId } = await client.runtime.runPodSandbox({
    config: cri.PodSandboxConfig.fromPartial({
      metadata: { name: uid, namespace: 'ns', uid, attempt: 0 },
      labels: { 'io.kubernetes.pod.uid': uid },
    }),
  });
  const { containerId } = await client.runtime.createContainer({
    podSandboxId,
    config: cri.ContainerConfig.fromPartial({
      metadata: { name: 'c', attempt: 0 },
      labels: { 'io.kubernetes.pod.uid': uid, 'io.kubernetes.container.name': 'c' },
      image: { image: IMAGE },
    }),
  });
  await client.runtime.startContainer({ containerId });
}

describe('Housekeeping pass (handlePodCleanups)', () => {
  test('kills runtime pods nothing binds here, only once every source has reported', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const client = new FakeCriClient({ clock });
    client.addImage(IMAGE, { preloaded: true });
    const logger = new MemoryLogger();
    const pleg = new RelistPleg({ runtime: client.runtime, clock, logger, onEvents: () => {} });
    await runtimePod(client, 'bound');
    await runtimePod(client, 'orphan');
    await pleg.relist();
    const source = {
      synced: false,
      pods: () => new Map<string, Pod>([['bound', { metadata: { uid: 'bound' } }]]),
    };
    const volumes = new FakeVolumeManager();
    volumes.podUIDs.add('gone-long-ago');
    const housekeeping = new Housekeeping({
      ...{ cri: client, pleg, source, clock, logger, volumes },
      podWorkers: new PodWorkers({
        syncer: {
          syncPod: () => Promise.resolve({}),
          syncTerminatingPod: () => Promise.resolve(),
          syncTerminatedPod: () => Promise.resolve(),
        },
        clock,
        logger,
      }),
    });
    const sandboxesOf = async (): Promise<string[]> =>
      (await client.runtime.listPodSandbox({})).items.map((s) => s.metadata?.uid ?? '').sort();
    await housekeeping.handlePodCleanups(AbortSignal.timeout(10_000));
    assert.deepEqual(
      await sandboxesOf(),
      ['bound', 'orphan'],
      'nothing killed before the sources reported',
    );
    assert.ok(volumes.podUIDs.has('gone-long-ago'));
    source.synced = true;
    await housekeeping.handlePodCleanups(AbortSignal.timeout(10_000));
    assert.deepEqual(await sandboxesOf(), ['bound']);
    assert.ok(!volumes.podUIDs.has('gone-long-ago'), "a gone pod's directory is removed");
  });

  test('a failed pass is logged and the next one runs', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const client = new FakeCriClient({ clock });
    const logger = new MemoryLogger();
    const pleg = new RelistPleg({ runtime: client.runtime, clock, logger, onEvents: () => {} });
    let passes = 0;
    const housekeeping = new Housekeeping({
      cri: client,
      pleg,
      source: {
        synced: true,
        pods: () => {
          passes += 1;
          if (passes === 1) throw new Error('pod manager unavailable');
          return new Map();
        },
      },
      podWorkers: new PodWorkers({
        syncer: {
          syncPod: () => Promise.resolve({}),
          syncTerminatingPod: () => Promise.resolve(),
          syncTerminatedPod: () => Promise.resolve(),
        },
        clock,
        logger,
      }),
      clock,
      logger,
    });
    await housekeeping.handlePodCleanups(AbortSignal.timeout(10_000));
    assert.ok(logger.records.some((r) => r.level === 'warn' && r.msg === 'Housekeeping failed'));
    await housekeeping.handlePodCleanups(AbortSignal.timeout(10_000));
    assert.ok(passes >= 2);
  });
});
