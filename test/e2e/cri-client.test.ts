/**
 * The typed CRI client against each real runtime (containerd 2.x and 1.6), each in a
 * full test cluster with an authenticated registry: the shared CRI runtime contract
 * (test/contract), which the fake runtime passes too, plus what only a real client can
 * meet (a dead socket).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { CriUnavailableError, GrpcCriClient, cri } from '../../src/cri/index.ts';
import { startCluster, type Cluster, type RuntimeKind } from '../harness/cluster.ts';
import { criRuntimeContract, type CriRuntimeUnderTest } from '../contract/cri-runtime.contract.ts';

function podConfig(cluster: Cluster, name: string): cri.PodSandboxConfig {
  const uid = randomUUID();
  return cri.PodSandboxConfig.fromPartial({
    metadata: { name, uid, namespace: 'berth-test', attempt: 0 },
    hostname: name,
    logDirectory: join(cluster.root, 'pod-logs', uid),
    labels: { 'io.kubernetes.pod.name': name, 'io.kubernetes.pod.uid': uid },
    linux: {
      cgroupParent: `${cluster.state.cgroupRoot}/pod${uid}`,
      securityContext: {
        namespaceOptions: { network: cri.NamespaceMode.POD, pid: cri.NamespaceMode.CONTAINER },
      },
    },
  });
}

async function realRuntime(kind: RuntimeKind): Promise<CriRuntimeUnderTest> {
  const cluster = await startCluster({ runtime: kind });
  const client = new GrpcCriClient(cluster.runtime.socket, { defaultTimeoutMs: 30_000 });
  return {
    client,
    images: { busybox: cluster.images.busybox },
    credentials: cluster.registry.credentials,
    podConfig: (name) => podConfig(cluster, name),
    missingImage: `${cluster.registry.host}/berth/does-not-exist:1.0`,
    podSubnet: cluster.runtime.podSubnet,
    hasEvents: kind === 'containerd2',
    readLog: (config, relPath) => readFile(join(config.logDirectory, relPath), 'utf8'),
    teardown: async () => {
      client.close();
      await cluster.stop();
      assert.deepEqual(await cluster.leaks(), []);
    },
  };
}

criRuntimeContract('CRI client against containerd2', () => realRuntime('containerd2'));
criRuntimeContract('CRI client against containerd1', () => realRuntime('containerd1'));

describe('CRI client without a runtime', () => {
  test('a dead socket is a typed unavailable error within the deadline', async () => {
    const client = new GrpcCriClient('/nonexistent/berth/containerd.sock');
    try {
      // Unavailable, not DeadlineExceeded: the failure is the dead socket's, reported
      // before the 3 s deadline could expire (the error class says so; no clock needed).
      await assert.rejects(client.runtime.version({}, { timeoutMs: 3000 }), (err: unknown) => {
        assert.ok(err instanceof CriUnavailableError, String(err));
        assert.equal(err.code, 'BERTH_CRI_UNAVAILABLE');
        return true;
      });
    } finally {
      client.close();
    }
  });
});
