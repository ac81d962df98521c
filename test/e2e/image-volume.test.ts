/**
 * Image volumes (issue #30): an image built here (a data file, an etc/ directory, no
 * binaries) is pushed to the cluster's registry (authenticated) and mounted into a pod as
 * a volume. On containerd 2.x its files are read from the container, the mount is
 * read-only and a subPath of it mounts only that directory; a missing volume image stops
 * only the container mounting it. On containerd 1.6, which cannot mount images, the
 * container waits with a clear CreateContainerError and event.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { writeOciLayout } from '../../hack/images/oci.ts';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster, type RuntimeKind } from '../harness/cluster.ts';
import {
  applyJson,
  applyRegistrySecret,
  busyboxPod,
  eventually,
  isRunningAndReady,
  podEvents,
  waitForPod,
} from '../harness/kube-helpers.ts';
import { pushImage } from '../harness/registry.ts';

const GREETING = 'hello from an image volume';
const REPO_TAG = 'berth/image-volume-data:1';

/** Builds the data image and pushes it to the cluster's registry; returns its reference. */
async function pushDataImage(cluster: Cluster): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-image-volume-'));
  try {
    const rootfs = join(dir, 'rootfs');
    await mkdir(join(rootfs, 'data'), { recursive: true });
    await mkdir(join(rootfs, 'etc'));
    await writeFile(join(rootfs, 'data', 'greeting.txt'), `${GREETING}\n`);
    await writeFile(join(rootfs, 'etc', 'os-release'), 'NAME="berth image volume"\n');
    const layout = join(dir, 'layout');
    await writeOciLayout(rootfs, layout, `berth.local/${REPO_TAG.slice('berth/'.length)}`, {});
    await pushImage(cluster.registry, layout, REPO_TAG);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return `${cluster.registry.host}/${REPO_TAG}`;
}

function imageVolumePod(
  cluster: Cluster,
  name: string,
  node: string,
  volumes: { name: string; reference: string }[],
  containers: { name: string; mounts: { name: string; mountPath: string; subPath?: string }[] }[],
): Pod {
  const base = busyboxPod(cluster, name, node, {
    containers: containers.map((c) => ({ name: c.name, command: ['sleep', '3600'] })),
  });
  const spec = base.spec ?? { containers: [] };
  return {
    ...base,
    spec: {
      ...spec,
      imagePullSecrets: [{ name: 'registry' }],
      volumes: volumes.map((v) => ({
        name: v.name,
        image: { reference: v.reference, pullPolicy: 'IfNotPresent' },
      })),
      containers: spec.containers.map((c, i) => ({
        ...c,
        volumeMounts: containers[i]?.mounts ?? [],
      })),
    },
  };
}

/** berth's image volume counters, read through the API server's node proxy. */
async function imageVolumeMetrics(
  cluster: Cluster,
  node: string,
): Promise<{ requested: number; succeeded: number; failed: number }> {
  const text = await cluster.kubectl(['get', '--raw', `/api/v1/nodes/${node}/proxy/metrics`]);
  const sample = (name: string): number => {
    const line = text.split('\n').find((l) => l.startsWith(`kubelet_image_volume_${name} `));
    return line === undefined ? Number.NaN : Number(line.split(' ')[1]);
  };
  return {
    requested: sample('requested_total'),
    succeeded: sample('mounted_succeed_total'),
    failed: sample('mounted_errors_total'),
  };
}

function setUp(runtime: RuntimeKind): {
  ctx: () => { cluster: Cluster; node: string; reference: string };
} {
  let cluster: Cluster | undefined;
  let berth: BerthNode | undefined;
  let reference = '';
  before(async () => {
    cluster = await startCluster({ runtime });
    // On the pod bridge's gateway: the API server proxies /metrics to no loopback node.
    berth = await startBerth(cluster, { nodeIp: cluster.runtime.gateway });
    await applyRegistrySecret(cluster, 'registry');
    reference = await pushDataImage(cluster);
  });
  after(async () => {
    await berth?.stop();
    await cluster?.stop();
    if (cluster !== undefined) assert.deepEqual(await cluster.leaks(), []);
  });
  return {
    ctx: () => {
      assert.ok(cluster !== undefined && berth !== undefined);
      return { cluster, node: berth.nodeName, reference };
    },
  };
}

