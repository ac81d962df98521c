/**
 * Disk reclaim and image garbage collection on a berth node (issue #28), on a whole
 * test cluster (etcd, containerd's root and berth's root directory) inside a 1 GiB
 * loop-mounted ext4 image: nodefs and imagefs are that one small filesystem, which
 * nothing else on the machine writes to, so its numbers move only with the test.
 *
 * - Image GC alone: with imageGCHighThresholdPercent crossed by three unused 40 MiB test
 *   images, unused images are removed down to imageGCLowThresholdPercent and no further
 *   (two of the three go), never the image a container uses nor the pinned sandbox image.
 * - DiskPressure: a pod filling the filesystem past nodefs.available; node-level reclaim
 *   comes first (the dead container of a completed pod and the unused test image are
 *   removed, the sandbox image is not), then the heaviest user is evicted.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, statfs, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { writeOciLayout } from '../../hack/images/oci.ts';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { importImage } from '../harness/containerd.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  isRunningAndReady,
  waitForPod,
} from '../harness/kube-helpers.ts';
import {
  MARK,
  Mi,
  evictionLog,
  restartWith,
  run,
  smallFs,
  waitCondition,
  type SmallFs,
} from './pressure.ts';

const FILLERS = [
  'berth.local/gc-filler-1:1',
  'berth.local/gc-filler-2:1',
  'berth.local/gc-filler-3:1',
];
const FILLER_BYTES = 40 * Mi;
/** Settings every berth of this file runs with, before its own after MARK. */
const BASE = [
  'imageMinimumGCAge: 1s',
  'nodeStatusUpdateFrequency: 2s',
  'evictionPressureTransitionPeriod: 30s',
  MARK,
];
/** No eviction and no image GC: the state between the scenarios. */
const QUIET = [
  'evictionHard: {}',
  'imageGCHighThresholdPercent: 99',
  'imageGCLowThresholdPercent: 98',
];

/** Used percent as berth's image GC computes it from statfs. */
async function usage(
  path: string,
): Promise<{ percent: number; available: number; capacity: number }> {
  const s = await statfs(path);
  const capacity = s.blocks * s.bsize;
  const available = s.bavail * s.bsize;
  return { percent: 100 - Math.trunc((available * 100) / capacity), available, capacity };
}

