/**
 * The runtime manager (upstream's kubeGenericRuntimeManager.SyncPod / KillPod) over the
 * fake CRI, the real PLEG and image manager on it, the fake volume manager and the fake
 * clock: sandbox creation, init containers in order then app containers, restarts by
 * restart policy with CrashLoopBackOff on the fake clock, and killPod. Each test drives
 * the syncs itself (what the pod worker does) and asserts what the runtime saw.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, test } from 'node:test';
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { spec, testPod } from '../container/testing.ts';
import { cri } from '../cri/index.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { ImageManager } from '../images/manager.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { RelistPleg } from '../pleg/generic.ts';
import type { WaitingReason } from '../status/generate.ts';
import { Backoff } from '../util/backoff.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FakeVolumeManager } from '../volumes/fake.ts';
import { KubeRuntimeManager, type RuntimeSyncResult } from './runtime-manager.ts';
import { RuntimeStatusReader } from './runtime-status.ts';

const POD_BACKOFF = { initialMs: 10_000, maxMs: 300_000, resetAfterMs: 600_000 } as const;
const live = (): AbortSignal => new AbortController().signal;
const dirs: string[] = [];

afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

interface Harness {
  readonly fake: FakeCriClient;
  readonly clock: FakeClock;
  readonly recorder: MemoryEventRecorder;
  readonly manager: KubeRuntimeManager;
  /** Exit codes the next starts of each container give (none: it keeps running). */
  readonly exits: Map<string, number[]>;
  /** One pod worker pass: relist, read the pod's status, SyncPod. */
  sync(pod: Pod): Promise<{ result: RuntimeSyncResult; waiting: Map<string, WaitingReason> }>;
  /** The pod's containers in the runtime as `name#attempt:state`, by creation. */
  containers(): Promise<string[]>;
  /** The container names in the order they were created. */
  created(): string[];
}

async function harness(): Promise<Harness> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-runtime-manager-'));
  dirs.push(dir);
  const clock = new FakeClock();
  const fake = new FakeCriClient({ clock });
  const recorder = new MemoryEventRecorder();
  const logger = new MemoryLogger();
  const exits = new Map<string, number[]>();
  for (const name of ['main', 'side', 'init-a', 'init-b'])
    fake.addImage(`registry.test/${name}:1`, { preloaded: true });
  fake.onStart((c) => {
    const code = exits.get(c.name)?.shift();
    return code === undefined ? undefined : { exitCode: code };
  });
  const pleg = new RelistPleg({
    runtime: fake.runtime,
    clock,
    logger,
    onEvents: () => undefined,
  });
  const manager = new KubeRuntimeManager({
    cri: fake,
    kube: new FakeKubeClient({ clock }),
    pleg,
    reader: new RuntimeStatusReader(fake.runtime),
    images: new ImageManager({
      images: fake.image,
      recorder,
      clock,
      logger,
      backoff: new Backoff(clock, POD_BACKOFF),
      maxParallelPulls: 1,
    }),
    recorder,
    clock,
    logger,
    crashBackoff: new Backoff(clock, POD_BACKOFF),
    runtimeConfig: {
      podLogsDir: join(dir, 'pods'),
      cgroupRoot: '',
      cgroupsPerQOS: false,
      nodeName: 'node-a',
      clusterDomain: 'cluster.local',
      dns: () => undefined,
    },
    rootDir: dir,
    volumes: new FakeVolumeManager({ rootDir: dir }),
    env: {
      environment: (_pod, c: Container) =>
        Promise.resolve({ env: [], command: c.command ?? [], args: c.args ?? [] }),
    },
    hostsFile: () => '127.0.0.1\tlocalhost\n',
  });
  const listed = async (): Promise<cri.Container[]> =>
    (await fake.runtime.listContainers({})).containers.sort((a, b) =>
      a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0,
    );
  return {
    fake,
    clock,
    recorder,
    manager,
    exits,
    sync: async (pod) => {
      await pleg.relist(live());
      const status = await manager.getPodStatus(pod, live());
      const waiting = new Map<string, WaitingReason>();
      const result = await manager.syncPod(pod, status, () => Promise.resolve([]), live(), {
        volumes: { byName: new Map() },
        waiting,
      });
      return { result, waiting };
    },
    containers: async () =>
      (await listed()).map(
        (c) =>
          `${c.metadata?.name ?? ''}#${String(c.metadata?.attempt ?? 0)}:${
            c.state === cri.ContainerState.CONTAINER_RUNNING
              ? 'running'
              : c.state === cri.ContainerState.CONTAINER_EXITED
                ? 'exited'
                : 'other'
          }`,
      ),
    created: () =>
      fake
        .callsTo('RuntimeService/CreateContainer')
        .map((r) => (r as cri.CreateContainerRequest).config?.metadata?.name ?? ''),
  };
}

