/**
 * The probe GET on raw sockets, against servers that answer exactly as a test needs:
 * the request head on the wire, chunked and unframed bodies, interim 1xx answers, a
 * 204 from a server that keeps the connection, the 10 KiB cap, a connection closed
 * early, header injection refused, https without certificate checks, and an abort.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer as createHttpsServer } from 'node:https';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { writeTestCertificate } from '../util/test-certificate.ts';
import { MAX_BODY_BYTES, requestOnce, ResponseReader } from './http-request.ts';

/** Raw answers by request path; the server records each request head it read. */
const ANSWERS: Readonly<Record<string, string>> = {
  '/chunked':
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nfine\r\n7\r\n and ok\r\n0\r\n\r\n',
  '/unframed': 'HTTP/1.1 503 Service Unavailable\r\n\r\nnot yet',
  '/interim':
    'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n',
  '/no-content': 'HTTP/1.1 204 No Content\r\n\r\n',
  '/short': 'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this',
  '/silent': '',
};
/** Paths after which the server keeps the connection open (as a keep-alive server may). */
const KEEP_OPEN = new Set(['/no-content', '/silent']);

describe('probe GET on a raw socket', () => {
  let server: Server;
  let port = 0;
  const heads: string[] = [];
  const sockets = new Set<Socket>();

  before(async () => {
    server = createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      // The client closes as soon as it has its answer, which may reset this side.
      socket.on('error', () => undefined);
      let text = '';
      socket.on('data', (c: Buffer) => {
        text += c.toString('latin1');
        if (!text.includes('\r\n\r\n')) return;
        heads.push(text);
        const path = text.split(' ')[1] ?? '';
        const answer =
          path === '/big'
            ? `HTTP/1.1 200 OK\r\nContent-Length: ${64 * 1024}\r\n\r\n${'x'.repeat(64 * 1024)}`
            : (ANSWERS[path] ?? 'HTTP/1.1 404 Not Found\r\n\r\n');
        if (KEEP_OPEN.has(path)) socket.write(answer);
        else socket.end(answer);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  const get = (path: string, headers: Record<string, string> = {}, signal?: AbortSignal) =>
    requestOnce(
      new URL(`http://127.0.0.1:${port}${path}`),
      headers,
      signal ?? new AbortController().signal,
    );

  test('the request head: host, the given headers, Connection: close', async () => {
    heads.length = 0;
    await get('/chunked?q=1', { 'user-agent': 'kube-probe/1.37', accept: '*/*' });
    assert.equal(
      heads[0],
      `GET /chunked?q=1 HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nuser-agent: kube-probe/1.37\r\n` +
        'accept: */*\r\nConnection: close\r\n\r\n',
    );
    await get('/chunked', { host: 'web.example' });
    assert.match(heads[1] ?? '', /^GET \/chunked HTTP\/1\.1\r\nHost: web\.example\r\n/);
  });

  test('bodies: chunked, until the end, after an interim answer, none for 204', async () => {
    assert.deepEqual(await get('/chunked'), {
      statusCode: 200,
      location: undefined,
      body: 'fine and ok',
    });
    assert.deepEqual(await get('/unframed'), {
      statusCode: 503,
      location: undefined,
      body: 'not yet',
    });
    assert.deepEqual(await get('/interim'), { statusCode: 302, location: '/x', body: '' });
    // The server keeps this connection open: the answer must not wait for its end.
    assert.deepEqual(await get('/no-content'), {
      statusCode: 204,
      location: undefined,
      body: '',
    });
  });

  test('the body is cut at 10 KiB', async () => {
    const res = await get('/big');
    assert.equal(res.body.length, MAX_BODY_BYTES);
  });

  test('a connection closed before the answer or mid-body is an error', async () => {
    await assert.rejects(get('/short'), /unexpected EOF/);
    const reader = new ResponseReader();
    assert.throws(() => reader.end(), /^Error: EOF$/);
  });

  test('a header value with a line break is refused before anything is sent', async () => {
    heads.length = 0;
    await assert.rejects(
      get('/chunked', { 'x-a': 'v\r\nX-Injected: 1' }),
      /net\/http: invalid header field value for "x-a"/,
    );
    assert.deepEqual(heads, []);
  });

  test('an abort ends a request that gets no answer', async () => {
    const controller = new AbortController();
    const pending = get('/silent', {}, controller.signal);
    setTimeout(() => {
      controller.abort(new Error('probe timed out'));
    }, 50);
    await assert.rejects(pending, /probe timed out/);
  });

  test('https: a self-signed certificate is accepted', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-probe-tls-'));
    const certFile = join(dir, 'cert.pem');
    const keyFile = join(dir, 'key.pem');
    await writeTestCertificate({ certFile, keyFile, commonName: 'probe.test' });
    const tls = createHttpsServer(
      { cert: await readFile(certFile), key: await readFile(keyFile) },
      (_req, res) => res.end('secure'),
    );
    try {
      await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
      const tlsPort = (tls.address() as AddressInfo).port;
      const res = await requestOnce(
        new URL(`https://127.0.0.1:${tlsPort}/`),
        {},
        new AbortController().signal,
      );
      assert.equal(res.statusCode, 200);
      assert.equal(res.body, 'secure');
    } finally {
      tls.closeAllConnections();
      await new Promise((resolve) => tls.close(resolve));
      await rm(dir, { recursive: true, force: true });
    }
  });
});
