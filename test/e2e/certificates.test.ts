/**
 * Certificates (issue #8): a berth node joins with a bootstrap token alone, its client
 * and serving certificates are issued through CSRs (the serving ones approved by the
 * test, as an operator would) and rotated while `kubectl logs -f` and the pod watch keep
 * working; bad bootstrap input is reported and retried. kube-controller-manager signs
 * with --cluster-signing-duration 3m, so certificates live 8 minutes (5 are backdated)
 * and rotate 0.6 to 2.2 minutes after they are issued.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFile, realpath, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { keepApprovingServingCsrs, createBootstrapToken } from '../harness/bootstrap.ts';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  getJson,
  isRunningAndReady,
  waitForPod,
} from '../harness/kube-helpers.ts';

async function certOf(file: string): Promise<X509Certificate | undefined> {
  try {
    return new X509Certificate(await readFile(file));
  } catch {
    return undefined;
  }
}

describe('certificates: TLS bootstrap and rotation (containerd 2.x)', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  const approver = new AbortController();
  let approving: Promise<string[]> | undefined;
  const nodeName = 'berth-bootstrapped';

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2', clusterSigningDuration: '3m' });
    approving = keepApprovingServingCsrs(cluster, nodeName, approver.signal);
  });

  after(async () => {
    approver.abort();
    await approving;
    await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  const ready = async (name: string): Promise<boolean> => {
    const node = await getJson<{ status?: { conditions?: { type: string; status: string }[] } }>(
      cluster,
      ['get', 'node', name],
    );
    return (
      node?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true
    );
  };

  test('a node joins from a bootstrap token alone and reaches Ready as system:node:<node>', async () => {
    berth = await startBerth(cluster, { nodeName, bootstrap: {} });
    await eventually(
      'the bootstrapped node to be Ready',
      async () => ((await ready(nodeName)) ? true : undefined),
      120_000,
      1000,
    );
    const current = join(berth.certDir, 'kubelet-client-current.pem');
    const cert = await certOf(current);
    assert.ok(cert !== undefined, 'kubelet-client-current.pem holds a certificate');
    assert.match(cert.subject, new RegExp(`CN=system:node:${nodeName}`));
    assert.match(cert.subject, /O=system:nodes/);
    assert.equal((await stat(await realpath(current))).mode & 0o777, 0o600);
    // Issued by the cluster CA, not self-signed.
    const ca = new X509Certificate(await readFile(cluster.pki.ca.cert));
    assert.ok(cert.verify(ca.publicKey));
  });

  test('kubectl logs verifies the serving certificate against the cluster CA', async () => {
    await applyJson(
      cluster,
      busyboxPod(cluster, 'talker', nodeName, {
        command: ['sh', '-c', 'i=0; while true; do echo "line $i"; i=$((i+1)); sleep 1; done'],
      }),
    );
    await waitForPod(cluster, 'default', 'talker', 'Running', isRunningAndReady, 90_000);
    // The serving CSR is approved by a poller: the pod can be Running before it is issued.
    const serving = await eventually(
      'the serving CSR to be approved and issued',
      () => certOf(join(berth.certDir, 'kubelet-server-current.pem')),
      60_000,
    );
    assert.match(serving.subjectAltName ?? '', /IP Address:127\.0\.0\.1/);
    // The apiserver runs with --kubelet-certificate-authority: this fails on a bad cert.
    const logs = await eventually('kubectl logs', async () => {
      const out = await cluster.kubectl(['-n', 'default', 'logs', 'talker', '--tail', '2']);
      return out.includes('line') ? out : undefined;
    });
    assert.match(logs, /line \d+/);
  });

  test('both certificates rotate twice while kubectl logs -f and the pod watch keep working', async () => {
    const follow = spawn(
      cluster.bin.kubectl,
      ['--kubeconfig', cluster.adminKubeconfig, '-n', 'default', 'logs', '-f', 'talker'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let followed = '';
    follow.stdout.on('data', (chunk: Buffer) => {
      followed += chunk.toString();
    });
    try {
      const seen = { client: new Set<string>(), server: new Set<string>() };
      await eventually(
        'two rotations of the client and of the serving certificate',
        async () => {
          for (const kind of ['client', 'server'] as const) {
            const c = await certOf(join(berth.certDir, `kubelet-${kind}-current.pem`));
            if (c !== undefined) seen[kind].add(c.fingerprint256);
          }
          return seen.client.size >= 3 && seen.server.size >= 3 ? true : undefined;
        },
        9 * 60_000,
        2000,
      );
      // The pod watch still delivers: a new pod is started after the rotations.
      await applyJson(cluster, busyboxPod(cluster, 'after-rotation', nodeName));
      await waitForPod(cluster, 'default', 'after-rotation', 'Running', isRunningAndReady, 60_000);
      // And the follower still receives lines written after the rotations.
      const before = followed.length;
      await eventually('new followed lines', () =>
        Promise.resolve(followed.length > before ? true : undefined),
      );
      assert.equal(follow.exitCode, null, 'kubectl logs -f is still running');
      assert.ok(await ready(nodeName));
      // A fresh kubectl logs uses the newest serving certificate.
      assert.match(
        await cluster.kubectl(['-n', 'default', 'logs', 'talker', '--tail', '1']),
        /line/,
      );
    } finally {
      follow.kill();
    }
  });

  test('bad input: a wrong or expired token is reported and retried; a truncated PEM is replaced', async () => {
    const expired = await createBootstrapToken(cluster, { expires: new Date(Date.now() - 60_000) });
    for (const [name, token] of [
      ['berth-wrong-token', 'abcdef.0123456789abcdef'],
      ['berth-expired-token', expired.token],
    ] as const) {
      const bad = await startBerth(cluster, { nodeName: name, bootstrap: { token } });
      try {
        await eventually(`${name} to report the rejected token`, async () => {
          const log = await readFile(bad.logFile, 'utf8').catch(() => '');
          return /bootstrap token.*rejected|401|Unauthorized/i.test(log) ? true : undefined;
        });
        assert.equal(bad.process.alive(), true, `${name} keeps retrying instead of exiting`);
      } finally {
        await bad.stop();
      }
    }
    // Truncate the node's client certificate: berth must notice and bootstrap again.
    await berth.stop();
    const file = await realpath(join(berth.certDir, 'kubelet-client-current.pem'));
    const text = await readFile(file, 'utf8');
    await writeFile(file, text.slice(0, Math.floor(text.length / 3)));
    berth = await berth.restart();
    await eventually(
      'a fresh, complete client certificate',
      async () => {
        const c = await certOf(join(berth.certDir, 'kubelet-client-current.pem'));
        return c !== undefined ? c : undefined;
      },
      120_000,
      1000,
    );
    const log = await readFile(berth.logFile, 'utf8');
    assert.match(log, /unusable|cannot be used|invalid/i);
    await eventually(
      'Ready again',
      async () => ((await ready(nodeName)) ? true : undefined),
      120_000,
      1000,
    );
  });
});
