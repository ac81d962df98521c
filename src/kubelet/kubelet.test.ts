/**
 * The whole kubelet against the fake API server and the fake CRI runtime (each passes
 * the same contract suite as the real one): a bound pod runs and reports Running, an
 * exit reaches the status, a deletion stops and removes everything.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { FakeCgroupManager } from '../cm/fake.ts';
import type { Node, Pod } from 'kubernetes-types/core/v1.js';
import { FakeCriClient } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { inNamespace, NODES, PODS } from '../kube/types.ts';
import type { HostInfoProvider } from '../nodestatus/host-info.ts';
import { systemClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FakeMounter } from '../volumes/mounter.ts';
import { Kubelet, type KubeletOptions } from './kubelet.ts';

const host: HostInfoProvider = {
  capacity: () =>
    Promise.resolve({
      cpu: 2,
      memoryBytes: 8 * 1024 ** 3,
      ephemeralStorageBytes: 100 * 1024 ** 3,
      hugepages: {},
    }),
  systemInfo: () =>
    Promise.resolve({
      machineID: 'm',
      systemUUID: 'u',
      bootID: 'b',
      kernelVersion: '6.1',
      osImage: 'Debian',
      operatingSystem: 'linux',
      architecture: 'amd64',
    }),
};

const options: KubeletOptions = {
  nodeName: 'node-a',
  nodeIPs: ['127.0.0.1'],
  nodeLabels: {},
  registerWithTaints: [],
  podLogsDir: '/nonexistent/berth-test-logs',
  cgroupRoot: '/berth-unit',
  cgroupsPerQOS: true,
  maxPods: 110,
  kubeletPort: 10250,
  syncFrequencyMs: 60_000,
  nodeStatusUpdateFrequencyMs: 10_000,
  nodeStatusReportFrequencyMs: 300_000,
  nodeLeaseDurationSeconds: 40,
  maxParallelImagePulls: 2,
  evictionMemoryBytes: 100 * 1024 ** 2,
  evictionNodefsFraction: 0.1,
  clusterDNS: [],
  clusterDomain: 'cluster.local',
  resolvConf: '/etc/resolv.conf',
  rootDir: await mkdtemp(join(tmpdir(), 'berth-kubelet-unit-')),
  cgroupDriver: 'cgroupfs',
  podPidsLimit: -1,
};
after(() => rm(options.rootDir, { recursive: true, force: true }));

async function until<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function pod(name: string, command: string[], restartPolicy: 'Always' | 'Never' = 'Always'): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default' },
    spec: {
      nodeName: 'node-a',
      restartPolicy,
      terminationGracePeriodSeconds: 1,
      containers: [
        { name: 'main', image: 'berth.local/busybox:1', imagePullPolicy: 'IfNotPresent', command },
      ],
    },
  };
}

describe('Kubelet (fake API server and fake runtime)', () => {
  test('registers the node, runs a pod, reports exits, and cleans up a deleted pod', async () => {
    const kube = new FakeKubeClient();
    const cri = new FakeCriClient({ flavor: 'containerd2' });
    cri.addImage('berth.local/busybox:1', { preloaded: true });
    const recorder = new MemoryEventRecorder();
    const kubelet = new Kubelet(options, {
      kube,
      cri,
      recorder,
      clock: systemClock,
      logger: new MemoryLogger(),
      host,
      mounter: new FakeMounter(),
      cgroups: new FakeCgroupManager(),
    });
    await kubelet.start();
    try {
      const node = await kube.get<Node>(NODES, 'node-a');
      assert.equal(node.metadata?.labels?.['kubernetes.io/hostname'], 'node-a');
      await until('node Ready', async () => {
        const n = await kube.get<Node>(NODES, 'node-a');
        return n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true
          ? true
          : undefined;
      });

      const created = await kube.create(
        inNamespace(PODS, 'default'),
        pod('web', ['sleep', '3600']),
      );
      const running = await until('pod Running', async () => {
        const p = await kube.get<Pod>(inNamespace(PODS, 'default'), 'web');
        return p.status?.phase === 'Running' ? p : undefined;
      });
      const id =
        running.status?.containerStatuses?.[0]?.containerID?.replace('containerd://', '') ?? '';
      assert.ok(id !== '');
      assert.ok(recorder.reasons().includes('Started'));

      // An exit of a restartPolicy Never pod reaches the status as Failed with its code.
      await kube.create(inNamespace(PODS, 'default'), pod('job', ['sh', '-c', 'exit 3'], 'Never'));
      const jobRunning = await until('job running', async () => {
        const p = await kube.get<Pod>(inNamespace(PODS, 'default'), 'job');
        return p.status?.containerStatuses?.[0]?.state?.running !== undefined ? p : undefined;
      });
      cri.exitContainer(
        jobRunning.status?.containerStatuses?.[0]?.containerID?.replace('containerd://', '') ?? '',
        3,
      );
      const failed = await until('job Failed', async () => {
        const p = await kube.get<Pod>(inNamespace(PODS, 'default'), 'job');
        return p.status?.phase === 'Failed' ? p : undefined;
      });
      assert.equal(failed.status?.containerStatuses?.[0]?.state?.terminated?.exitCode, 3);

      // Deleting the pod (graceful) stops and removes its container and sandbox, then the object.
      await kube.delete(inNamespace(PODS, 'default'), 'web', { gracePeriodSeconds: 1 });
      await until('web removed from the API', async () => {
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
