/**
 * The sync loop on the fakes and the fake clock: each input reaches its handler (the
 * pod sources' ADD / UPDATE / REMOVE, PLEG events, probe results, the sync and
 * housekeeping ticks), through real pod workers whose syncer records what it is asked
 * to do, the fake PLEG, and the real prober over the fake CRI.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { instance, runtimeStatus, sandbox, spec } from '../container/testing.ts';
import { cri } from '../cri/index.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { inNamespace, PODS } from '../kube/types.ts';
import { FakePleg } from '../pleg/fake.ts';
import { PodWorkers } from '../podworkers/pod-workers.ts';
import type { PodSyncer } from '../podworkers/types.ts';
import { ProberManager } from '../prober/manager.ts';
import { FakeStatusManager } from '../status/fake.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { configChannel, SyncLoop } from './sync-loop.ts';

/** Lets queued pod worker work run (several hops of promises and immediates). */
async function settle(): Promise<void> {
  for (let i = 0; i < 30; i++) await new Promise<void>((r) => setImmediate(r));
}

function pod(name: string, extra: { deleting?: boolean; static?: boolean } = {}): Pod {
  return {
    metadata: {
      name,
      namespace: 'default',
      uid: `uid-${name}`,
      ...(extra.deleting === true && { deletionTimestamp: '2026-01-01T00:00:00Z' }),
      ...(extra.static === true && { annotations: { 'kubernetes.io/config.source': 'file' } }),
    },
    spec: { nodeName: 'node-a', containers: [spec('main')], terminationGracePeriodSeconds: 1 },
  };
}

/** What the pod workers asked the syncer to do, as `<op> <pod name>`. */
class RecordingSyncer implements PodSyncer {
  readonly calls: string[] = [];
  syncPod(p: Pod): Promise<{ requeueAfterMs?: number }> {
    this.calls.push(`sync ${p.metadata?.name ?? ''}`);
    return Promise.resolve({});
  }
  syncTerminatingPod(p: Pod): Promise<void> {
    this.calls.push(`terminating ${p.metadata?.name ?? ''}`);
    return Promise.resolve();
  }
  syncTerminatedPod(p: Pod): Promise<void> {
    this.calls.push(`terminated ${p.metadata?.name ?? ''}`);
    return Promise.resolve();
  }
  count(what: string): number {
    return this.calls.filter((c) => c === what).length;
  }
}

const stops: AbortController[] = [];
afterEach(() => {
  for (const s of stops.splice(0)) s.abort();
});

function harness(opts: { syncFrequencyMs?: number; housekeepingPeriodMs?: number } = {}) {
  const clock = new FakeClock();
  const logger = new MemoryLogger();
  const stop = new AbortController();
  stops.push(stop);
  const kube = new FakeKubeClient({ clock });
  const syncer = new RecordingSyncer();
  const podWorkers = new PodWorkers({ syncer, clock, logger });
  const pods = new Map<string, Pod>();
  const rejected = new Set<string>();
  const log: string[] = [];
  const status = new FakeStatusManager();
  const fakeCri = new FakeCriClient({ clock });
  const prober = new ProberManager({
    runtime: fakeCri.runtime,
    clock,
    recorder: new MemoryEventRecorder(),
    logger,
    random: () => 0,
    onChange: (podUID, probe) => {
      log.push(`probe ${probe} ${podUID}`);
      loop.dispatch({ kind: 'probe', probe, podUID });
    },
  });
  let housekeepingPasses = 0;
  const loop: SyncLoop = new SyncLoop({
    clock,
    logger,
    kube,
    signal: stop.signal,
    pods: () => pods,
    admission: {
      admit: (p) => {
        const uid = p.metadata?.uid ?? '';
        log.push(`admit ${p.metadata?.name ?? ''}`);
        return !rejected.has(uid);
      },
      isRejected: (uid) => rejected.has(uid),
      forget: (uid) => {
        log.push(`forget ${uid}`);
      },
    },
    podWorkers,
    prober,
    objects: {
      register: (p) => {
        log.push(`register ${p.metadata?.name ?? ''}`);
      },
      unregister: (uid) => {
        log.push(`unregister ${uid}`);
      },
    },
    status,
    housekeeping: {
      handlePodCleanups: () => {
        housekeepingPasses += 1;
        return Promise.resolve();
      },
    },
    syncFrequencyMs: opts.syncFrequencyMs ?? 60_000,
    ...(opts.housekeepingPeriodMs !== undefined && {
      housekeepingPeriodMs: opts.housekeepingPeriodMs,
    }),
  });
  // The pod sources report through the config channel; the pod manager holds what they sent.
  const channel = configChannel(() => loop);
  const source = {
    add: (p: Pod) => {
      pods.set(p.metadata?.uid ?? '', p);
      channel.add(p);
    },
    update: (p: Pod) => {
      pods.set(p.metadata?.uid ?? '', p);
      channel.update(p);
    },
    remove: (p: Pod) => {
      pods.delete(p.metadata?.uid ?? '');
      channel.remove(p);
    },
  };
  const pleg = new FakePleg({
    clock,
    onEvents: (events) => {
      loop.dispatch({ kind: 'pleg', events });
    },
  });
  return {
    ...{ clock, kube, syncer, podWorkers, pods, rejected, log, status, prober, fakeCri },
    ...{ loop, source, pleg, stop: stop.signal, housekeepingPasses: () => housekeepingPasses },
  };
}

