/**
 * Pod admission and the active deadline on a berth node (issue #4 item 5): pods that do
 * not fit, or ask for AppArmor (which this host lacks), are rejected with upstream's
 * reasons; other pods are unaffected.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import {
  applyJson,
  busyboxPod,
  isRunningAndReady,
  podEvents,
  waitForPod,
} from '../harness/kube-helpers.ts';

const failed = (pod: Pod): boolean => pod.status?.phase === 'Failed';

describe('pod admission on berth (containerd 2.x)', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let node: string;

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    berth = await startBerth(cluster);
    node = berth.nodeName;
    await applyJson(cluster, busyboxPod(cluster, 'bystander', node));
    await waitForPod(cluster, 'default', 'bystander', 'Running', isRunningAndReady);
  });

  after(async () => {
    const bystander = await waitForPod(
      cluster,
      'default',
      'bystander',
      'still Running',
      isRunningAndReady,
      5000,
    );
    assert.equal(bystander.status?.containerStatuses?.[0]?.restartCount, 0);
    await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  async function expectRejected(pod: Pod, reason: string, message: RegExp): Promise<void> {
    const name = pod.metadata?.name ?? '';
    await applyJson(cluster, pod);
    const got = await waitForPod(cluster, 'default', name, `rejected (${reason})`, failed);
    assert.equal(got.status?.reason, reason);
    assert.match(got.status?.message ?? '', /^Pod was rejected: /);
    assert.match(got.status?.message ?? '', message);
    // It never ran: no container status shows a start.
    assert.ok(
      (got.status?.containerStatuses ?? []).every((c) => c.state?.running === undefined),
      'a rejected pod has no running container',
    );
    const events = await podEvents(cluster, 'default', name);
    assert.ok(
      events.some((e) => e.reason === reason && e.type === 'Warning'),
      `a Warning ${reason} event, got ${events.map((e) => e.reason).join(', ')}`,
    );
  }

  const requesting = (name: string, requests: Record<string, string>): Pod => {
    const pod = busyboxPod(cluster, name, node);
    const [c] = pod.spec?.containers ?? [];
    if (c !== undefined) c.resources = { requests };
    return pod;
  };

  test('more cpu than the node has: OutOfcpu', async () => {
    await expectRejected(
      requesting('too-much-cpu', { cpu: '512' }),
      'OutOfcpu',
      /Node didn't have enough resource: cpu, requested: 512000, used: \d+, capacity: \d+/,
    );
  });

  test('more memory than the node has: OutOfmemory', async () => {
    await expectRejected(
      requesting('too-much-memory', { memory: '64Ti' }),
      'OutOfmemory',
      /Node didn't have enough resource: memory, requested: 70368744177664/,
    );
  });

  test('a nodeSelector the node does not match: NodeAffinity', async () => {
    await expectRejected(
      busyboxPod(cluster, 'wrong-zone', node, { extraSpec: { nodeSelector: { zone: 'mars' } } }),
      'NodeAffinity',
      /Predicate NodeAffinity failed: node\(s\) didn't match Pod's node affinity\/selector/,
    );
  });

  test('a host port already taken by another pod: NodePorts', async () => {
    const withPort = (name: string): Pod => {
      const pod = busyboxPod(cluster, name, node);
      const [c] = pod.spec?.containers ?? [];
      if (c !== undefined)
        c.ports = [{ containerPort: 8080, hostPort: 18080, hostIP: '127.0.0.1' }];
      return pod;
    };
    await applyJson(cluster, withPort('port-owner'));
    await waitForPod(cluster, 'default', 'port-owner', 'Running', isRunningAndReady);
    await expectRejected(
      withPort('port-thief'),
      'NodePorts',
      /node\(s\) didn't have free ports for the requested pod ports/,
    );
  });

  test('another operating system: PodOSNotSupported', async () => {
    await expectRejected(
      busyboxPod(cluster, 'windows-pod', node, { extraSpec: { os: { name: 'windows' } } }),
      'PodOSNotSupported',
      /OS field doesn't match node OS/,
    );
  });

  test('AppArmor asked for on a host without it: AppArmor; Unconfined runs', async () => {
    await expectRejected(
      busyboxPod(cluster, 'apparmor-default', node, {
        extraSpec: { securityContext: { appArmorProfile: { type: 'RuntimeDefault' } } },
      }),
      'AppArmor',
      /^Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host$/,
    );
    await applyJson(
      cluster,
      busyboxPod(cluster, 'apparmor-unconfined', node, {
        extraSpec: { securityContext: { appArmorProfile: { type: 'Unconfined' } } },
      }),
    );
    await waitForPod(cluster, 'default', 'apparmor-unconfined', 'Running', isRunningAndReady);
  });

  test('activeDeadlineSeconds ends a running pod with DeadlineExceeded', async () => {
    await applyJson(
      cluster,
      busyboxPod(cluster, 'deadline', node, { extraSpec: { activeDeadlineSeconds: 3 } }),
    );
    await waitForPod(cluster, 'default', 'deadline', 'Running', isRunningAndReady);
    const pod = await waitForPod(cluster, 'default', 'deadline', 'Failed', failed, 30_000);
    assert.equal(pod.status?.reason, 'DeadlineExceeded');
    assert.equal(
      pod.status?.message,
      'Pod was active on the node longer than the specified deadline',
    );
    const events = await podEvents(cluster, 'default', 'deadline');
    assert.ok(events.some((e) => e.reason === 'DeadlineExceeded'));
  });

  test('a rejected pod can be deleted', async () => {
    await cluster.kubectl([
      '-n',
      'default',
      'delete',
      'pod',
      'too-much-cpu',
      '--wait=true',
      '--timeout=30s',
    ]);
  });
});
