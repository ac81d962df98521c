import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { MemoryEventRecorder } from '../events/types.ts';
import { FakeStatsProvider } from '../stats/fake.ts';
import type { PodStats, Summary } from '../stats/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { EvictionManager, type EvictionManagerOptions } from './manager.ts';
import { parseThresholdConfig } from './thresholds.ts';
import type { EvictionStatus, NodeReclaimer } from './types.ts';

const Mi = 2 ** 20;
const Gi = 2 ** 30;

function pod(
  name: string,
  o: { request?: string; limit?: string; priority?: number; critical?: boolean } = {},
): Pod {
  return {
    metadata: {
      name,
      namespace: 'default',
      uid: `uid-${name}`,
      ...(o.critical === true && { annotations: { 'kubernetes.io/config.source': 'file' } }),
    },
    spec: {
      ...(o.priority !== undefined && { priority: o.priority }),
      terminationGracePeriodSeconds: 30,
      containers: [
        {
          name: 'c',
          image: 'busybox',
          resources: {
            ...(o.request !== undefined && { requests: { memory: o.request } }),
            ...(o.limit !== undefined && { limits: { memory: o.limit } }),
          },
        },
      ],
    },
  };
}

function podStats(p: Pod, memory: number, extra: Partial<PodStats> = {}): PodStats {
  const time = '2026-01-01T00:00:00Z';
  return {
    podRef: {
      name: p.metadata?.name ?? '',
      namespace: 'default',
      uid: p.metadata?.uid ?? '',
    },
    startTime: time,
    containers: [{ name: 'c', startTime: time, memory: { time, workingSetBytes: memory } }],
    memory: { time, workingSetBytes: memory },
    ...extra,
  };
}

interface Harness {
  clock: FakeClock;
  stats: FakeStatsProvider;
  recorder: MemoryEventRecorder;
  killed: { pod: Pod; grace: number; status: EvictionStatus }[];
  manager: EvictionManager;
  pods: Pod[];
  setNode(availableMemory: number, at?: number, pids?: number): void;
}

function harness(
  config: Partial<Parameters<typeof parseThresholdConfig>[0]> = {},
  extra: Partial<EvictionManagerOptions> = {},
): Harness {
  const clock = new FakeClock();
  const empty: Summary = { node: { nodeName: 'n1', startTime: '' }, pods: [] };
  const stats = new FakeStatsProvider(empty);
  const recorder = new MemoryEventRecorder();
  const killed: Harness['killed'] = [];
  const pods: Pod[] = [];
  const podStatsList: PodStats[] = [];
  const h: Harness = {
    clock,
    stats,
    recorder,
    killed,
    pods,
    manager: new EvictionManager({
      thresholds: parseThresholdConfig({
        evictionHard: { 'memory.available': '1Gi' },
        evictionSoft: {},
        evictionSoftGracePeriodMs: {},
        evictionMinimumReclaim: {},
        enforceNodeAllocatable: [],
        ...config,
      }),
      pressureTransitionPeriodMs: 60_000,
      maxPodGracePeriodSeconds: 10,
      stats,
      clock,
      logger: new MemoryLogger(),
      recorder,
      nodeName: 'n1',
      activePods: () => pods.filter((p) => !killed.some((k) => k.pod === p)),
      killPod: (p, grace, status) => {
        killed.push({ pod: p, grace, status });
      },
      podCleanedUp: () => true,
      ...extra,
    }),
    setNode(availableMemory, at = clock.now(), pids) {
      const time = new Date(at).toISOString();
      stats.summaryToReturn = {
        node: {
          nodeName: 'n1',
          startTime: time,
          memory: { time, availableBytes: availableMemory, workingSetBytes: 8 * Gi },
          ...(pids !== undefined && { rlimit: { time, maxpid: 32768, curproc: 32768 - pids } }),
        },
        pods: podStatsList,
      };
    },
  };
  (h as { podStats?: PodStats[] }).podStats = podStatsList;
  return h;
}

function addPod(h: Harness, p: Pod, memory: number, extra: Partial<PodStats> = {}): void {
  h.pods.push(p);
  (h as unknown as { podStats: PodStats[] }).podStats.push(podStats(p, memory, extra));
}

const signal = new AbortController().signal;