describe('SyncLoop: pod source updates', () => {
  test('ADD admits the pod, registers its objects, probes it and starts its worker', async () => {
    const h = harness();
    h.source.add(pod('web'));
    await settle();
    assert.deepEqual(h.log, ['admit web', 'register web']);
    assert.equal(h.podWorkers.state('uid-web'), 'syncing');
    assert.equal(h.syncer.count('sync web'), 1);
    // The prober follows the pod's containers once it was added: a worker per probe.
    const probed = pod('probed');
    probed.spec = { containers: [spec('main', { readinessProbe: { exec: { command: ['x'] } } })] };
    const running = runtimeStatus(
      [sandbox()],
      [{ ...instance('main', 'running', { id: 'c1' }), startedAt: h.clock.now() }],
    );
    h.prober.syncPod(probed, running);
    assert.equal(h.prober.workerCount, 0, 'a pod never added is not probed');
    h.source.add(probed);
    h.prober.syncPod(probed, running);
    assert.equal(h.prober.workerCount, 1);
  });

  test('a rejected pod gets no worker and no probes', async () => {
    const h = harness();
    h.rejected.add('uid-big');
    h.source.add(pod('big'));
    await settle();
    assert.deepEqual(h.log, ['admit big']);
    assert.equal(h.podWorkers.state('uid-big'), undefined);
    assert.deepEqual(h.syncer.calls, []);
  });

  test('UPDATE hands the new pod to its worker; a deletion terminates it', async () => {
    const h = harness();
    h.source.add(pod('web'));
    await settle();
    h.source.update(pod('web'));
    await settle();
    assert.equal(h.syncer.count('sync web'), 2);
    h.source.update(pod('web', { deleting: true }));
    await settle();
    assert.equal(h.syncer.count('terminating web'), 1);
    assert.equal(h.podWorkers.state('uid-web'), 'terminated');
  });

  test('an API pod rejected on an update is deleted from the API; a static pod is not', async () => {
    const h = harness();
    const created = await h.kube.create(inNamespace(PODS, 'default'), pod('api'));
    await h.kube.delete(inNamespace(PODS, 'default'), 'api', { gracePeriodSeconds: 30 });
    const deleting = await h.kube.get<Pod>(inNamespace(PODS, 'default'), 'api');
    assert.ok(deleting.metadata?.deletionTimestamp != null);
    h.rejected.add(created.metadata?.uid ?? '');
    h.source.update(deleting);
    await settle();
    await assert.rejects(h.kube.get<Pod>(inNamespace(PODS, 'default'), 'api'));
    const deletes = (): number => h.kube.calls.filter((c) => c.verb === 'delete').length;
    const before = deletes();
    h.rejected.add('uid-static');
    h.source.update(pod('static', { deleting: true, static: true }));
    await settle();
    assert.equal(deletes(), before, 'a static pod has no API object to delete');
  });

  test('REMOVE stops its probes and terminates its worker; a rejected pod only loses its status', async () => {
    const h = harness();
    const probed = pod('web');
    probed.spec = { containers: [spec('main', { livenessProbe: { exec: { command: ['x'] } } })] };
    h.source.add(probed);
    await settle();
    h.prober.syncPod(
      probed,
      runtimeStatus(
        [sandbox()],
        [{ ...instance('main', 'running', { id: 'c1' }), startedAt: h.clock.now() }],
      ),
    );
    assert.equal(h.prober.workerCount, 1);
    h.source.remove(probed);
    assert.equal(h.prober.workerCount, 0, 'probes stop with the removal');
    await settle();
    assert.equal(h.syncer.count('terminating web'), 1);
    assert.equal(h.syncer.count('terminated web'), 1);
    assert.ok(h.log.includes('unregister uid-web') && h.log.includes('forget uid-web'));

    h.rejected.add('uid-big');
    h.status.set(pod('big'), { phase: 'Failed', reason: 'OutOfcpu' });
    h.source.add(pod('big'));
    h.source.remove(pod('big'));
    await settle();
    assert.equal(h.status.get('uid-big'), undefined);
    assert.equal(h.podWorkers.state('uid-big'), undefined);
  });
});

