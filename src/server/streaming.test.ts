/**
 * The upgrade proxy between a client and a runtime streaming server, both real sockets
 * on loopback: bytes flow both ways, and streamingConnectionIdleTimeout closes a stream
 * only once it has been idle, never while bytes flow.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
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

async function openStream(port: number): Promise<Stream> {
  const socket = connect(port, '127.0.0.1');
  let text = '';
  let closed = false;
  socket.on('data', (c: Buffer) => (text += c.toString()));
  socket.on('close', () => (closed = true));
  socket.write('GET /exec HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n');
  for (let i = 0; i < 200 && !text.includes('\r\n\r\n'); i++) await sleep(10);
  assert.match(text, /^HTTP\/1\.1 101 /);
  return { socket, text: () => text, closed: () => closed };
}

describe('streaming upgrade proxy', () => {
  const servers: Server[] = [];
  const runtimeSockets = new Set<Duplex>();
  let runtimePort = 0;
  const logger = new MemoryLogger();

  /** A front server proxying every upgrade to the echoing runtime with `idleTimeoutMs`. */
  async function front(idleTimeoutMs: number): Promise<number> {
    const server = createServer();
    server.on('upgrade', (req, socket: Duplex, head: Buffer) => {
      proxyUpgrade(req, socket, head, `http://127.0.0.1:${runtimePort}/stream`, {
        logger,
        idleTimeoutMs,
      });
    });
    servers.push(server);
    return listening(server);
  }

  before(async () => {
    const runtime = createServer();
    runtime.on('upgrade', (_req, socket: Duplex) => {
      runtimeSockets.add(socket);
      socket.on('close', () => runtimeSockets.delete(socket));
      socket.write(
        'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n',
      );
      socket.pipe(socket);
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
});