describe('disk reclaim and image GC on a small filesystem (containerd 2.x)', () => {
  let fs: SmallFs;
  let work: string;
  let cluster: Cluster;
  let berth: BerthNode;
  let node: string;

  const images = async (): Promise<string[]> => {
    const { stdout } = await run(cluster.runtime.ctr, [
      '--address',
      cluster.runtime.socket,
      '--namespace',
      'k8s.io',
      'images',
      'ls',
      '-q',
    ]);
    return stdout.split('\n').filter((l) => l !== '');
  };
  const containerIds = async (): Promise<string[]> => {
    const { stdout } = await run(cluster.runtime.ctr, [
      '--address',
      cluster.runtime.socket,
      '--namespace',
      'k8s.io',
      'containers',
      'ls',
      '-q',
    ]);
    return stdout.split('\n').filter((l) => l !== '');
  };
  const fillersLeft = async (): Promise<string[]> =>
    (await images()).filter((i) => FILLERS.includes(i));

  before(async () => {
    fs = await smallFs('1G');
    work = await mkdtemp(join(tmpdir(), 'berth-gc-images-'));
    cluster = await startCluster({ runtime: 'containerd2', root: join(fs.mountpoint, 'cluster') });
    // Three images of 40 MiB of random bytes each (gzip cannot shrink them).
    for (const ref of FILLERS) {
      const rootfs = join(work, ref.replace(/\W/g, '_'));
      await mkdir(rootfs, { recursive: true });
      await writeFile(join(rootfs, 'filler'), randomBytes(FILLER_BYTES));
      const layout = `${rootfs}-layout`;
      await writeOciLayout(rootfs, layout, ref, { cmd: ['/filler'] });
      await importImage(cluster.runtime, `${layout}.tar`);
    }
    assert.deepEqual((await fillersLeft()).sort(), FILLERS);
    berth = await startBerth(cluster, { extraConfig: [...BASE, ...QUIET] });
    node = berth.nodeName;
    await applyJson(cluster, busyboxPod(cluster, 'user', node));
    await waitForPod(cluster, 'default', 'user', 'Running', isRunningAndReady);
  });

  after(async () => {
    await cluster
      ?.kubectl(['delete', 'pods', '--all', '--grace-period=0', '--force'])
      .catch(() => '');
    await berth?.stop();
    await cluster?.stop();
    const leaks = (await cluster?.leaks()) ?? [];
    await fs?.remove();
    await rm(work, { recursive: true, force: true });
    assert.deepEqual(leaks, []);
  });

  test('image GC alone: over the high threshold, unused images go down to the low threshold, no further', async () => {
    const before = await usage(fs.mountpoint);
    // Crossed now; the low threshold asks for about one and a half test images back,
    // so two of the three go (whatever else is unused and goes first is smaller).
    const high = before.percent - 1;
    const low = Math.floor(100 - ((before.available + 1.5 * FILLER_BYTES) * 100) / before.capacity);
    berth = await restartWith(berth, [
      'evictionHard: {}',
      `imageGCHighThresholdPercent: ${high}`,
      `imageGCLowThresholdPercent: ${low}`,
    ]);
    // The pass at start finds every image just seen (younger than imageMinimumGCAge);
    // the next one, 5 minutes later, collects.
    const left = await eventually(
      'image GC to remove test images',
      async () => {
        const l = await fillersLeft();
        return l.length < FILLERS.length ? l : undefined;
      },
      7 * 60_000,
      2000,
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}; berth: ${await evictionLog(berth.logFile)}`);
    });
    // One pass removes what it removes at once: give it a moment to finish.
    await new Promise((resolve) => setTimeout(resolve, 5000));
    assert.equal((await fillersLeft()).length, 1, `left: ${JSON.stringify(left)}`);
    const all = await images();
    assert.ok(
      all.includes(cluster.images.pauseLocal),
      `the sandbox image is kept: ${all.join(' ')}`,
    );
    assert.ok(
      all.includes(cluster.images.busyboxLocal),
      `the image in use is kept: ${all.join(' ')}`,
    );
    const after = await usage(fs.mountpoint);
    assert.ok(after.percent <= low, `usage ${after.percent}% after GC, low threshold ${low}%`);
    const log = await readFile(berth.logFile, 'utf8');
    assert.match(log, /Disk usage on image filesystem is over the high threshold/);
  });

  test('DiskPressure: dead containers and unused images reclaimed first, then the heaviest user evicted', async () => {
    // A completed pod leaves a dead container behind.
    await applyJson(
      cluster,
      busyboxPod(cluster, 'done', node, { command: ['true'], restartPolicy: 'Never' }),
    );
    const done = await waitForPod(
      cluster,
      'default',
      'done',
      'Succeeded',
      (p) => p.status?.phase === 'Succeeded',
    );
    const deadId = (done.status?.containerStatuses?.[0]?.containerID ?? '').replace(
      /^\w+:\/\//,
      '',
    );
    assert.ok((await containerIds()).includes(deadId), 'the dead container is there');
    const [unused] = await fillersLeft();
    assert.ok(unused !== undefined, 'an unused test image is there');

    // Armed now: a pod writing 300 MiB goes 150 MiB past the threshold, more than the
    // unused image gives back.
    const threshold = `${Math.floor(((await usage(fs.mountpoint)).available - 150 * Mi) / Mi)}Mi`;
    berth = await restartWith(berth, [
      'evictionHard:',
      `  nodefs.available: "${threshold}"`,
      'imageGCHighThresholdPercent: 99',
      'imageGCLowThresholdPercent: 98',
    ]);
    await waitCondition(cluster, node, 'Ready', 'True', 60_000);
    await new Promise((resolve) => setTimeout(resolve, 15_000));
    const filler: Pod = busyboxPod(cluster, 'filler', node, {
      command: ['sh', '-c', 'dd if=/dev/zero of=/data/fill bs=1M count=300; sleep 3600'],
      extraSpec: { volumes: [{ name: 'data', emptyDir: {} }] },
    });
    const [c] = filler.spec?.containers ?? [];
    if (c !== undefined) c.volumeMounts = [{ name: 'data', mountPath: '/data' }];
    await applyJson(cluster, filler);
    const pressured = await waitCondition(cluster, node, 'DiskPressure', 'True', 90_000);
    assert.equal(
      pressured.status?.conditions?.find((x) => x.type === 'DiskPressure')?.reason,
      'KubeletHasDiskPressure',
    );
    const evicted = await waitForPod(
      cluster,
      'default',
      'filler',
      'evicted',
      (p) => p.status?.phase === 'Failed',
      90_000,
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}; berth: ${await evictionLog(berth.logFile)}`);
    });
    assert.equal(evicted.status?.reason, 'Evicted');
    assert.match(
      evicted.status?.message ?? '',
      /^The node was low on resource: ephemeral-storage\. Threshold quantity: \d+(Ki|Mi)?, available: \d+(Ki|Mi)?\. /,
    );
    // Reclaimed before the eviction: the dead container and the unused image are gone,
    // the sandbox image and the one in use are not, and the log has them in that order.
    assert.ok(!(await containerIds()).includes(deadId), 'the dead container was removed');
    const all = await images();
    assert.ok(!all.includes(unused), `${unused} was removed: ${all.join(' ')}`);
    assert.ok(all.includes(cluster.images.pauseLocal), 'the sandbox image is kept');
    assert.ok(all.includes(cluster.images.busyboxLocal), 'the image in use is kept');
    const log = (await readFile(berth.logFile, 'utf8')).split('\n');
    const reclaimed = log.findIndex((l) => l.includes('Removing image to free bytes'));
    const evictedAt = log.findIndex((l) => l.includes('pod is evicted successfully'));
    assert.ok(reclaimed >= 0 && evictedAt > reclaimed, 'images reclaimed before the eviction');
    // Deleting the evicted pod frees its emptyDir: the pressure clears.
    await cluster.kubectl(['delete', 'pod', 'filler', '--wait=true']);
    await waitCondition(cluster, node, 'DiskPressure', 'False', 90_000);
    berth = await restartWith(berth, QUIET);
  });
});