describe('SyncLoop: PLEG events and probe results', () => {
  test("a PLEG event for a pod wakes that pod's worker only; unknown pods are ignored", async () => {
    const h = harness();
    h.source.add(pod('a'));
    h.source.add(pod('b'));
    await settle();
    const container = cri.Container.fromPartial({
      id: 'c1',
      podSandboxId: 's1',
      state: cri.ContainerState.CONTAINER_RUNNING,
    });
    h.pleg.setPod({ uid: 'uid-a', sandboxes: [], containers: [container] });
    h.pleg.setPod({ uid: 'uid-stranger', sandboxes: [], containers: [{ ...container, id: 'c2' }] });
    await h.pleg.relist();
    await settle();
    assert.equal(h.syncer.count('sync a'), 2);
    assert.equal(h.syncer.count('sync b'), 1);
    assert.equal(h.podWorkers.state('uid-stranger'), undefined, 'no worker for a stranger');
  });

  test('a changed probe result syncs the pod', async () => {
    const h = harness();
    let ready = 1;
    h.fakeCri.onExec(() => ({ exitCode: ready, stdout: '' }));
    const probed = pod('web');
    const main = spec('main', {
      readinessProbe: { exec: { command: ['ready'] }, periodSeconds: 1, failureThreshold: 1 },
    });
    probed.spec = { containers: [main] };
    h.source.add(probed);
    await settle();
    const syncs = h.syncer.count('sync web');
    const image = 'registry.test/main:1';
    h.fakeCri.addImage(image, { preloaded: true });
    const config = cri.PodSandboxConfig.fromPartial({
      metadata: { name: 'web', uid: 'uid-web', namespace: 'default' },
    });
    const { podSandboxId } = await h.fakeCri.runtime.runPodSandbox({ config });
    const { containerId } = await h.fakeCri.runtime.createContainer({
      podSandboxId,
      sandboxConfig: config,
      config: { metadata: { name: 'main' }, image: { image }, logPath: 'x.log' },
    });
    await h.fakeCri.runtime.startContainer({ containerId });
    h.prober.syncPod(
      probed,
      runtimeStatus(
        [sandbox()],
        [{ ...instance('main', 'running', { id: containerId }), startedAt: h.clock.now() }],
      ),
    );
    await settle();
    assert.deepEqual(
      h.log.filter((l) => l.startsWith('probe')),
      ['probe readiness uid-web'],
    );
    assert.equal(h.syncer.count('sync web'), syncs + 1);
    ready = 0;
    await h.clock.advance(1000);
    await settle();
    assert.equal(h.syncer.count('sync web'), syncs + 2, 'failure -> success syncs again');
    await h.prober.stop();
  });
});

describe('SyncLoop: tickers and health', () => {
  test('the sync tick resyncs every pod every syncFrequency', async () => {
    const h = harness({ syncFrequencyMs: 10_000 });
    h.source.add(pod('a'));
    h.source.add(pod('b'));
    await settle();
    const running = h.loop.run(h.stop);
    await h.clock.advance(9_999);
    await settle();
    assert.equal(h.syncer.count('sync a'), 1, 'no resync before the period');
    await h.clock.advance(1);
    await settle();
    assert.equal(h.syncer.count('sync a'), 2);
    assert.equal(h.syncer.count('sync b'), 2);
    stops.splice(0).forEach((s) => {
      s.abort();
    });
    await running;
  });

  test('housekeeping runs every podHousekeepingPeriod (default 2 s)', async () => {
    const h = harness({ housekeepingPeriodMs: 5000 });
    const running = h.loop.run(h.stop);
    await h.clock.advance(4999);
    assert.equal(h.housekeepingPasses(), 0, 'no pass before the period');
    await h.clock.advance(1);
    assert.equal(h.housekeepingPasses(), 1);
    await h.clock.advance(5000);
    assert.equal(h.housekeepingPasses(), 2);
    stops.splice(0).forEach((s) => {
      s.abort();
    });
    await running;
    const d = harness();
    const other = d.loop.run(d.stop);
    await d.clock.advance(2000);
    assert.equal(d.housekeepingPasses(), 1);
    stops.splice(0).forEach((s) => {
      s.abort();
    });
    await other;
  });

  test('health fails once no iteration ran for twice the sync period (at least 30 s)', async () => {
    const h = harness({ syncFrequencyMs: 10_000 });
    assert.equal(h.loop.health(), undefined, 'healthy before the first iteration');
    await h.loop.syncLoopIteration({ kind: 'sync' }, h.stop);
    await h.clock.advance(30_000);
    assert.equal(h.loop.health(), undefined);
    await h.clock.advance(1_000);
    assert.match(h.loop.health() ?? '', /sync loop took too long: last ran 31s ago/);
    // Any iteration proves the loop runs again.
    h.source.add(pod('a'));
    assert.equal(h.loop.health(), undefined);
  });
});