describe('image volumes on berth (containerd 2.x)', () => {
  const { ctx } = setUp('containerd2');

  test('files read from the image, read-only, a subPath mounts just that directory', async () => {
    const { cluster, node, reference } = ctx();
    await applyJson(
      cluster,
      imageVolumePod(
        cluster,
        'iv',
        node,
        [{ name: 'data', reference }],
        [
          {
            name: 'main',
            mounts: [
              // readOnly: false is overridden: image volumes are always read-only.
              { name: 'data', mountPath: '/volume' },
              { name: 'data', mountPath: '/etc-data', subPath: 'etc' },
            ],
          },
        ],
      ),
    );
    await waitForPod(cluster, 'default', 'iv', 'Running', isRunningAndReady, 120_000);
    const sh = (script: string): Promise<string> =>
      cluster.kubectl(['-n', 'default', 'exec', 'iv', '--', 'sh', '-c', script]);
    assert.equal((await sh('cat /volume/data/greeting.txt')).trim(), GREETING);
    assert.equal((await sh('cat /etc-data/os-release')).trim(), 'NAME="berth image volume"');
    assert.equal((await sh('ls /etc-data')).trim(), 'os-release', 'only the subPath is mounted');
    const write = await sh('touch /volume/new 2>&1; echo "rc=$?"');
    assert.match(write, /Read-only file system/);
    assert.match(write, /rc=1/);
    const mountLine = (await sh('grep " /volume " /proc/mounts')).trim();
    assert.match(mountLine, /\sro[,\s]/, mountLine);
    // One image volume requested, mounted twice (the whole image and its etc/).
    assert.deepEqual(await imageVolumeMetrics(cluster, node), {
      requested: 1,
      succeeded: 2,
      failed: 0,
    });
    const events = await podEvents(cluster, 'default', 'iv');
    assert.ok(
      events.some(
        (e) =>
          e.reason === 'Pulled' &&
          e.involvedObject.fieldPath === undefined &&
          e.message.includes(`"${reference}"`),
      ),
      `the volume's pull is reported on the pod: ${JSON.stringify(events.map((e) => e.message))}`,
    );
  });

  test('a missing volume image stops only the container that mounts it', async () => {
    const { cluster, node } = ctx();
    const missing = `${cluster.registry.host}/berth/image-volume-missing:1`;
    await applyJson(
      cluster,
      imageVolumePod(
        cluster,
        'iv-missing',
        node,
        [{ name: 'gone', reference: missing }],
        [
          { name: 'uses', mounts: [{ name: 'gone', mountPath: '/gone' }] },
          { name: 'other', mounts: [] },
        ],
      ),
    );
    const pod = await waitForPod(
      cluster,
      'default',
      'iv-missing',
      'uses waiting on the image, other running',
      (p) => {
        const s = (n: string) => p.status?.containerStatuses?.find((c) => c.name === n);
        return (
          ['ErrImagePull', 'ImagePullBackOff'].includes(s('uses')?.state?.waiting?.reason ?? '') &&
          s('other')?.state?.running !== undefined
        );
      },
      120_000,
    );
    const uses = pod.status?.containerStatuses?.find((c) => c.name === 'uses');
    assert.ok((uses?.state?.waiting?.message ?? '').includes(missing));
    await eventually(
      'ImagePullBackOff',
      async () => {
        const events = await podEvents(cluster, 'default', 'iv-missing');
        return events.some(
          (e) =>
            e.reason === 'Failed' &&
            e.involvedObject.fieldPath === 'spec.containers{uses}' &&
            e.message === 'Error: ImagePullBackOff',
        )
          ? true
          : undefined;
      },
      120_000,
      1000,
    );
  });
});

describe('image volumes on berth (containerd 1.6: not supported)', () => {
  const { ctx } = setUp('containerd1');

  test('the container waits with a clear CreateContainerError and event', async () => {
    const { cluster, node, reference } = ctx();
    await applyJson(
      cluster,
      imageVolumePod(
        cluster,
        'iv-old',
        node,
        [{ name: 'data', reference }],
        [{ name: 'main', mounts: [{ name: 'data', mountPath: '/volume' }] }],
      ),
    );
    const pod = await waitForPod(
      cluster,
      'default',
      'iv-old',
      'CreateContainerError',
      (p) => p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'CreateContainerError',
      120_000,
    );
    const message = pod.status?.containerStatuses?.[0]?.state?.waiting?.message ?? '';
    assert.match(
      message,
      /^ImageVolumeMountFailed: the container runtime \(containerd v?1\.6\.[^)]*\) cannot mount image volumes \(mountPath \/volume\): they need containerd 2\.1 or later$/,
    );
    const events = await podEvents(cluster, 'default', 'iv-old');
    assert.ok(
      events.some(
        (e) =>
          e.type === 'Warning' &&
          e.reason === 'Failed' &&
          e.involvedObject.fieldPath === 'spec.containers{main}' &&
          e.message === `Error: ${message}`,
      ),
      JSON.stringify(events.map((e) => `${e.reason}: ${e.message}`)),
    );
    const counted = await imageVolumeMetrics(cluster, node);
    assert.equal(counted.succeeded, 0);
    assert.ok(counted.failed >= 1 && counted.failed === counted.requested, JSON.stringify(counted));
  });
});
