/**
 * A WebSocket exec (v5.channel.k8s.io) through a real KubeletServer, the fake CRI
 * runtime and a streaming server on loopback: berth opens the runtime's connection
 * while the CRI Exec call is still in flight (to where the last stream went), and the
 * stream then goes over it, its SYN_STREAMs with the upgrade request.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { WebSocket } from 'ws';
import { FakeCriClient } from '../cri/fake/index.ts';
import { systemClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { KubeletServer } from './server.ts';
import { dataFrame, FrameReader, FrameType } from './spdy.ts';
import {
  cacheOf,
  cachedRunning,
  recordingUsers,
  runningStatus,
  runTestContainer,
  selfSignedCertificate,
  testServerOptions,
  TEST_IMAGE,
} from './testing.ts';

const UPGRADED =
  'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n' +
  'X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n';

/**
 * A streaming server that answers an upgrade, and once the error, stdout and stderr
 * streams are open writes a Success status and closes; what each connection sent.
 */
function streamingServer(): { server: Server; connections: { bytes: Buffer }[] } {
  const connections: { bytes: Buffer }[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    const seen = { bytes: Buffer.alloc(0) };
    connections.push(seen);
    let answered = false;
    socket.on('data', (chunk: Buffer) => {
      seen.bytes = Buffer.concat([seen.bytes, chunk]);
      const end = seen.bytes.indexOf('\r\n\r\n');
      if (end < 0 || answered) return;
      const ids: number[] = [];
      for (const frame of new FrameReader().push(seen.bytes.subarray(end + 4)))
        if (frame.kind === 'control' && frame.type === FrameType.SYN_STREAM)
          ids.push(frame.payload.readUInt32BE(0));
      if (ids.length < 3) return;
      answered = true;
      socket.write(UPGRADED);
      socket.end(dataFrame(ids[0] ?? 0, Buffer.from('{"metadata":{},"status":"Success"}'), true));
    });
  });
  server.on('close', () => {
    for (const s of sockets) s.destroy();
  });
  return { server, connections };
}

describe('a WebSocket exec through the kubelet API', () => {
  const uid = randomUUID();
  const runtime = streamingServer();
  let dir: string;
  let server: KubeletServer;
  let fake: FakeCriClient;

  before(async () => {
    runtime.server.listen(0, '127.0.0.1');
    await once(runtime.server, 'listening');
    const port = (runtime.server.address() as AddressInfo).port;
    fake = new FakeCriClient({ streamingUrl: `http://127.0.0.1:${String(port)}` });
    dir = await mkdtemp(join(tmpdir(), 'berth-exec-stream-'));
    await selfSignedCertificate(dir);
    const id = await runTestContainer(fake, uid, dir);
    const pod: Pod = {
      metadata: { name: 'web', namespace: 'ns', uid },
      spec: { containers: [{ name: 'app', image: TEST_IMAGE }] },
      status: runningStatus(id, '2026-12-06T00:00:00Z'),
    };
    server = new KubeletServer(testServerOptions(dir), {
      kube: recordingUsers([]),
      cri: fake,
      clock: systemClock,
      logger: new MemoryLogger(),
      pods: () => new Map([[uid, pod]]),
      runtimeCache: cacheOf(uid, [cachedRunning(uid, id)]),
    });
    await server.start();
  });

  after(async () => {
    await server.stop();
    fake.close();
    runtime.server.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** Runs `true` over a WebSocket; resolves with what the error channel carried. */
  const exec = (): Promise<string> =>
    new Promise((resolve, reject) => {
      const ws = new WebSocket(
        `wss://127.0.0.1:${String(server.port)}/exec/ns/web/app?command=true&output=1&error=1`,
        ['v5.channel.k8s.io'],
        { rejectUnauthorized: false },
      );
      let status = '';
      ws.on('message', (data: Buffer) => {
        if (data[0] === 3) status += data.subarray(1).toString();
      });
      ws.on('error', reject);
      ws.on('close', () => {
        resolve(status);
      });
    });

  test('the runtime connection opens during the CRI Exec call and carries the stream', async () => {
    // The first exec teaches berth where the runtime's streams go.
    assert.match(await exec(), /"status":"Success"/);
    assert.equal(runtime.connections.length, 1);
    const hold = fake.holdNext('RuntimeService/Exec');
    const second = exec();
    await hold.arrived;
    for (let i = 0; i < 300 && runtime.connections.length < 2; i++) await sleep(10);
    assert.equal(runtime.connections.length, 2, 'connected while the Exec call was held');
    assert.equal(runtime.connections[1]?.bytes.length, 0, 'with nothing sent before the URL');
    hold.release();
    assert.match(await second, /"status":"Success"/);
    assert.equal(runtime.connections.length, 2, 'the stream went over that connection');
    const sent = runtime.connections[1]?.bytes.toString('latin1') ?? '';
    assert.match(sent, /^POST \/exec\/\S+ HTTP\/1\.1\r\n/);
  });
});
