/**
 * The test cluster itself: it comes up healthy, its controllers work, and teardown
 * leaves nothing behind, even with a pod sandbox still running.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { GrpcCriClient } from '../../src/cri/index.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { fetchLocal } from '../harness/net.ts';

async function listDir(path: string): Promise<string[]> {
  return readdir(path).catch(() => []);
}

describe('test cluster', () => {
  let cluster: Cluster;

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
  });

  after(async () => {
    await cluster.stop();
  });

  test('the apiserver answers /readyz ok through kubectl', async () => {
    assert.equal((await cluster.kubectl(['get', '--raw', '/readyz'])).trim(), 'ok');
    const version = JSON.parse(await cluster.kubectl(['version', '-o', 'json'])) as {
      serverVersion?: { gitVersion?: string };
    };
    assert.equal(version.serverVersion?.gitVersion, 'v1.37.2');
  });

  test('the scheduler and controller-manager report healthy', async () => {
    const { controllerManager, scheduler } = cluster.controlPlane.ports;
    for (const port of [controllerManager, scheduler]) {
      const res = await fetchLocal(`https://127.0.0.1:${port}/healthz`, {
        rejectUnauthorized: false,
      });
      assert.equal(res.status, 200);
      assert.equal(res.body.toString(), 'ok');
    }
  });

  test('the service-account controllers run: a default service account gets a signed token', async () => {
    let found = '';
    for (let i = 0; i < 100 && found === ''; i++) {
      found = await cluster
        .kubectl(['get', 'serviceaccount', 'default', '-o', 'name'])
        .catch(() => '');
      if (found === '') await sleep(200);
    }
    assert.equal(found.trim(), 'serviceaccount/default');
    const token = (await cluster.kubectl(['create', 'token', 'default'])).trim();
    assert.equal(token.split('.').length, 3, 'a JWT');
  });

  test('every listener is on loopback', async () => {
    const { etcdClient, etcdPeer, apiserver, controllerManager, scheduler } =
      cluster.controlPlane.ports;
    const tcp = (await import('node:fs/promises')).readFile('/proc/net/tcp', 'utf8');
    const listening = (await tcp)
      .split('\n')
      .slice(1)
      .map((l) => l.trim().split(/\s+/))
      .filter((f) => f[3] === '0A')
      .map((f) => f[1] ?? '');
    for (const port of [etcdClient, etcdPeer, apiserver, controllerManager, scheduler]) {
      const hex = port.toString(16).toUpperCase().padStart(4, '0');
      const mine = listening.filter((a) => a.endsWith(`:${hex}`));
      assert.ok(mine.length > 0, `port ${port} listens`);
      for (const a of mine)
        assert.equal(a.split(':')[0], '0100007F', `port ${port} listens on 127.0.0.1 only`);
    }
  });
});

describe('teardown', () => {
  test('leaves no process, mount, netns, cgroup, bridge or directory, even with a pod running', async () => {
    const shimSocketsBefore = await listDir('/run/containerd/s');
    const netnsBefore = await listDir('/var/run/netns');
    const cluster = await startCluster({ runtime: 'containerd2' });
    const client = new GrpcCriClient(cluster.runtime.socket);
    try {
      const uid = randomUUID();
      const config = {
        metadata: { name: 'left-running', uid, namespace: 'berth-test', attempt: 0 },
        logDirectory: join(cluster.root, 'pod-logs', uid),
        linux: { cgroupParent: `${cluster.state.cgroupRoot}/pod${uid}` },
      };
      const { podSandboxId } = await client.runtime.runPodSandbox({ config });
      const { containerId } = await client.runtime.createContainer({
        podSandboxId,
        sandboxConfig: config,
        config: {
          metadata: { name: 'sleeper' },
          image: { image: cluster.images.busyboxLocal },
          command: ['sleep', '3600'],
        },
      });
      await client.runtime.startContainer({ containerId });
      assert.notDeepEqual(
        await cluster.leaks(),
        [],
        'a running cluster is found by the leak check',
      );
    } finally {
      client.close();
      await cluster.stop();
    }
    assert.deepEqual(await cluster.leaks(), []);
    assert.deepEqual(await listDir('/run/containerd/s'), shimSocketsBefore, 'no shim socket left');
    assert.deepEqual(await listDir('/var/run/netns'), netnsBefore, 'no network namespace left');
  });
});
