/**
 * OOM kills on berth (containerd 2.x): a container over its own memory limit (busybox
 * `tail /dev/zero` under 32Mi, so the host is never at risk) ends OOMKilled with exit
 * code 137, berth's OOM watcher reads the kill from the real kernel log as one inside a
 * cgroup limit, and no SystemOOM event is recorded on the Node. A real system-wide OOM
 * is never provoked here; the SystemOOM event itself is covered by kmsg fixtures in
 * src/oom/oom.test.ts.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { applyJson, busyboxPod, eventually, getJson, waitForPod } from '../harness/kube-helpers.ts';

describe('OOM kills on berth (containerd 2.x)', () => {
  let cluster: Cluster;
  let berth: BerthNode;

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    berth = await startBerth(cluster);
  });

  after(async () => {
    await berth?.stop();
    await cluster?.stop();
  });

  test('a container over its own limit is OOMKilled, seen in the kernel log, and no SystemOOM', async () => {
    const pod = busyboxPod(cluster, 'hog', berth.nodeName, {
      command: ['tail', '/dev/zero'],
      extraSpec: { restartPolicy: 'Never' },
    });
    const main = pod.spec?.containers[0];
    assert.ok(main !== undefined && pod.spec !== undefined);
    await applyJson(cluster, {
      ...pod,
      spec: {
        ...pod.spec,
        containers: [
          { ...main, resources: { requests: { memory: '32Mi' }, limits: { memory: '32Mi' } } },
        ],
      },
    });
    const done = await waitForPod(
      cluster,
      'default',
      'hog',
      'OOMKilled',
      (p) => p.status?.containerStatuses?.[0]?.state?.terminated !== undefined,
      120_000,
    );
    const terminated = done.status?.containerStatuses?.[0]?.state?.terminated;
    assert.equal(terminated?.reason, 'OOMKilled');
    assert.equal(terminated?.exitCode, 137);
    const uid = done.metadata?.uid ?? '';
    assert.ok(uid !== '');
    // The watcher parsed this very kill from /dev/kmsg: its victim cgroup is the pod's.
    const podCgroup = new RegExp(`pod${uid.replaceAll('-', '[-_]')}`);
    const line = await eventually(
      'the OOM watcher logging the kill',
      async () =>
        (await readFile(berth.logFile, 'utf8'))
          .split('\n')
          .find((l) => l.includes('OOM kill inside a cgroup limit') && podCgroup.test(l)),
      60_000,
      1000,
    );
    assert.match(line, /tail/);
    const events = await getJson<{ items: { reason: string; source?: { host?: string } }[] }>(
      cluster,
      ['get', 'events', '-A', '--field-selector', 'reason=SystemOOM'],
    );
    assert.deepEqual(
      (events?.items ?? []).filter((e) => e.source?.host === berth.nodeName),
      [],
      'no SystemOOM on the node for a container limit',
    );
  });
});
