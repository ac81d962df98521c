/**
 * The runtime side of a translated stream on loopback: the upgrade goes over the
 * connection StreamDialer opened early when that one reaches the URL's address, and
 * over a fresh one when it went elsewhere or failed; the early one is then closed
 * unused. An upgrade's preface leaves with its request.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { openRuntime, RuntimeConnection, StreamDialer } from './runtime-upgrade.ts';

const UPGRADED =
  'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n' +
  'X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n';

/** A streaming server that answers every request with 101; what each connection sent. */
interface Recorder {
  readonly server: Server;
  readonly port: number;
  /** Bytes per accepted connection, in accept order; closed ones stay. */
  readonly connections: { text: string; closed: boolean }[];
}

async function recorder(): Promise<Recorder> {
  const connections: { text: string; closed: boolean }[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    const seen = { text: '', closed: false };
    connections.push(seen);
    socket.on('data', (chunk: Buffer) => {
      const first = !seen.text.includes('\r\n\r\n');
      seen.text += chunk.toString('latin1');
      if (first && seen.text.includes('\r\n\r\n')) socket.write(UPGRADED);
    });
    socket.on('close', () => {
      seen.closed = true;
      sockets.delete(socket);
    });
    socket.on('error', () => undefined);
  });
  server.on('close', () => {
    for (const s of sockets) s.destroy();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as AddressInfo).port, connections };
}

async function until(what: () => boolean): Promise<void> {
  for (let i = 0; i < 300 && !what(); i++) await sleep(10);
  assert.ok(what(), 'in time');
}

describe('the runtime connection of a translated stream', () => {
  const servers: Server[] = [];
  const started = async (): Promise<Recorder> => {
    const r = await recorder();
    servers.push(r.server);
    return r;
  };
  after(() => {
    for (const s of servers) s.close();
  });

  test('before any stream there is no early connection; then it goes where the last went', async () => {
    const runtime = await started();
    const dialer = new StreamDialer();
    assert.equal(dialer.early(), undefined);
    dialer.remember(new URL(`http://127.0.0.1:${String(runtime.port)}/exec/first`));
    const early = dialer.early();
    assert.ok(early !== undefined);
    await until(() => runtime.connections.length === 1);
    assert.equal(early.address, `127.0.0.1:${String(runtime.port)}`);
    early.socket.destroy();
  });

  test('the upgrade and its preface go over the early connection to the same address', async () => {
    const runtime = await started();
    const early = new RuntimeConnection('127.0.0.1', runtime.port);
    await until(() => runtime.connections.length === 1);
    const url = new URL(`http://127.0.0.1:${String(runtime.port)}/exec/token?x=1`);
    const r = await openRuntime(url, 'v4.channel.k8s.io', new AbortController().signal, {
      preface: Buffer.from('PREFACE'),
      early,
    });
    assert.equal(r.socket, early.socket);
    assert.equal(runtime.connections.length, 1);
    const sent = runtime.connections[0]?.text ?? '';
    assert.match(sent, /^POST \/exec\/token\?x=1 HTTP\/1\.1\r\n/);
    assert.match(sent, /\r\nX-Stream-Protocol-Version: v4\.channel\.k8s\.io\r\n/);
    assert.ok(sent.endsWith('\r\n\r\nPREFACE'), 'the preface follows the request at once');
    r.socket.destroy();
  });

  test('an early connection elsewhere is closed unused and the URL gets its own', async () => {
    const old = await started();
    const current = await started();
    const early = new RuntimeConnection('127.0.0.1', old.port);
    await until(() => old.connections.length === 1);
    const url = new URL(`http://127.0.0.1:${String(current.port)}/exec/token`);
    const r = await openRuntime(url, 'v4.channel.k8s.io', new AbortController().signal, {
      early,
    });
    assert.notEqual(r.socket, early.socket);
    await until(() => old.connections[0]?.closed === true);
    assert.equal(old.connections[0]?.text, '', 'nothing was sent over the early one');
    assert.match(current.connections[0]?.text ?? '', /^POST \/exec\/token /);
    r.socket.destroy();
  });

  test('an early connection that failed is replaced by a fresh one to the same address', async () => {
    // Nothing listens on the port yet: the early connection is refused. A runtime
    // starting there afterwards still gets the stream.
    const probe = await started();
    const { port } = probe;
    await new Promise((resolve) => probe.server.close(resolve));
    const early = new RuntimeConnection('127.0.0.1', port);
    await until(() => !early.usable);
    const revived = createServer();
    const texts: string[] = [];
    revived.on('connection', (socket) => {
      socket.on('data', (chunk: Buffer) => {
        texts.push(chunk.toString('latin1'));
        socket.write(UPGRADED);
      });
    });
    servers.push(revived);
    revived.listen(port, '127.0.0.1');
    await once(revived, 'listening');
    const url = new URL(`http://127.0.0.1:${String(port)}/exec/token`);
    const r = await openRuntime(url, 'v4.channel.k8s.io', new AbortController().signal, {
      early,
    });
    assert.notEqual(r.socket, early.socket);
    assert.match(texts.join(''), /^POST \/exec\/token /);
    r.socket.destroy();
  });

  test('an abort before the answer closes the connection and rejects', async () => {
    const silent = createServer((socket) => {
      socket.on('error', () => undefined);
    });
    servers.push(silent);
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const port = (silent.address() as AddressInfo).port;
    const abort = new AbortController();
    const pending = openRuntime(
      new URL(`http://127.0.0.1:${String(port)}/exec/token`),
      'v4.channel.k8s.io',
      abort.signal,
    );
    abort.abort();
    await assert.rejects(pending, /the client went away/);
    const gone = new AbortController();
    gone.abort();
    await assert.rejects(
      openRuntime(
        new URL(`http://127.0.0.1:${String(port)}/exec/token`),
        'v4.channel.k8s.io',
        gone.signal,
      ),
      /the client went away/,
    );
  });
});