describe('KubeRuntimeManager.syncPod', () => {
  test('a new pod: the sandbox, then each init container in order, then the app containers', async () => {
    const h = await harness();
    h.exits.set('init-a', [0]);
    h.exits.set('init-b', [0]);
    const p = testPod({ initContainers: ['init-a', 'init-b'], containers: ['main', 'side'] });

    const first = await h.sync(p);
    assert.equal(first.result.outcome, 'synced');
    assert.equal(h.fake.callsTo('RuntimeService/RunPodSandbox').length, 1);
    assert.deepEqual(h.created(), ['init-a'], 'only the first init container');

    await h.sync(p);
    assert.deepEqual(h.created(), ['init-a', 'init-b'], 'the next once the first succeeded');
    await h.sync(p);
    assert.deepEqual(h.created().slice(2).sort(), ['main', 'side'], 'then the app containers');
    assert.deepEqual((await h.containers()).slice(2).sort(), ['main#0:running', 'side#0:running']);

    // Converged: another pass creates nothing and keeps the one sandbox.
    await h.sync(p);
    assert.equal(h.created().length, 4);
    assert.equal(h.fake.callsTo('RuntimeService/RunPodSandbox').length, 1);
    assert.deepEqual(
      h.recorder.reasons().filter((r) => r === 'Started'),
      ['Started', 'Started', 'Started', 'Started'],
    );
  });

  test('a failed init container is retried before any app container starts', async () => {
    const h = await harness();
    h.exits.set('init-a', [1, 0]);
    const p = testPod({ initContainers: ['init-a'], containers: ['main'] });
    await h.sync(p);
    await h.sync(p);
    assert.deepEqual(h.created(), ['init-a', 'init-a'], 'restarted, main not started');
    await h.sync(p);
    assert.deepEqual(h.created(), ['init-a', 'init-a', 'main']);
  });

  test('restartPolicy Always restarts a crashed container, then backs off on the clock', async () => {
    const h = await harness();
    h.exits.set('main', [1, 1, 1]);
    const p = testPod({ restartPolicy: 'Always' });
    await h.sync(p);
    assert.deepEqual(await h.containers(), ['main#0:exited']);
    await h.sync(p);
    assert.deepEqual(await h.containers(), ['main#0:exited', 'main#1:exited'], 'restarted');

    const backingOff = await h.sync(p);
    assert.equal(h.created().length, 2, 'not restarted while backing off');
    assert.equal(backingOff.waiting.get('main')?.reason, 'CrashLoopBackOff');
    assert.ok(backingOff.result.outcome === 'synced');
    assert.equal(backingOff.result.requeueAfterMs, 10_000, 'requeued when the back-off ends');
    assert.ok(h.recorder.reasons().includes('BackOff'));

    await h.clock.advance(10_000);
    await h.sync(p);
    assert.equal(h.created().length, 3, 'restarted once the back-off passed');
    const doubled = await h.sync(p);
    assert.ok(doubled.result.outcome === 'synced');
    assert.equal(doubled.result.requeueAfterMs, 20_000, 'the back-off doubles');
  });

  test('a container that ran a while waits its whole back-off from its exit, and is synced again then', async () => {
    const h = await harness();
    h.exits.set('main', [1]);
    const p = testPod({ restartPolicy: 'Always' });
    await h.sync(p);
    await h.sync(p); // restarted: a 10 s back-off from now on
    assert.deepEqual(await h.containers(), ['main#0:exited', 'main#1:running']);
    await h.clock.advance(5_000);
    const running = (await h.fake.runtime.listContainers({})).containers.find(
      (c) => c.state === cri.ContainerState.CONTAINER_RUNNING,
    );
    assert.ok(running !== undefined);
    h.fake.exitContainer(running.id, 1);
    const held = await h.sync(p);
    assert.equal(h.created().length, 2, 'not restarted 5 s after the restart');
    assert.ok(held.result.outcome === 'synced');
    // Upstream's IsInBackOffSince(finishedAt): 10 s from the exit, not 5 s from the restart.
    assert.equal(held.result.requeueAfterMs, 10_000);
  });

  test('a new image starts a fresh back-off (the image is in the key, as upstream)', async () => {
    const h = await harness();
    h.fake.addImage('registry.test/main:2', { preloaded: true });
    h.exits.set('main', [1, 1, 1, 1, 1]);
    const p = testPod({ restartPolicy: 'Always' });
    await h.sync(p);
    await h.sync(p);
    await h.clock.advance(10_000);
    await h.sync(p);
    const held = await h.sync(p);
    assert.ok(held.result.outcome === 'synced');
    assert.equal(held.result.requeueAfterMs, 20_000, 'the old image backs off 20 s');
    const fixed = testPod({
      restartPolicy: 'Always',
      containers: [spec('main', { image: 'registry.test/main:2' })],
    });
    await h.sync(fixed);
    assert.equal(h.created().length, 4, 'the new image starts at once');
    const again = await h.sync(fixed);
    assert.ok(again.result.outcome === 'synced');
    assert.equal(again.result.requeueAfterMs, 10_000, 'its first back-off is 10 s, not 40 s');
  });

  test('restartPolicy OnFailure restarts a failure, not a success; Never restarts neither', async () => {
    const onFailure = await harness();
    onFailure.exits.set('main', [1, 0]);
    const p = testPod({ restartPolicy: 'OnFailure' });
    await onFailure.sync(p);
    await onFailure.sync(p);
    assert.deepEqual(await onFailure.containers(), ['main#0:exited', 'main#1:exited']);
    await onFailure.clock.advance(600_000);
    await onFailure.sync(p);
    assert.equal(onFailure.created().length, 2, 'exit 0 is not restarted');

    const never = await harness();
    never.exits.set('main', [1]);
    const q = testPod({ restartPolicy: 'Never' });
    await never.sync(q);
    await never.clock.advance(600_000);
    await never.sync(q);
    assert.deepEqual(await never.containers(), ['main#0:exited']);
  });
});

describe('KubeRuntimeManager.killPod', () => {
  test('stops every container and the sandbox, with a Killing event per container', async () => {
    const h = await harness();
    const p = testPod({ containers: ['main', spec('side')] });
    await h.sync(p);
    assert.deepEqual((await h.containers()).sort(), ['main#0:running', 'side#0:running']);
    const status = await h.manager.getPodStatus(p, live());
    await h.manager.killPod(p, status, 30, live());
    assert.deepEqual((await h.containers()).sort(), ['main#0:exited', 'side#0:exited']);
    const sandboxes = (await h.fake.runtime.listPodSandbox({})).items;
    assert.deepEqual(
      sandboxes.map((s) => s.state),
      [cri.PodSandboxState.SANDBOX_NOTREADY],
    );
    assert.deepEqual(
      h.recorder.events
        .filter((e) => e.reason === 'Killing')
        .map((e) => e.message)
        .sort(),
      ['Stopping container main', 'Stopping container side'],
    );
  });
});