describe('EvictionManager', () => {
  test('no pressure: no condition, nothing evicted', async () => {
    const h = harness();
    addPod(h, pod('a'), 100 * Mi);
    h.setNode(4 * Gi);
    assert.deepEqual(await h.manager.synchronize(signal), []);
    assert.deepEqual(h.manager.conditions(), []);
  });

  test('memory pressure: ranks over-request pods first, then priority, then usage above request', async () => {
    const h = harness();
    const guaranteed = pod('guaranteed', { request: '1Gi', limit: '1Gi' });
    const burstable = pod('burstable', { request: '100Mi' });
    const bestEffort = pod('besteffort');
    const hog = pod('hog', { priority: 1000 });
    addPod(h, guaranteed, 900 * Mi);
    addPod(h, burstable, 300 * Mi);
    addPod(h, bestEffort, 50 * Mi);
    addPod(h, hog, 2 * Gi);
    h.setNode(512 * Mi);
    const evicted = await h.manager.synchronize(signal);
    assert.deepEqual(h.manager.conditions(), ['MemoryPressure']);
    // besteffort and burstable exceed their requests and have the lowest priority;
    // burstable uses more above its request (200Mi vs 50Mi).
    assert.deepEqual(
      evicted.map((p) => p.metadata?.name),
      ['burstable'],
    );
    const k = h.killed[0];
    assert.equal(k?.grace, 1);
    assert.equal(
      k?.status.message,
      'The node was low on resource: memory. Threshold quantity: 1Gi, available: 512Mi. ' +
        'Container c was using 300Mi, request is 100Mi, has larger consumption of memory. ',
    );
    assert.equal(k?.status.reason, 'Evicted');
    assert.equal(k?.status.condition?.type, 'DisruptionTarget');
    assert.equal(k?.status.condition?.reason, 'TerminationByKubelet');
    assert.deepEqual(
      h.recorder.events.map((e) => [e.reason, e.message]),
      [
        ['EvictionThresholdMet', 'Attempting to reclaim memory'],
        ['Evicted', k?.status.message],
      ],
    );
    // The next pass (newer stats) takes the next one: besteffort, never the guaranteed pod first.
    await h.clock.advance(10_000);
    h.setNode(512 * Mi);
    assert.deepEqual(
      (await h.manager.synchronize(signal)).map((p) => p.metadata?.name),
      ['besteffort'],
    );
  });

  test('stats not updated since the last pass: no second eviction', async () => {
    const h = harness();
    addPod(h, pod('a'), 100 * Mi);
    addPod(h, pod('b'), 100 * Mi);
    h.setNode(100 * Mi);
    assert.equal((await h.manager.synchronize(signal)).length, 1);
    assert.equal((await h.manager.synchronize(signal)).length, 0);
  });

  test('critical (static) pods are never evicted', async () => {
    const h = harness();
    addPod(h, pod('static', { critical: true }), 2 * Gi);
    h.setNode(100 * Mi);
    assert.deepEqual(await h.manager.synchronize(signal), []);
    assert.equal(h.killed.length, 0);
  });

  test('the condition is held for the transition period, then clears', async () => {
    const h = harness();
    h.setNode(100 * Mi);
    await h.manager.synchronize(signal);
    assert.deepEqual(h.manager.conditions(), ['MemoryPressure']);
    await h.clock.advance(30_000);
    h.setNode(4 * Gi);
    await h.manager.synchronize(signal);
    assert.deepEqual(h.manager.conditions(), ['MemoryPressure']);
    await h.clock.advance(30_000);
    h.setNode(4 * Gi);
    await h.manager.synchronize(signal);
    assert.deepEqual(h.manager.conditions(), []);
  });

  test('a soft threshold evicts only after its grace period, with the capped pod grace', async () => {
    const h = harness({
      evictionHard: {},
      evictionSoft: { 'memory.available': '2Gi' },
      evictionSoftGracePeriodMs: { 'memory.available': 30_000 },
    });
    addPod(h, pod('a'), 100 * Mi);
    h.setNode(1 * Gi);
    assert.deepEqual(await h.manager.synchronize(signal), []);
    assert.deepEqual(h.manager.conditions(), ['MemoryPressure']);
    await h.clock.advance(30_000);
    h.setNode(1 * Gi);
    assert.equal((await h.manager.synchronize(signal)).length, 1);
    // min(evictionMaxPodGracePeriod 10, terminationGracePeriodSeconds 30)
    assert.equal(h.killed[0]?.grace, 10);
  });

  test('minimum reclaim keeps a met threshold until the signal is above threshold + reclaim', async () => {
    const h = harness({ evictionMinimumReclaim: { 'memory.available': '1Gi' } });
    addPod(h, pod('a'), 100 * Mi);
    addPod(h, pod('b'), 100 * Mi);
    h.setNode(512 * Mi);
    assert.equal((await h.manager.synchronize(signal)).length, 1);
    await h.clock.advance(10_000);
    h.setNode(1536 * Mi); // above 1Gi but below 1Gi + 1Gi
    assert.equal((await h.manager.synchronize(signal)).length, 1);
    await h.clock.advance(10_000);
    h.setNode(3 * Gi);
    assert.equal((await h.manager.synchronize(signal)).length, 0);
  });

  test('PID pressure: lower priority first, then the most processes', async () => {
    const h = harness({ evictionHard: { 'pid.available': '1000' } });
    addPod(h, pod('few'), 1, { process_stats: { process_count: 3 } });
    addPod(h, pod('many'), 1, { process_stats: { process_count: 900 } });
    addPod(h, pod('important'), 1, { process_stats: { process_count: 5000 } });
    (h.pods[2]?.spec as { priority?: number }).priority = 100;
    h.setNode(4 * Gi, h.clock.now(), 500);
    const evicted = await h.manager.synchronize(signal);
    assert.deepEqual(h.manager.conditions(), ['PIDPressure']);
    assert.deepEqual(
      evicted.map((p) => p.metadata?.name),
      ['many'],
    );
    assert.equal(
      h.killed[0]?.status.message,
      'The node was low on resource: pids. Threshold quantity: 1k, available: 500. ',
    );
  });

  test('disk pressure: node-level reclaim first; no eviction when it is enough', async () => {
    const calls: string[] = [];
    let freed = false;
    const reclaimer: NodeReclaimer = {
      deleteAllUnusedContainers: () => {
        calls.push('containers');
        return Promise.resolve();
      },
      deleteUnusedImages: () => {
        calls.push('images');
        freed = true;
        return Promise.resolve();
      },
    };
    const h = harness({ evictionHard: { 'nodefs.available': '10%' } }, { reclaimer });
    addPod(h, pod('a'), 1);
    const fsAt = (): void => {
      const time = new Date(h.clock.now()).toISOString();
      h.stats.summaryToReturn = {
        node: {
          nodeName: 'n1',
          startTime: time,
          fs: { time, availableBytes: freed ? 5 * Gi : 512 * Mi, capacityBytes: 10 * Gi },
        },
        pods: [],
      };
    };
    fsAt();
    const orig = h.stats.summary.bind(h.stats);
    h.stats.summary = (o) => {
      fsAt();
      return orig(o);
    };
    assert.deepEqual(await h.manager.synchronize(signal), []);
    assert.deepEqual(calls, ['containers', 'images']);
    assert.deepEqual(h.manager.conditions(), ['DiskPressure']);
    assert.equal(h.killed.length, 0);
  });

  test('local storage: a container over its ephemeral-storage limit is evicted without pressure', async () => {
    const h = harness();
    const limited = pod('limited');
    const c = limited.spec?.containers[0];
    if (c !== undefined) c.resources = { limits: { 'ephemeral-storage': '10Mi' } };
    const time = '2026-01-01T00:00:00Z';
    addPod(h, limited, 1, {
      containers: [
        {
          name: 'c',
          startTime: time,
          rootfs: { time, usedBytes: 8 * Mi },
          logs: { time, usedBytes: 3 * Mi },
        },
      ],
    });
    addPod(h, pod('other'), 1);
    h.setNode(4 * Gi);
    const evicted = await h.manager.synchronize(signal);
    assert.deepEqual(
      evicted.map((p) => p.metadata?.name),
      ['limited'],
    );
    assert.deepEqual(h.manager.conditions(), []);
    assert.equal(h.killed[0]?.grace, 1);
    assert.equal(
      h.killed[0]?.status.message,
      'Container c exceeded its local ephemeral storage limit "10Mi". ',
    );
    assert.equal(h.killed[0]?.status.condition, undefined);
  });

  test('local storage: the pod total over the sum of its limits', async () => {
    const h = harness();
    const limited = pod('limited');
    const c = limited.spec?.containers[0];
    if (c !== undefined) c.resources = { limits: { 'ephemeral-storage': '1Gi' } };
    addPod(h, limited, 1, { 'ephemeral-storage': { time: '', usedBytes: 2 * Gi } });
    h.setNode(4 * Gi);
    await h.manager.synchronize(signal);
    assert.equal(
      h.killed[0]?.status.message,
      'Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. ',
    );
  });

  test('local storage: an emptyDir over its sizeLimit, checked before the container limits', async () => {
    const h = harness();
    const limited = pod('limited');
    if (limited.spec !== undefined)
      limited.spec.volumes = [
        { name: 'small', emptyDir: { sizeLimit: '1024Ki' } },
        { name: 'big', emptyDir: { sizeLimit: '1Gi' } },
        { name: 'unlimited', emptyDir: {} },
      ];
    const c = limited.spec?.containers[0];
    if (c !== undefined) c.resources = { limits: { 'ephemeral-storage': '1Mi' } };
    const time = '2026-01-01T00:00:00Z';
    addPod(h, limited, 1, {
      volume: [
        { name: 'unlimited', time, usedBytes: 5 * Gi },
        { name: 'big', time, usedBytes: 10 * Mi },
        { name: 'small', time, usedBytes: Mi + 1 },
      ],
      containers: [{ name: 'c', startTime: time, logs: { time, usedBytes: 2 * Mi } }],
    });
    const within = pod('within');
    if (within.spec !== undefined)
      within.spec.volumes = [{ name: 'small', emptyDir: { sizeLimit: '1Mi' } }];
    addPod(h, within, 1, { volume: [{ name: 'small', time, usedBytes: Mi }] });
    h.setNode(4 * Gi);
    const evicted = await h.manager.synchronize(signal);
    assert.deepEqual(
      evicted.map((p) => p.metadata?.name),
      ['limited'],
    );
    assert.equal(h.killed[0]?.grace, 1);
    assert.equal(
      h.killed[0]?.status.message,
      'Usage of EmptyDir volume "small" exceeds the limit "1Mi". ',
    );
  });
});
