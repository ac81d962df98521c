/**
 * The whole kubelet against the fake API server and the fake CRI runtime (each passes
 * the same contract suite as the real one), on the fake clock: a bound pod runs and
 * reports Running, a readiness probe's result makes it Ready, an exit reaches the
 * status, a deletion stops and removes everything. Each step waits on fake time only,
 * so a broken wiring (a wake-up that never comes) fails instead of waiting for a
 * periodic pass.
 */
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { after, describe, test } from 'node:test';
import { FakeCgroupManager } from '../cm/fake.ts';
import type { Container, Node, Pod } from 'kubernetes-types/core/v1.js';
import { FakeCriClient } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { inNamespace, NODES, PODS } from '../kube/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FakeMounter } from '../volumes/mounter.ts';
import { Kubelet } from './kubelet.ts';
import { host, testKubeletOptions, untilOnClock } from './testing.ts';

// No resync within any wait below: each step must come from its own wake-up (watch,
// PLEG event, probe result), not from the periodic pass.
const options = { ...(await testKubeletOptions()), syncFrequencyMs: 600_000 };
after(() => rm(options.rootDir, { recursive: true, force: true }));

function pod(
  name: string,
  command: string[],
  restartPolicy: 'Always' | 'Never' = 'Always',
  container: Partial<Container> = {},
): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default' },
    spec: {
      nodeName: 'node-a',
      restartPolicy,
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'main',
          image: 'berth.local/busybox:1',
          imagePullPolicy: 'IfNotPresent',
          command,
          ...container,
        },
      ],
    },
  };
}

describe('Kubelet (fake API server and fake runtime)', () => {
  test('registers the node, runs a pod, reports exits, and cleans up a deleted pod', async () => {
    const clock = new FakeClock();
    const kube = new FakeKubeClient({ clock });
    const cri = new FakeCriClient({ flavor: 'containerd2', clock });
    cri.addImage('berth.local/busybox:1', { preloaded: true });
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
      const node = await kube.get<Node>(NODES, 'node-a');
      assert.equal(node.metadata?.labels?.['kubernetes.io/hostname'], 'node-a');
      await untilOnClock(clock, 'node Ready', async () => {
        const n = await kube.get<Node>(NODES, 'node-a');
        return n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true
          ? true
          : undefined;
      });

      const created = await kube.create(
        inNamespace(PODS, 'default'),
        pod('web', ['sleep', '3600']),
      );
      const running = await untilOnClock(clock, 'pod Running', async () => {
        const p = await kube.get<Pod>(inNamespace(PODS, 'default'), 'web');
        return p.status?.phase === 'Running' ? p : undefined;
      });
      const id =
        running.status?.containerStatuses?.[0]?.containerID?.replace('containerd://', '') ?? '';
      assert.ok(id !== '');
      assert.ok(recorder.reasons().includes('Started'));

      // A readiness probe's result reaches the status at once (prober -> sync loop -> sync).
      let probeExit = 1;
      cri.onExec(() => ({ exitCode: probeExit, stdout: '' }));
      const readinessProbe = {
        exec: { command: ['ready'] },
        periodSeconds: 1,
        failureThreshold: 1,
      };
      await kube.create(
        inNamespace(PODS, 'default'),
        pod('probed', ['sleep', '3600'], 'Always', { readinessProbe }),
      );
      const ready = (want: string) => async (): Promise<true | undefined> => {
        const p = await kube.get<Pod>(inNamespace(PODS, 'default'), 'probed');
        const condition = p.status?.conditions?.find((c) => c.type === 'Ready');
        return p.status?.phase === 'Running' && condition?.status === want ? true : undefined;
      };
      await untilOnClock(clock, 'probed pod Running, not Ready', ready('False'));
      probeExit = 0;
      await untilOnClock(clock, 'probed pod Ready', ready('True'));
      probeExit = 1;
      await untilOnClock(clock, 'probed pod not Ready again', ready('False'));

      // An exit of a restartPolicy Never pod reaches the status as Failed with its code.
      await kube.create(inNamespace(PODS, 'default'), pod('job', ['sh', '-c', 'exit 3'], 'Never'));
      const jobRunning = await untilOnClock(clock, 'job running', async () => {
        const p = await kube.get<Pod>(inNamespace(PODS, 'default'), 'job');
        return p.status?.containerStatuses?.[0]?.state?.running !== undefined ? p : undefined;
      });
      cri.exitContainer(
        jobRunning.status?.containerStatuses?.[0]?.containerID?.replace('containerd://', '') ?? '',
        3,
      );
      const failed = await untilOnClock(clock, 'job Failed', async () => {
        const p = await kube.get<Pod>(inNamespace(PODS, 'default'), 'job');
        return p.status?.phase === 'Failed' ? p : undefined;
      });
      assert.equal(failed.status?.containerStatuses?.[0]?.state?.terminated?.exitCode, 3);

      // Deleting the pod (graceful) stops and removes its container and sandbox, then the object.
      await kube.delete(inNamespace(PODS, 'default'), 'web', { gracePeriodSeconds: 1 });
      await untilOnClock(clock, 'web removed from the API', async () => {
        const list = await kube.list<Pod>(inNamespace(PODS, 'default'));
        return list.items.some((p) => p.metadata?.uid === created.metadata?.uid) ? undefined : true;
      });
      const { containers } = await cri.runtime.listContainers({});
      assert.ok(!containers.some((c) => c.id === id), 'the container is removed');
    } finally {
      await kubelet.stop();
      cri.close();
      await kube.close();
    }
  });
});
