/**
 * The upgrade proxy between a client and a runtime streaming server, both real sockets
 * on loopback: bytes flow both ways, and streamingConnectionIdleTimeout closes a stream
 * only once it has been idle, never while bytes flow. Megabytes through pooled read
 * buffers arrive intact behind a slow client; a runtime's refusal is relayed as it
 * came and ends the connection; a runtime that is down or answers garbage is a 502.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { MemoryLogger } from '../util/logger.ts';
import { proxyUpgrade } from './streaming.ts';

async function listening(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** A connected, upgraded client: what it has read so far, and whether it closed. */
interface Stream {
  readonly socket: Socket;
  text(): string;
  closed(): boolean;
}

const UPGRADE =
  'GET /exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\nConnection: Upgrade\r\n' +
  'Upgrade: test\r\n\r\n';

/** Sends an upgrade request to the front server; the socket, before any answer. */
function upgrade(port: number): { socket: Socket; text: () => string; closed: () => boolean } {
  const socket = connect(port, '127.0.0.1');
  let text = '';
  let closed = false;
  socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
  socket.on('close', () => (closed = true));
  socket.write(UPGRADE);
  return { socket, text: () => text, closed: () => closed };
}

async function until(what: () => boolean): Promise<void> {
  for (let i = 0; i < 300 && !what(); i++) await sleep(10);
}

async function openStream(port: number): Promise<Stream> {
  const stream = upgrade(port);
  await until(() => stream.text().includes('\r\n\r\n'));
  assert.match(stream.text(), /^HTTP\/1\.1 101 /);
  return stream;
}

describe('streaming upgrade proxy', () => {
  const servers: Server[] = [];
  const runtimeSockets = new Set<Duplex>();
  let runtimePort = 0;
  const logger = new MemoryLogger();
  const seen: IncomingMessage[] = [];
  const BULK = randomBytes(8 * 1024 * 1024);
  const ANSWERS: Readonly<Record<string, string>> = {
    '/refuse':
      'HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\r\n' +
      'no such token\n',
    // No length: the body ends when the runtime goes quiet (it keeps the connection).
    '/refuse-unframed': 'HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n\r\nbad\n',
    '/garbage': 'SSH-2.0-OpenSSH\r\n\r\n',
  };

  /** A front server proxying every upgrade to the runtime's `path` with `idleTimeoutMs`. */
  async function front(idleTimeoutMs: number, path = '/stream', port?: number): Promise<number> {
    const server = createServer();
    server.on('upgrade', (req, socket: Duplex, head: Buffer) => {
      proxyUpgrade(req, socket, head, `http://127.0.0.1:${port ?? runtimePort}${path}`, {
        logger,
        idleTimeoutMs,
      });
    });
    servers.push(server);
    return listening(server);
  }

  before(async () => {
    const runtime = createServer();
    runtime.on('upgrade', (req, socket: Duplex) => {
      runtimeSockets.add(socket);
      socket.on('close', () => runtimeSockets.delete(socket));
      seen.push(req);
      const answer = ANSWERS[req.url ?? ''];
      if (answer !== undefined) {
        socket.write(answer);
        return;
      }
      socket.write(
        'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n',
      );
      if (req.url === '/bulk') socket.end(BULK);
      else socket.pipe(socket);
    });
    servers.push(runtime);
    runtimePort = await listening(runtime);
  });

  after(async () => {
    for (const s of runtimeSockets) s.destroy();
    await Promise.all(
      servers.map((s) => {
        s.closeAllConnections();
        return new Promise((resolve) => s.close(resolve));
      }),
    );
  });

  test('relays bytes both ways and closes the stream once idle for the timeout', async () => {
    const stream = await openStream(await front(400));
    // Traffic every 100 ms for well over the timeout keeps it open.
    for (let i = 0; i < 10; i++) {
      stream.socket.write(`ping${i};`);
      await sleep(100);
    }
    assert.equal(stream.closed(), false);
    assert.match(stream.text(), /ping0;ping1;.*ping9;$/s);
    for (let i = 0; i < 300 && !stream.closed(); i++) await sleep(10);
    assert.equal(stream.closed(), true, 'the idle stream was closed');
    for (let i = 0; i < 100 && runtimeSockets.size > 0; i++) await sleep(10);
    assert.equal(runtimeSockets.size, 0, 'and its runtime side with it');
    assert.ok(logger.records.some((r) => r.msg === 'Closing an idle stream'));
  });

  test('a timeout of 0 leaves an idle stream open', async () => {
    const stream = await openStream(await front(0));
    await sleep(700);
    assert.equal(stream.closed(), false);
    stream.socket.write('still-there');
    for (let i = 0; i < 100 && !stream.text().endsWith('still-there'); i++) await sleep(10);
    assert.ok(stream.text().endsWith('still-there'));
    stream.socket.destroy();
  });

  test('megabytes reach a slow client intact, through reused read buffers', async () => {
    const port = await front(0, '/bulk');
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let closed = false;
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      // Reading slowly at first makes the proxy pause the runtime and queue writes.
      if (chunks.length % 16 === 1 && chunks.length < 64) {
        socket.pause();
        setTimeout(() => socket.resume(), 100);
      }
    });
    socket.on('close', () => (closed = true));
    socket.write(UPGRADE);
    await until(() => closed);
    const all = Buffer.concat(chunks);
    const body = all.subarray(all.indexOf('\r\n\r\n') + 4);
    assert.equal(body.length, BULK.length);
    const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
    assert.equal(sha(body), sha(BULK));
  });

  test('the runtime sees the upgrade without the caller credentials', async () => {
    seen.length = 0;
    const stream = await openStream(await front(0));
    stream.socket.destroy();
    const req = seen[0];
    assert.ok(req !== undefined);
    assert.equal(req.headers.authorization, undefined);
    assert.equal(req.headers.upgrade, 'test');
    assert.equal(req.headers.host, `127.0.0.1:${runtimePort}`);
    assert.equal(req.method, 'GET');
  });

  test("a runtime's refusal is relayed with its body, then the connection closes", async () => {
    const refused = upgrade(await front(0, '/refuse'));
    await until(refused.closed);
    assert.match(refused.text(), /^HTTP\/1\.1 404 Not Found\r\n/);
    assert.match(refused.text(), /\r\nConnection: close\r\n/i);
    assert.ok(refused.text().endsWith('\r\n\r\nno such token\n'));
    const unframed = upgrade(await front(0, '/refuse-unframed'));
    await until(unframed.closed);
    assert.equal(unframed.closed(), true);
    assert.match(unframed.text(), /^HTTP\/1\.1 400 Bad Request\r\n/);
    assert.ok(unframed.text().endsWith('\r\n\r\nbad\n'));
  });

  test('a runtime that is down or answers garbage is a 502', async () => {
    const garbage = upgrade(await front(0, '/garbage'));
    await until(garbage.closed);
    assert.match(garbage.text(), /^HTTP\/1\.1 502 /);
    const probe = createServer();
    const downPort = await listening(probe);
    await new Promise((resolve) => probe.close(resolve));
    const down = upgrade(await front(0, '/stream', downPort));
    await until(down.closed);
    assert.match(down.text(), /^HTTP\/1\.1 502 /);
    assert.match(down.text(), /Cannot reach the runtime streaming server/);
  });
});
