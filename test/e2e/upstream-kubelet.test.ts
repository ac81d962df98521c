/**
 * The upstream kubelet as a node of the test cluster: the reference berth is measured
 * against. It registers a Ready node, runs a busybox pod (with a service-account token
 * volume, so mount propagation out of its namespace is exercised) whose logs the
 * apiserver can fetch, keeps its files off the machine's /var and kernel tunables, and
 * leaves nothing once stopped.
 */
import assert from 'node:assert/strict';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { GrpcCriClient } from '../../src/cri/index.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { startUpstreamKubelet, type UpstreamKubelet } from '../harness/upstream-kubelet.ts';

const NODE = 'upstream-e2e';
const SYSCTLS = ['vm/overcommit_memory', 'kernel/panic', 'kernel/panic_on_oops'] as const;

interface PodView {
  readonly status?: {
    readonly phase?: string;
    readonly containerStatuses?: readonly {
      readonly started?: boolean;
      readonly state?: { readonly running?: unknown };
    }[];
  };
}

interface NodeView {
  readonly status?: {
    readonly conditions?: readonly { readonly type?: string; readonly status?: string }[];
    readonly addresses?: readonly { readonly type?: string; readonly address?: string }[];
    readonly nodeInfo?: {
      readonly kubeletVersion?: string;
      readonly containerRuntimeVersion?: string;
    };
  };
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

async function sysctls(): Promise<string[]> {
  return Promise.all(SYSCTLS.map((s) => readFile(join('/proc/sys', s), 'utf8')));
}

async function until<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(250);
  }
}

describe('upstream kubelet', () => {
  let cluster: Cluster;
  let kubelet: UpstreamKubelet;
  const host = { varLogContainers: false, varLibKubelet: false, sysctls: [] as string[] };

  // kubectl's discovery cache under the cluster root: its default (~/.kube/cache) would
  // outlive the cluster.
  const kubectl = (args: readonly string[], options?: { input: string }): Promise<string> =>
    cluster.kubectl(['--cache-dir', join(cluster.root, 'kubectl-cache'), ...args], options);

  before(async () => {
    host.varLogContainers = await exists('/var/log/containers');
    host.varLibKubelet = await exists('/var/lib/kubelet');
    host.sysctls = await sysctls();
    cluster = await startCluster({ runtime: 'containerd2' });
    kubelet = await startUpstreamKubelet(cluster, { nodeName: NODE });
  });

  after(async () => {
    await kubelet.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  test('registers a Ready node of the pinned version with InternalIP 127.0.0.1', async () => {
    const node = JSON.parse(await kubectl(['get', 'node', NODE, '-o', 'json'])) as NodeView;
    const { conditions = [], addresses = [], nodeInfo } = node.status ?? {};
    assert.equal(conditions.find((c) => c.type === 'Ready')?.status, 'True');
    assert.equal(nodeInfo?.kubeletVersion, 'v1.37.2');
    assert.match(nodeInfo.containerRuntimeVersion ?? '', /^containerd:\/\/2\./);
    assert.equal(addresses.find((a) => a.type === 'InternalIP')?.address, '127.0.0.1');
  });

  test('runs a busybox pod to Running, and the apiserver reads its logs from the kubelet', async () => {
    await until('the default service account', async () => {
      const out = await kubectl(['get', 'serviceaccount', 'default', '-o', 'name']);
      return out.trim() === '' ? undefined : out;
    });
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'busybox', namespace: 'default' },
      spec: {
        nodeName: NODE,
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            name: 'main',
            image: cluster.images.busyboxLocal,
            imagePullPolicy: 'Never',
            command: [
              'sh',
              '-c',
              'echo started; cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo; sleep 3600',
            ],
          },
        ],
      },
    };
    await kubectl(['create', '-f', '-'], { input: JSON.stringify(pod) });
    await until('the pod to be Running with its container started', async () => {
      const view = JSON.parse(await kubectl(['get', 'pod', 'busybox', '-o', 'json'])) as PodView;
      const containers = view.status?.containerStatuses ?? [];
      const running =
        view.status?.phase === 'Running' &&
        containers.length === 1 &&
        containers.every((c) => c.started === true && c.state?.running !== undefined);
      return running ? view : undefined;
    });
    const logs = await until('the container to log', async () => {
      const out = await kubectl(['logs', 'busybox']);
      return out.includes('default') ? out : undefined;
    });
    assert.deepEqual(logs.trim().split('\n'), ['started', 'default']);
  });

  test('keeps its files off /var and leaves the kernel tunables alone', async () => {
    assert.equal(await exists('/var/log/containers'), host.varLogContainers);
    assert.equal(await exists('/var/lib/kubelet'), host.varLibKubelet);
    assert.deepEqual(await sysctls(), host.sysctls);
    const symlinks = join(kubelet.dir, 'host', 'var-log', 'containers');
    assert.ok(await exists(symlinks), 'the log symlinks went to the node directory instead');
  });

  test('stop removes its sandboxes from the runtime, its Node and its pods', async () => {
    await kubelet.stop();
    assert.equal(kubelet.process.alive(), false);
    const client = new GrpcCriClient(cluster.runtime.socket);
    try {
      const { items } = await client.runtime.listPodSandbox({});
      assert.deepEqual(items, []);
    } finally {
      client.close();
    }
    await until('the Node and its pod to be deleted', async () => {
      const left = await kubectl(['get', 'nodes,pods', '-A', '-o', 'name']);
      return left.trim() === '' ? true : undefined;
    });
  });
});
