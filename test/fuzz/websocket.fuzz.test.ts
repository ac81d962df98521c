/**
 * The WebSocket channel protocol (v5.channel.k8s.io) berth translates to the runtime's
 * SPDY, with both ends hostile: a client sending any messages on any channel, and a
 * runtime answering the upgrade with any bytes (frames for the exec's streams, garbage,
 * a status or none) and then closing or not. Properties: berth never throws (an
 * uncaught error fails the run), the client's WebSocket always closes once either end
 * is done, and berth closes its runtime connection when the client goes.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { WebSocket } from 'ws';
import { dataFrame, pingFrame } from '../../src/server/spdy.ts';
import { serveTranslated, V5_PROTOCOL } from '../../src/server/ws-translate.ts';
import { MemoryLogger } from '../../src/util/logger.ts';
import { createServer as createHttpServer } from '../../src/util/node-http.ts';
import { fuzzAsync } from './run.ts';

const UPGRADED =
  'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n' +
  'X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n';
/** The stream IDs berth opens for stdin, stdout, stderr and a TTY: error 1, stdin 3, ... */
const STREAM_IDS = [1, 3, 5, 7, 9, 11, 0x7fff_ffff];

const runtimeBytes = fc.array(
  fc.oneof(
    fc
      .tuple(fc.constantFrom(...STREAM_IDS), fc.uint8Array({ maxLength: 200 }), fc.boolean())
      .map(([id, data, fin]) => dataFrame(id, Buffer.from(data), fin)),
    fc.constant(dataFrame(1, Buffer.from('{"status":"Success"}'), true)),
    fc.uint8Array({ minLength: 8, maxLength: 8 }).map((p) => pingFrame(Buffer.from(p))),
    fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)),
  ),
  { maxLength: 8 },
);
const clientMessages = fc.array(
  fc.oneof(
    fc
      .tuple(fc.constantFrom(0, 1, 2, 3, 4, 255, 7), fc.uint8Array({ maxLength: 200 }))
      .map(([ch, data]) => ({ binary: true, data: Buffer.concat([Buffer.from([ch]), data]) })),
    fc.constant({ binary: true, data: Buffer.from([255, 0]) }),
    fc.constant({ binary: true, data: Buffer.alloc(0) }),
    fc.string({ maxLength: 40 }).map((s) => ({ binary: false, data: Buffer.from(s) })),
  ),
  { maxLength: 8 },
);

interface Plan {
  readonly runtime: readonly Uint8Array[];
  readonly runtimeCloses: boolean;
  readonly refuse: boolean;
}

describe('fuzz: WebSocket exec channels against a hostile runtime', () => {
  let plan: Plan = { runtime: [], runtimeCloses: true, refuse: false };
  const runtimeSockets = new Set<Socket>();
  const runtime = createNetServer((socket) => {
    runtimeSockets.add(socket);
    socket.once('close', () => runtimeSockets.delete(socket));
    socket.on('error', () => undefined);
    const current = plan;
    let head = '';
    const onData = (c: Buffer): void => {
      head += c.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      if (current.refuse) {
        socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      socket.write(UPGRADED);
      for (const b of current.runtime) socket.write(b);
      if (current.runtimeCloses) socket.end();
    };
    socket.on('data', onData);
  });
  let runtimePort = 0;
  const kubelet = createHttpServer();
  kubelet.on('upgrade', (req, socket, head: Buffer) => {
    serveTranslated(
      req,
      socket,
      head,
      `http://127.0.0.1:${runtimePort}/exec/token`,
      'channels',
      { stdin: true, stdout: true, stderr: true, tty: true },
      { logger: new MemoryLogger(), idleTimeoutMs: 0 },
    );
  });
  let kubeletPort = 0;

  before(async () => {
    runtime.listen(0, '127.0.0.1');
    kubelet.listen(0, '127.0.0.1');
    await Promise.all([once(runtime, 'listening'), once(kubelet, 'listening')]);
    runtimePort = (runtime.address() as AddressInfo).port;
    kubeletPort = (kubelet.address() as AddressInfo).port;
  });

  after(() => {
    kubelet.closeAllConnections();
    kubelet.close();
    for (const s of runtimeSockets) s.destroy();
    runtime.close();
  });

  test('the client always gets a close and berth lets go of the runtime', async (t) => {
    let opened = 0;
    await fuzzAsync(
      t,
      fc.asyncProperty(
        runtimeBytes,
        fc.boolean(),
        fc.boolean(),
        clientMessages,
        fc.boolean(),
        async (bytes, runtimeCloses, refuse, messages, clientCloses) => {
          plan = { runtime: bytes, runtimeCloses, refuse: refuse && bytes.length % 3 === 0 };
          const ws = new WebSocket(`ws://127.0.0.1:${kubeletPort}/exec/ns/pod/c`, [V5_PROTOCOL]);
          ws.on('error', () => undefined);
          const closed = once(ws, 'close');
          await Promise.race([once(ws, 'open'), closed]);
          if (ws.readyState === ws.OPEN) {
            opened += 1;
            for (const m of messages) ws.send(m.data, { binary: m.binary });
            // A runtime that keeps its end open leaves the exec to the client.
            if (clientCloses || !plan.runtimeCloses) ws.close(1000);
          }
          await closed;
          // berth drops its runtime connection once the client is gone.
          while (runtimeSockets.size > 0) await once([...runtimeSockets][0] as Socket, 'close');
          assert.equal(runtimeSockets.size, 0);
        },
      ),
      150,
      30_000,
    );
    // Most inputs reach the protocol (the rest: a runtime refusing the upgrade).
    t.diagnostic(`${opened} WebSocket sessions opened`);
    assert.ok(opened > 0);
  });
});
