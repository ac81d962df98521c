/**
 * The kubelet level of a pod sync (PodSync: upstream's Kubelet.SyncPod /
 * SyncTerminatingPod / SyncTerminatedPod) on the fakes and the fake clock: the fake CRI
 * runtime under the real PLEG and runtime status reader, the fake API client, the fake
 * status manager and the fake volume manager. Runs a pod, waits on a missing volume,
 * follows its containers with probe workers only while the sync loop has it added,
 * enforces activeDeadlineSeconds, and removes everything of a deleted pod.
 */
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { after, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { FakeCriClient } from '../cri/fake/index.ts';
import { cri } from '../cri/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { ImageManager } from '../images/manager.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { inNamespace, PODS } from '../kube/types.ts';
import { RuntimeStatusReader } from '../kuberuntime/runtime-status.ts';
import { RelistPleg } from '../pleg/generic.ts';
import { ProberManager } from '../prober/manager.ts';
import { FakeStatusManager } from '../status/fake.ts';
import { Backoff } from '../util/backoff.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FakeVolumeManager } from '../volumes/fake.ts';
import { VolumeError } from '../volumes/types.ts';
import { nodeAllocatable } from './kubelet-util.ts';
import { PodEnvironment } from './pod-env.ts';
import { PodSync } from './pod-sync.ts';
import { testKubeletOptions } from './testing.ts';
import { runtimeConfigOf } from './wiring.ts';

const IMAGE = 'berth.local/busybox:1';
const options = await testKubeletOptions();
after(() => rm(options.rootDir, { recursive: true, force: true }));

const BACKOFF = { initialMs: 10_000, maxMs: 300_000, resetAfterMs: 600_000 } as const;

function harness() {
  const clock = new FakeClock();
  const fake = new FakeCriClient({ clock });
  fake.addImage(IMAGE, { preloaded: true });
  const kube = new FakeKubeClient({ clock });
  const logger = new MemoryLogger();
  const recorder = new MemoryEventRecorder();
  const pleg = new RelistPleg({ runtime: fake.runtime, clock, logger, onEvents: () => {} });
  const status = new FakeStatusManager();
  const volumes = new FakeVolumeManager({ rootDir: options.rootDir });
  const prober = new ProberManager({
    ...{ runtime: fake.runtime, clock, recorder, logger },
    onChange: () => {},
    random: () => 0,
  });
  const sync = new PodSync({
    ...{ cri: fake, kube, pleg, reader: new RuntimeStatusReader(fake.runtime), status, prober },
    images: new ImageManager({
      ...{ images: fake.image, recorder, clock, logger },
      backoff: new Backoff(clock, BACKOFF),
      maxParallelPulls: 1,
    }),
    ...{ recorder, clock, logger, crashBackoff: new Backoff(clock, BACKOFF) },
    runtimeConfig: runtimeConfigOf(options, recorder, () => undefined, undefined, undefined),
    runtimeName: () => 'containerd',
    hostIPs: options.nodeIPs,
    rootDir: options.rootDir,
    volumes,
    env: new PodEnvironment({
      kube,
      services: { hasSynced: () => true, list: () => [] },
      hostIPs: options.nodeIPs,
      nodeAllocatable: () => nodeAllocatable(undefined),
      recorder,
    }),
    hostsFile: () => '127.0.0.1 localhost\n',
  });
  return { clock, cri: fake, kube, recorder, pleg, status, volumes, prober, sync };
}

function pod(name: string, extra: Partial<NonNullable<Pod['spec']>> = {}): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default', uid: `uid-${name}` },
    spec: {
      nodeName: 'node-a',
      terminationGracePeriodSeconds: 1,
      containers: [{ name: 'main', image: IMAGE, imagePullPolicy: 'IfNotPresent' }],
      ...extra,
    },
  };
}

async function running(h: ReturnType<typeof harness>, uid: string): Promise<string[]> {
  const { containers } = await h.cri.runtime.listContainers({});
  return containers
    .filter(
      (c) =>
        c.labels['io.kubernetes.pod.uid'] === uid &&
        c.state === cri.ContainerState.CONTAINER_RUNNING,
    )
    .map((c) => c.id);
}

