/**
 * The node:http(s) transport under HttpKubeClient, on loopback: TLS verified against
 * the configured CA (and refused without it), client certificates sent, the watch
 * headers timeout, in-flight counting for a graceful close, and server URLs it cannot
 * use.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TLSSocket } from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { writeTestCertificate } from '../util/test-certificate.ts';
import { HttpKubeClient } from './http-client.ts';
import { drain, Endpoint, readText } from './transport.ts';
import { CONFIGMAPS, inNamespace, KubeApiError } from './types.ts';

/** A self-signed certificate named `name`, valid for 127.0.0.1. */
async function certificate(dir: string, name: string): Promise<{ cert: string; key: string }> {
  const certFile = join(dir, `${name}.crt`);
  const keyFile = join(dir, `${name}.key`);
  await writeTestCertificate({ certFile, keyFile, commonName: name, ipSan: '127.0.0.1' });
  return { cert: await readFile(certFile, 'utf8'), key: await readFile(keyFile, 'utf8') };
}

describe('transport over HTTPS', () => {
  let dir: string;
  let server: Server;
  let url: string;
  let serving: { cert: string; key: string };
  let clientCert: { cert: string; key: string };
  /** Subject CN of each request's client certificate ('' when none). */
  const peers: string[] = [];
  let hang = false;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-transport-'));
    serving = await certificate(dir, 'server');
    clientCert = await certificate(dir, 'client');
    server = createServer(
      { ...serving, ca: clientCert.cert, requestCert: true, rejectUnauthorized: false },
      (req, res) => {
        const peer = req.socket instanceof TLSSocket ? req.socket.getPeerCertificate() : undefined;
        peers.push(typeof peer?.subject?.CN === 'string' ? peer.subject.CN : '');
        if (hang) return;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"metadata":{"name":"a"}}');
      },
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

  const cms = inNamespace(CONFIGMAPS, 'ns');

  test('verifies the server against the CA and presents the client certificate', async () => {
    const client = new HttpKubeClient({
      credentials: { server: url, ca: serving.cert, ...clientCert, insecureSkipTlsVerify: false },
    });
    assert.deepEqual(await client.get(cms, 'a'), { metadata: { name: 'a' } });
    assert.equal(peers.at(-1), 'client');
    await client.close();
  });

  test('an unknown server certificate is a transport failure, status 0', async () => {
    const other = await certificate(dir, 'other');
    const client = new HttpKubeClient({
      credentials: { server: url, ca: other.cert, insecureSkipTlsVerify: false },
    });
    await assert.rejects(client.get(cms, 'a'), (err: unknown) => {
      assert.ok(err instanceof KubeApiError);
      assert.equal(err.status, 0);
      assert.match(err.message, /certificate/i);
      return true;
    });
    await client.destroy();
  });

  test('a watch whose headers never come fails after watchHeadersTimeoutMs', async () => {
    hang = true;
    try {
      const client = new HttpKubeClient({
        credentials: { server: url, ca: serving.cert, insecureSkipTlsVerify: false },
        watchHeadersTimeoutMs: 200,
      });
      const iterator = client.watch(cms)[Symbol.asyncIterator]();
      await assert.rejects(iterator.next(), (err: unknown) => {
        assert.ok(err instanceof KubeApiError);
        assert.equal(err.status, 0);
        assert.match(err.message, /no bytes from the server for 200 ms/);
        return true;
      });
      await client.destroy();
    } finally {
      hang = false;
    }
  });

  test('idle() waits for the body to be read; destroy() fails what is in flight', async () => {
    const endpoint = new Endpoint({ server: url, ca: serving.cert, insecureSkipTlsVerify: false });
    const res = await endpoint.send({ method: 'GET', path: '/x', headers: {}, timeoutMs: 5000 });
    let idle = false;
    const waiting = endpoint.idle().then(() => (idle = true));
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(idle, false);
    assert.equal(await readText(res), '{"metadata":{"name":"a"}}');
    await waiting;
    hang = true;
    try {
      const seen = peers.length;
      const pending = endpoint.send({ method: 'GET', path: '/y', headers: {}, timeoutMs: 5000 });
      while (peers.length === seen) await new Promise((r) => setImmediate(r));
      endpoint.destroy();
      await assert.rejects(pending);
      await endpoint.idle();
    } finally {
      hang = false;
    }
    const again = new Endpoint({ server: url, insecureSkipTlsVerify: true });
    await drain(await again.send({ method: 'GET', path: '/', headers: {}, timeoutMs: 5000 }));
    again.destroy();
  });

  test('a server URL that is neither https nor http is refused up front', () => {
    assert.throws(
      () => new Endpoint({ server: 'ftp://127.0.0.1:1', insecureSkipTlsVerify: false }),
      /only https:\/\/ and http:\/\/ URLs are supported/,
    );
  });
});
