/**
 * Eviction that needs no node pressure from the host (issue #28), quick and
 * deterministic: a container over its ephemeral-storage limit and an emptyDir over
 * its sizeLimit are evicted with upstream's messages while the node has no pressure,
 * and a soft nodefs threshold on a small loop-mounted filesystem evicts only after its
 * grace period. The heavy scenarios (memory, PID, disk reclaim, image GC) are in
 * test/eviction/ (`make test-eviction`).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { applyJson, busyboxPod, getJson, podEvents, waitForPod } from '../harness/kube-helpers.ts';
import { condition, evictionLog, smallFs, waitCondition } from '../eviction/pressure.ts';

const failed = (p: Pod): boolean => p.status?.phase === 'Failed';

describe('eviction without node pressure: local storage limits, soft threshold', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let node: string;

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    berth = await startBerth(cluster, {
      // Volumes measured every 5 s, so an emptyDir over its limit is seen within one pass.
      extraConfig: ['volumeStatsAggPeriod: 5s', 'nodeStatusUpdateFrequency: 2s'],
    });
    node = berth.nodeName;
  });

  after(async () => {
    await cluster
      .kubectl(['delete', 'pods', '--all', '--grace-period=0', '--force'])
      .catch(() => '');
    await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  const evicted = (name: string, logFile: string): Promise<Pod> =>
    waitForPod(cluster, 'default', name, 'evicted', failed, 90_000).catch(async (err: unknown) => {
      throw new Error(`${String(err)}; berth: ${await evictionLog(logFile)}`);
    });

  test('a container over its ephemeral-storage limit is evicted, the node has no pressure', async () => {
    // Two containers, so the pod's total limit (1034Mi) holds and the container's (10Mi)
    // is the one crossed: upstream checks the pod total first.
    const scribbler = busyboxPod(cluster, 'scribbler', node, {
      containers: [
        {
          name: 'main',
          command: ['sh', '-c', 'dd if=/dev/zero of=/fill bs=1M count=24; sleep 3600'],
        },
        { name: 'idle', command: ['sleep', '3600'] },
      ],
    });
    const [main, idle] = scribbler.spec?.containers ?? [];
    if (main !== undefined) main.resources = { limits: { 'ephemeral-storage': '10Mi' } };
    if (idle !== undefined) idle.resources = { limits: { 'ephemeral-storage': '1Gi' } };
    await applyJson(cluster, scribbler);
    const pod = await evicted('scribbler', berth.logFile);
    assert.equal(pod.status?.reason, 'Evicted');
    const message = 'Container main exceeded its local ephemeral storage limit "10Mi". ';
    assert.equal(pod.status?.message, message);
    const events = await podEvents(cluster, 'default', 'scribbler');
    assert.ok(
      events.some((e) => e.reason === 'Evicted' && e.type === 'Warning' && e.message === message),
      `an Evicted event, got ${JSON.stringify(events)}`,
    );
    assert.equal(condition(await getJson(cluster, ['get', 'node', node]), 'DiskPressure'), 'False');
  });

  test('an emptyDir over its sizeLimit is evicted with upstream message, a sibling within its limit is not', async () => {
    const pod = (name: string, mib: number): Pod => {
      const p = busyboxPod(cluster, name, node, {
        command: ['sh', '-c', `dd if=/dev/zero of=/scratch/fill bs=1M count=${mib}; sleep 3600`],
        extraSpec: { volumes: [{ name: 'scratch', emptyDir: { sizeLimit: '16Mi' } }] },
      });
      const [c] = p.spec?.containers ?? [];
      if (c !== undefined) c.volumeMounts = [{ name: 'scratch', mountPath: '/scratch' }];
      return p;
    };
    await applyJson(cluster, pod('within', 8));
    await applyJson(cluster, pod('over', 32));
    const over = await evicted('over', berth.logFile);
    assert.equal(over.status?.reason, 'Evicted');
    assert.equal(
      over.status?.message,
      'Usage of EmptyDir volume "scratch" exceeds the limit "16Mi". ',
    );
    // Local-storage evictions carry no DisruptionTarget condition (upstream sets none).
    assert.equal(
      over.status?.conditions?.find((c) => c.type === 'DisruptionTarget'),
      undefined,
    );
    // Two more measurement periods: the one within its limit is left alone.
    await new Promise((resolve) => setTimeout(resolve, 12_000));
    const within = await getJson<Pod>(cluster, ['get', 'pod', 'within']);
    assert.equal(within?.status?.phase, 'Running');
    await cluster.kubectl(['delete', 'pods', '--all', '--wait=true']);
  });

  test('soft nodefs threshold: no eviction before its grace period, eviction after', async () => {
    // A second node whose root directory is a 512 MiB ext4 image: the filler fills that,
    // never the host, and nothing else on the machine moves the signal.
    const fs = await smallFs('512M');
    let soft: BerthNode | undefined;
    try {
      soft = await startBerth(cluster, {
        nodeName: `soft-${cluster.id}`,
        extraArgs: ['--root-dir', join(fs.mountpoint, 'root')],
        extraConfig: [
          'evictionHard: {}',
          'evictionSoft:',
          '  nodefs.available: "40%"',
          'evictionSoftGracePeriod:',
          '  nodefs.available: 30s',
          'evictionMaxPodGracePeriod: 5',
          'evictionPressureTransitionPeriod: 30s',
          'nodeStatusUpdateFrequency: 2s',
        ],
      });
      const softNode = soft.nodeName;
      await waitCondition(cluster, softNode, 'DiskPressure', 'False', 60_000);
      const filler = busyboxPod(cluster, 'filler', softNode, {
        command: ['sh', '-c', 'dd if=/dev/zero of=/data/fill bs=1M count=300; sleep 3600'],
        extraSpec: { volumes: [{ name: 'data', emptyDir: {} }] },
      });
      const [c] = filler.spec?.containers ?? [];
      if (c !== undefined) c.volumeMounts = [{ name: 'data', mountPath: '/data' }];
      await applyJson(cluster, filler);
      const pressured = await waitCondition(cluster, softNode, 'DiskPressure', 'True', 90_000);
      const cond = pressured.status?.conditions?.find((x) => x.type === 'DiskPressure');
      assert.equal(cond?.reason, 'KubeletHasDiskPressure');
      const seen = Date.now();
      // The grace period (30 s from the first observation) runs: not evicted at 15 s.
      await new Promise((resolve) => setTimeout(resolve, 15_000));
      const waiting = await getJson<Pod>(cluster, ['get', 'pod', 'filler']);
      assert.equal(waiting?.status?.phase, 'Running', 'not evicted within the grace period');
      const pod = await evicted('filler', soft.logFile);
      assert.ok(Date.now() - seen >= 20_000, 'evicted after the grace period');
      assert.equal(pod.status?.reason, 'Evicted');
      assert.match(
        pod.status?.message ?? '',
        /^The node was low on resource: ephemeral-storage\. Threshold quantity: \d+(Ki|Mi)?, available: \d+(Ki|Mi)?\. /,
      );
      const disruption = pod.status?.conditions?.find((x) => x.type === 'DisruptionTarget');
      assert.equal(disruption?.reason, 'TerminationByKubelet');
    } finally {
      await cluster.kubectl(['delete', 'pods', '--all', '--wait=true']).catch(() => '');
      await soft?.stop();
      await fs.remove();
    }
  });
});
