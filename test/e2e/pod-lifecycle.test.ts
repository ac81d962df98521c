/**
 * Exit codes and restart policies, CrashLoopBackOff, image pulls and bad input on a
 * berth node (issue #3 acceptance), against containerd 2.x and 1.6.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
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

const terminated = (pod: Pod, name = 'main') =>
  pod.status?.containerStatuses?.find((c) => c.name === name)?.state?.terminated;

function suite(kind: RuntimeKind): void {
  describe(`pod lifecycle on berth with ${kind}`, () => {
    let cluster: Cluster;
    let berth: BerthNode;
    let node: string;

    before(async () => {
      cluster = await startCluster({ runtime: kind });
      berth = await startBerth(cluster);
      node = berth.nodeName;
      await applyJson(cluster, busyboxPod(cluster, 'bystander', node));
      await waitForPod(cluster, 'default', 'bystander', 'Running', isRunningAndReady, 60_000);
    });

    after(async () => {
      // Other pods on the node were never disturbed by the failures below.
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

    test('restartPolicy Never: Succeeded with exit 0, Failed with the exit code', async () => {
      await applyJson(
        cluster,
        busyboxPod(cluster, 'never-ok', node, {
          restartPolicy: 'Never',
          command: ['sh', '-c', 'exit 0'],
        }),
      );
      await applyJson(
        cluster,
        busyboxPod(cluster, 'never-fail', node, {
          restartPolicy: 'Never',
          command: ['sh', '-c', 'exit 7'],
        }),
      );
      const ok = await waitForPod(
        cluster,
        'default',
        'never-ok',
        'Succeeded',
        (p) => p.status?.phase === 'Succeeded',
      );
      assert.equal(terminated(ok)?.exitCode, 0);
      assert.equal(terminated(ok)?.reason, 'Completed');
      const failed = await waitForPod(
        cluster,
        'default',
        'never-fail',
        'Failed',
        (p) => p.status?.phase === 'Failed',
      );
      assert.equal(terminated(failed)?.exitCode, 7);
      assert.equal(terminated(failed)?.reason, 'Error');
      assert.equal(failed.status?.containerStatuses?.[0]?.restartCount, 0);
    });

    test('restartPolicy OnFailure reruns only the failing container', async () => {
      await applyJson(
        cluster,
        busyboxPod(cluster, 'on-failure', node, {
          restartPolicy: 'OnFailure',
          containers: [
            { name: 'ok', command: ['sh', '-c', 'exit 0'] },
            { name: 'bad', command: ['sh', '-c', 'exit 1'] },
          ],
        }),
      );
      const pod = await waitForPod(
        cluster,
        'default',
        'on-failure',
        'the failing container restarted',
        (p) => (p.status?.containerStatuses?.find((c) => c.name === 'bad')?.restartCount ?? 0) >= 1,
        60_000,
      );
      const ok = pod.status?.containerStatuses?.find((c) => c.name === 'ok');
      assert.equal(ok?.restartCount, 0);
      assert.equal(ok?.state?.terminated?.exitCode, 0);
      assert.notEqual(pod.status?.phase, 'Succeeded');
    });

    test('restartPolicy Always enters CrashLoopBackOff with growing back-off', async () => {
      await applyJson(
        cluster,
        busyboxPod(cluster, 'crasher', node, { command: ['sh', '-c', 'exit 2'] }),
      );
      await waitForPod(
        cluster,
        'default',
        'crasher',
        'restarted twice',
        (p) => (p.status?.containerStatuses?.[0]?.restartCount ?? 0) >= 2,
        90_000,
      );
      const looping = await waitForPod(
        cluster,
        'default',
        'crasher',
        'in CrashLoopBackOff',
        (p) => p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'CrashLoopBackOff',
        60_000,
      );
      assert.match(
        looping.status?.containerStatuses?.[0]?.state?.waiting?.message ?? '',
        /back-off \d+s restarting failed container=main/,
      );
      assert.equal(looping.status?.containerStatuses?.[0]?.lastState?.terminated?.exitCode, 2);
      const table = await cluster.kubectl(['-n', 'default', 'get', 'pod', 'crasher']);
      assert.match(table, /CrashLoopBackOff/);
      // Back-off grows: the BackOff events' messages name 10s then 20s (upstream's schedule).
      const messages = await eventually(
        'back-off of 20s',
        async () => {
          const p = await waitForPod(cluster, 'default', 'crasher', 'waiting', () => true);
          const m = p.status?.containerStatuses?.[0]?.state?.waiting?.message ?? '';
          return /back-off 20s/.test(m) || /back-off 40s/.test(m) ? m : undefined;
        },
        90_000,
      );
      assert.match(messages, /back-off (20|40)s/);
      const events = await podEvents(cluster, 'default', 'crasher');
      assert.ok(
        events.some((e) => e.reason === 'BackOff'),
        'BackOff event',
      );
    });

    test('a missing image gives ErrImagePull, then ImagePullBackOff', async () => {
      const image = `${cluster.registry.host}/berth/does-not-exist:1.0`;
      // Watch the pod: ErrImagePull may be in the API for only a moment before the next
      // sync reports ImagePullBackOff, so polling could miss it.
      const watcher = spawn(cluster.bin.kubectl, [
        '--kubeconfig',
        cluster.adminKubeconfig,
        '-n',
        'default',
        'get',
        'pods',
        // A field selector, not a name: watching a named pod fails before it exists.
        '--field-selector',
        'metadata.name=missing-image',
        '-w',
        '-o',
        'jsonpath={.status.containerStatuses[0].state.waiting.reason}{"\\n"}',
      ]);
      const reasons = new Set<string>();
      watcher.stdout.on('data', (chunk: Buffer) => {
        for (const line of chunk.toString().split('\n'))
          if (line.trim() !== '') reasons.add(line.trim());
      });
      try {
        await applyJson(
          cluster,
          busyboxPod(cluster, 'missing-image', node, { image, imagePullPolicy: 'Always' }),
        );
        await eventually(
          'ErrImagePull and ImagePullBackOff',
          () =>
            Promise.resolve(
              reasons.has('ErrImagePull') && reasons.has('ImagePullBackOff') ? true : undefined,
            ),
          60_000,
          100,
        );
      } finally {
        watcher.kill();
      }
      const events = await podEvents(cluster, 'default', 'missing-image');
      assert.ok(
        events.some((e) => e.reason === 'Failed' && e.message.includes('Failed to pull image')),
        'Failed event',
      );
      assert.ok(
        events.some((e) => e.reason === 'Failed' && e.message === 'Error: ErrImagePull'),
        'ErrImagePull event',
      );
      assert.ok(
        events.some((e) => e.reason === 'BackOff'),
        'BackOff event',
      );
      assert.ok(
        events.some((e) => e.reason === 'Pulling'),
        'Pulling event',
      );
    });

    test('a private image runs with the right imagePullSecret and fails without it', async () => {
      await applyRegistrySecret(cluster, 'registry-creds');
      await applyJson(
        cluster,
        busyboxPod(cluster, 'private-ok', node, {
          image: cluster.images.busybox,
          imagePullPolicy: 'Always',
          extraSpec: { imagePullSecrets: [{ name: 'registry-creds' }] },
        }),
      );
      await applyJson(
        cluster,
        busyboxPod(cluster, 'private-no-secret', node, {
          image: cluster.images.busybox,
          imagePullPolicy: 'Always',
        }),
      );
      await waitForPod(cluster, 'default', 'private-ok', 'Running', isRunningAndReady, 60_000);
      const denied = await waitForPod(
        cluster,
        'default',
        'private-no-secret',
        'ErrImagePull',
        (p) =>
          ['ErrImagePull', 'ImagePullBackOff'].includes(
            p.status?.containerStatuses?.[0]?.state?.waiting?.reason ?? '',
          ),
        60_000,
      );
      assert.notEqual(denied.status?.phase, 'Running');
      const events = await podEvents(cluster, 'default', 'private-ok');
      assert.ok(
        events.some((e) => e.reason === 'Pulled' && /Successfully pulled image/.test(e.message)),
        'Pulled with duration',
      );
    });

    test('bad input: an invalid image reference is InvalidImageName with an event', async () => {
      await applyJson(
        cluster,
        busyboxPod(cluster, 'bad-ref', node, { image: 'Invalid//Image:::' }),
      );
      const pod = await waitForPod(
        cluster,
        'default',
        'bad-ref',
        'InvalidImageName',
        (p) => p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'InvalidImageName',
        30_000,
      );
      assert.match(
        pod.status?.containerStatuses?.[0]?.state?.waiting?.message ?? '',
        /invalid reference format/,
      );
      // Events go out on their own queue: the status patch may land first.
      const events = await eventually(
        'an InspectFailed event',
        async () => {
          const list = await podEvents(cluster, 'default', 'bad-ref');
          return list.some((e) => e.reason === 'InspectFailed') ? list : undefined;
        },
        30_000,
      );
      assert.ok(
        events.some((e) => e.reason === 'InspectFailed'),
        'InspectFailed event',
      );
    });

    test('bad input: an unknown runtime handler fails sandbox creation with an event', async () => {
      await applyJson(cluster, {
        apiVersion: 'node.k8s.io/v1',
        kind: 'RuntimeClass',
        metadata: { name: 'nope' },
        handler: 'no-such-handler',
      });
      await applyJson(
        cluster,
        busyboxPod(cluster, 'bad-handler', node, { extraSpec: { runtimeClassName: 'nope' } }),
      );
      const events = await eventually(
        'FailedCreatePodSandBox',
        async () => {
          const list = await podEvents(cluster, 'default', 'bad-handler');
          return list.some((e) => e.reason === 'FailedCreatePodSandBox') ? list : undefined;
        },
        30_000,
      );
      assert.ok(
        events.some(
          (e) => e.reason === 'FailedCreatePodSandBox' && /no-such-handler/.test(e.message),
        ),
      );
      const pod = await waitForPod(
        cluster,
        'default',
        'bad-handler',
        'Pending',
        (p) => p.status?.phase === 'Pending',
      );
      assert.equal(pod.status?.containerStatuses?.[0]?.state?.waiting?.reason, 'ContainerCreating');
    });

    test('bad input: a command missing from the image fails the container with an event', async () => {
      await applyJson(
        cluster,
        busyboxPod(cluster, 'bad-command', node, {
          restartPolicy: 'Never',
          command: ['/no/such/binary'],
        }),
      );
      const pod = await waitForPod(
        cluster,
        'default',
        'bad-command',
        'Failed',
        (p) => p.status?.phase === 'Failed',
        30_000,
      );
      const t = terminated(pod);
      assert.ok(t !== undefined && t.exitCode !== 0, 'terminated with a non-zero exit code');
      assert.match(`${t.reason ?? ''} ${t.message ?? ''}`, /StartError|no such file|not found/i);
      const events = await eventually(
        'a Failed warning event',
        async () => {
          const list = await podEvents(cluster, 'default', 'bad-command');
          return list.some((e) => e.type === 'Warning' && e.reason === 'Failed') ? list : undefined;
        },
        30_000,
      );
      assert.ok(
        events.some((e) => e.type === 'Warning' && e.reason === 'Failed'),
        'a Failed warning event',
      );
    });
  });
}

suite('containerd2');
suite('containerd1');
