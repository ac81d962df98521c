/**
 * The client side of rotation end to end on loopback (no cluster): the kubeconfig the
 * bootstrap writes names kubelet-client-current.pem for both cert and key, and after
 * the store moves the symlink, HttpKubeClient.reload() makes new connections present
 * the new certificate while a watch opened before keeps running on the old one.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:https';
import type { ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { FakeClock } from '../util/clock.ts';
import { HttpKubeClient } from '../kube/http-client.ts';
import { parseKubeconfig } from '../kube/kubeconfig.ts';
import { inNamespace, PODS, type WatchEvent } from '../kube/types.ts';
import { bootstrapKubeconfigText } from './bootstrap.ts';
import { clientTemplate, createCsr, generateKey, servingTemplate } from './csr.ts';
import { CertificateStore } from './store.ts';
import { TestCa } from './test-ca.ts';
import { until } from './test-util.ts';

const DAY = 86_400_000;
const dir = mkdtempSync(join(tmpdir(), 'berth-rotation-'));
// A minute back: the TLS peers check notBefore against real time, and tests advance this clock.
const clock = new FakeClock(Date.now() - 60_000);
const ca = new TestCa(clock);
after(() => {
  ca.dispose();
  rmSync(dir, { recursive: true, force: true });
});

function issue(template = clientTemplate('node-1')): { certPem: string; keyPem: string } {
  const { key, keyPem } = generateKey();
  return { certPem: ca.sign(createCsr(key, template), DAY), keyPem };
}

/** An apiserver stand-in: `whoami` answers the peer certificate's serial; watches stay open. */
function startServer(): Promise<{ server: Server; port: number; watches: ServerResponse[] }> {
  const serving = servingTemplate('api', [{ type: 'InternalIP', address: '127.0.0.1' }]);
  assert.ok(serving);
  const { certPem, keyPem } = issue(serving);
  const watches: ServerResponse[] = [];
  const server = createServer(
    { cert: certPem, key: keyPem, ca: ca.caPem, requestCert: true, rejectUnauthorized: true },
    (req, res) => {
      assert.ok(req.socket instanceof TLSSocket);
      const peer = req.socket.getPeerCertificate();
      if ((req.url ?? '').includes('watch=')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.flushHeaders();
        watches.push(res);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ kind: 'Pod', apiVersion: 'v1', metadata: { name: peer.serialNumber } }),
      );
    },
  );
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      resolve({ server, port: (server.address() as AddressInfo).port, watches });
    });
  });
}

describe('client certificate rotation over HTTPS', () => {
  it('uses the new certificate for new requests without dropping a running watch', async () => {
    const { server, port, watches } = await startServer();
    const store = new CertificateStore({
      dir: join(dir, 'pki'),
      pairName: 'kubelet-client',
      clock,
    });
    const first = issue();
    const pair1 = await store.update(first.certPem, first.keyPem);
    const bootstrap = parseKubeconfig(
      `apiVersion: v1\nclusters: [{ name: c, cluster: { server: "https://127.0.0.1:${port}", certificate-authority-data: ${Buffer.from(ca.caPem).toString('base64')} } }]\ncontexts: [{ name: x, context: { cluster: c } }]\ncurrent-context: x\n`,
      { path: join(dir, 'bootstrap.conf') },
    );
    const kubeconfig = join(dir, 'kubelet.conf');
    await writeFile(kubeconfig, bootstrapKubeconfigText(bootstrap, store.currentPath));
    const client = await HttpKubeClient.fromKubeconfig(kubeconfig, { clock });
    const pods = inNamespace(PODS, 'default');
    try {
      const who1 = await client.get<Pod>(pods, 'whoami');
      assert.equal(who1.metadata?.name, pair1.x509.serialNumber);

      const events: WatchEvent<Pod>[] = [];
      const watching = (async () => {
        for await (const e of client.watch<Pod>(pods, {})) events.push(e);
      })();
      await until(() => watches.length === 1, 'the watch to reach the server');

      const second = issue();
      await clock.advance(1000); // a new dated file name
      const pair2 = await store.update(second.certPem, second.keyPem);
      assert.equal(await client.reload(), true);
      const who2 = await client.get<Pod>(pods, 'whoami');
      assert.equal(who2.metadata?.name, pair2.x509.serialNumber);
      assert.notEqual(pair1.x509.serialNumber, pair2.x509.serialNumber);

      // The watch opened with the old certificate still delivers.
      watches[0]?.write(
        `${JSON.stringify({ type: 'ADDED', object: { kind: 'Pod', metadata: { name: 'p1' } } })}\n`,
      );
      await until(() => events.length === 1, 'the event on the old watch');
      assert.equal(events[0]?.object.metadata?.name, 'p1');
      for (const w of watches) w.end();
      await watching;
    } finally {
      await client.close();
      await new Promise<void>((r) => {
        server.close(() => {
          r();
        });
      });
    }
  });

  it('serves a rotated serving certificate on new connections after setSecureContext', async () => {
    const template = servingTemplate('node-1', [{ type: 'InternalIP', address: '127.0.0.1' }]);
    assert.ok(template);
    const store = new CertificateStore({
      dir: join(dir, 'pki'),
      pairName: 'kubelet-server',
      clock,
    });
    const first = issue(template);
    const pair1 = await store.update(first.certPem, first.keyPem);
    const server = createServer({ cert: pair1.certPem, key: pair1.keyPem }, (_req, res) => {
      res.end('ok');
    });
    await new Promise<void>((r) =>
      server.listen(0, '127.0.0.1', () => {
        r();
      }),
    );
    const port = (server.address() as AddressInfo).port;
    const served = (): Promise<string> =>
      new Promise((resolve, reject) => {
        const req = request(
          { host: '127.0.0.1', port, path: '/', ca: ca.caPem, agent: false },
          (res) => {
            const socket = res.socket;
            assert.ok(socket instanceof TLSSocket);
            resolve(socket.getPeerCertificate().serialNumber);
            res.resume();
          },
        );
        req.on('error', reject);
        req.end();
      });
    try {
      assert.equal(await served(), pair1.x509.serialNumber);
      const second = issue(template);
      await clock.advance(1000);
      const pair2 = await store.update(second.certPem, second.keyPem);
      // What the :10250 server does in CertificateManager.onRotate.
      server.setSecureContext({ cert: pair2.certPem, key: pair2.keyPem });
      assert.equal(await served(), pair2.x509.serialNumber);
    } finally {
      await new Promise<void>((r) => {
        server.close(() => {
          r();
        });
      });
    }
  });
});