describe('PodSync.syncPod', () => {
  test('sets up volumes, starts the sandbox and containers, reports Running', async () => {
    const h = harness();
    const web = pod('web');
    const result = await h.sync.syncPod(web, AbortSignal.timeout(60_000));
    assert.equal(result.terminal, false);
    assert.deepEqual(
      h.volumes.calls.filter((c) => c.op === 'setUpPod'),
      [{ op: 'setUpPod', uid: 'uid-web' }],
    );
    assert.equal((await running(h, 'uid-web')).length, 1);
    const { items } = await h.cri.runtime.listPodSandbox({});
    assert.equal(items.length, 1);
    assert.equal(h.status.get('uid-web')?.phase, 'Running');
    assert.ok(h.recorder.reasons().includes('Started'));
  });

  test('a volume that cannot be set up: FailedMount, nothing started, retried in 5 s', async () => {
    const h = harness();
    h.volumes.errors.set(
      'setUpPod',
      new VolumeError('BERTH_VOLUME_SOURCE_NOT_FOUND', 'configmap "conf" not found'),
    );
    const result = await h.sync.syncPod(pod('web'), AbortSignal.timeout(60_000));
    assert.deepEqual(result, { requeueAfterMs: 5000 });
    assert.ok(h.recorder.reasons().includes('FailedMount'));
    const { items } = await h.cri.runtime.listPodSandbox({});
    assert.equal(items.length, 0);
    const status = h.status.get('uid-web');
    assert.equal(status?.phase, 'Pending');
    assert.equal(status?.containerStatuses?.[0]?.state?.waiting?.reason, 'ContainerCreating');
  });

  test('probe workers follow the containers of an added pod only, until it terminates', async () => {
    const h = harness();
    const readinessProbe = { exec: { command: ['ready'] }, periodSeconds: 10 };
    const main = { name: 'main', image: IMAGE, readinessProbe };
    const stray = pod('stray', { containers: [main] });
    await h.sync.syncPod(stray, AbortSignal.timeout(60_000));
    assert.equal(h.prober.workerCount, 0, 'a pod the sync loop never added is not probed');
    const web = pod('web', { containers: [main] });
    h.prober.addPod(web);
    await h.sync.syncPod(web, AbortSignal.timeout(60_000));
    assert.equal(h.prober.workerCount, 1);
    await h.sync.syncTerminatingPod(web, 1, AbortSignal.timeout(60_000));
    assert.equal(h.prober.workerCount, 0);
    assert.deepEqual(await running(h, 'uid-web'), []);
    await h.prober.stop();
  });

  test('past activeDeadlineSeconds the pod is stopped and Failed (DeadlineExceeded)', async () => {
    const h = harness();
    const web = pod('web', { activeDeadlineSeconds: 30 });
    const first = await h.sync.syncPod(web, AbortSignal.timeout(60_000));
    assert.equal(first.terminal, false);
    assert.ok(first.requeueAfterMs !== undefined && first.requeueAfterMs <= 30_000);
    await h.clock.advance(31_000);
    const result = await h.sync.syncPod(web, AbortSignal.timeout(60_000));
    assert.equal(result.terminal, true);
    assert.equal(h.status.get('uid-web')?.phase, 'Failed');
    assert.equal(h.status.get('uid-web')?.reason, 'DeadlineExceeded');
    assert.ok(h.recorder.reasons().includes('DeadlineExceeded'));
    assert.deepEqual(await running(h, 'uid-web'), []);
  });
});

describe('PodSync.syncTerminatingPod / syncTerminatedPod', () => {
  test('a deleted pod: containers, sandbox, volumes, status and API object all go', async () => {
    const h = harness();
    const created = await h.kube.create(inNamespace(PODS, 'default'), pod('web'));
    await h.sync.syncPod(created, AbortSignal.timeout(60_000));
    await h.kube.delete(inNamespace(PODS, 'default'), 'web', { gracePeriodSeconds: 1 });
    const deleting = await h.kube.get<Pod>(inNamespace(PODS, 'default'), 'web');
    const uid = created.metadata?.uid ?? '';
    await h.sync.syncTerminatingPod(deleting, 1, AbortSignal.timeout(60_000));
    assert.deepEqual(await running(h, uid), []);
    await h.sync.syncTerminatedPod(deleting, AbortSignal.timeout(60_000));
    const { containers } = await h.cri.runtime.listContainers({});
    const { items } = await h.cri.runtime.listPodSandbox({});
    assert.deepEqual([containers.length, items.length], [0, 0]);
    assert.ok(h.volumes.calls.some((c) => c.op === 'tearDownPod' && c.uid === uid));
    await assert.rejects(h.kube.get<Pod>(inNamespace(PODS, 'default'), 'web'));
    assert.equal(h.status.get(uid), undefined);
  });
});
