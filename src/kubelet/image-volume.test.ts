/**
 * Image volumes through the whole kubelet (fake API server, fake runtime): the image
 * mount reaches CreateContainer read-only with its subPath; a missing image stops only
 * the containers that mount it; a containerd 1.6 runtime gets a clear error.
 */
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { after, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { FakeCgroupManager } from '../cm/fake.ts';
import { FakeCriClient, type FakeRuntimeFlavor } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { inNamespace, PODS } from '../kube/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FakeMounter } from '../volumes/mounter.ts';
import { Kubelet } from './kubelet.ts';
import { host, testKubeletOptions, untilOnClock } from './testing.ts';

const options = await testKubeletOptions();
after(() => rm(options.rootDir, { recursive: true, force: true }));

const BUSYBOX = 'berth.local/busybox:1';
const DATA = 'berth.local/data:1';

function pod(name: string, volumeImage: string, mounts: Record<string, string[]>): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default' },
    spec: {
      nodeName: 'node-a',
      terminationGracePeriodSeconds: 1,
      volumes: [
        { name: 'data', image: { reference: volumeImage, pullPolicy: 'IfNotPresent' } },
        { name: 'scratch', emptyDir: {} },
      ] as never,
      containers: Object.entries(mounts).map(([c, vms]) => ({
        name: c,
        image: BUSYBOX,
        imagePullPolicy: 'IfNotPresent',
        command: ['sleep', '3600'],
        volumeMounts: vms.map((m) => {
          const [vol = '', mountPath = '', subPath] = m.split(':');
          return { name: vol, mountPath, ...(subPath !== undefined && { subPath }) };
        }),
      })),
    },
  };
}

/** The fake clock of the kubelet `withKubelet` runs now. */
let clock = new FakeClock();

/** Polls on the running kubelet's fake clock. */
function until<T>(what: string, fn: () => Promise<T | undefined>): Promise<T> {
  return untilOnClock(clock, what, fn);
}

async function withKubelet(
  flavor: FakeRuntimeFlavor,
  fn: (kube: FakeKubeClient, cri: FakeCriClient, recorder: MemoryEventRecorder) => Promise<void>,
): Promise<void> {
  clock = new FakeClock();
  const kube = new FakeKubeClient({ clock });
  const cri = new FakeCriClient({ flavor, clock });
  cri.addImage(BUSYBOX, { preloaded: true });
  cri.addImage(DATA, { preloaded: true });
  const recorder = new MemoryEventRecorder();
  const kubelet = new Kubelet(options, {
    kube,
    cri,
    recorder,
    clock,
    logger: new MemoryLogger(),
    host,
    mounter: new FakeMounter(),
    cgroups: new FakeCgroupManager(),
  });
  await kubelet.start();
  try {
    await fn(kube, cri, recorder);
  } finally {
    await kubelet.stop();
    cri.close();
    await kube.close();
  }
}

function getPod(kube: FakeKubeClient, name: string): Promise<Pod> {
  return kube.get<Pod>(inNamespace(PODS, 'default'), name);
}

describe('image volumes (fake runtime)', () => {
  test('containerd 2.x: image mounts read-only, in volumeMount order, subPath passed on', async () => {
    await withKubelet('containerd2', async (kube, cri, recorder) => {
      await kube.create(
        inNamespace(PODS, 'default'),
        pod('iv', DATA, { main: ['scratch:/scratch', 'data:/data', 'data:/etc-data:etc'] }),
      );
      const running = await until('pod Running', async () => {
        const p = await getPod(kube, 'iv');
        return p.status?.phase === 'Running' ? p : undefined;
      });
      const id =
        running.status?.containerStatuses?.[0]?.containerID?.replace('containerd://', '') ?? '';
      const { status } = await cri.runtime.containerStatus({ containerId: id, verbose: false });
      const mounts = (status?.mounts ?? []).filter((m) => m.containerPath !== '/etc/hosts');
      const paths = mounts.map((m) => m.containerPath);
      assert.deepEqual(paths.slice(0, 3), ['/scratch', '/data', '/etc-data']);
      const [scratch, data, etc] = mounts;
      assert.equal(scratch?.image, undefined);
      assert.ok(scratch?.hostPath.endsWith('/volumes/kubernetes.io~empty-dir/scratch'));
      const { image } = await cri.image.imageStatus({ image: { image: DATA } });
      assert.equal(data?.image?.image, image?.id);
      assert.equal(data?.image?.userSpecifiedImage, DATA);
      assert.equal(data?.hostPath, '');
      assert.equal(data?.readonly, true);
      assert.equal(data?.imageSubPath, '');
      assert.equal(etc?.imageSubPath, 'etc');
      assert.equal(etc?.readonly, true);
      assert.ok(
        recorder.events.some(
          (e) =>
            e.target.fieldPath === undefined &&
            e.message === `Container image "${DATA}" already present on machine`,
        ),
        'the volume image event is on the pod',
      );
    });
  });

  test('a missing volume image stops only the containers that mount it', async () => {
    await withKubelet('containerd2', async (kube) => {
      const p = pod('missing', 'berth.local/nothing:1', { uses: ['data:/data'], other: [] });
      const volumes = p.spec?.volumes as unknown as { image?: { pullPolicy: string } }[];
      if (volumes[0]?.image !== undefined) volumes[0].image.pullPolicy = 'Never';
      await kube.create(inNamespace(PODS, 'default'), p);
      const waiting = await until('uses waits', async () => {
        const s = await getPod(kube, 'missing');
        const uses = s.status?.containerStatuses?.find((c) => c.name === 'uses');
        const other = s.status?.containerStatuses?.find((c) => c.name === 'other');
        return uses?.state?.waiting?.reason === 'ErrImageNeverPull' &&
          other?.state?.running !== undefined
          ? uses
          : undefined;
      });
      assert.match(waiting.state?.waiting?.message ?? '', /berth\.local\/nothing:1/);
    });
  });

  test('containerd 1.6: the container waits with a clear CreateContainerError', async () => {
    await withKubelet('containerd1', async (kube, cri, recorder) => {
      await kube.create(inNamespace(PODS, 'default'), pod('old', DATA, { main: ['data:/data'] }));
      const waiting = await until('CreateContainerError', async () => {
        const s = await getPod(kube, 'old');
        const w = s.status?.containerStatuses?.[0]?.state?.waiting;
        return w?.reason === 'CreateContainerError' ? w : undefined;
      });
      assert.match(
        waiting.message ?? '',
        /^ImageVolumeMountFailed: the container runtime \(containerd 1\.6\.20-berth-fake\) cannot mount image volumes \(mountPath \/data\): they need containerd 2\.1 or later$/,
      );
      assert.ok(
        recorder.events.some(
          (e) =>
            e.reason === 'Failed' &&
            e.target.fieldPath === 'spec.containers{main}' &&
            e.message === `Error: ${waiting.message ?? ''}`,
        ),
      );
      const { containers } = await cri.runtime.listContainers({});
      assert.equal(containers.length, 0, 'no container was created');
    });
  });
});
