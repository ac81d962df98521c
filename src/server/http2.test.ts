/**
 * HTTP/2 on a real KubeletServer, as the API server's kubelet client speaks it: ALPN
 * prefers h2 and still offers http/1.1; requests on one connection are each
 * authenticated as its client certificate; container logs (plain and followed) stream
 * over a stream of their own; a connection with no stream for 90 s is closed
 * gracefully, one with a quiet follow is not; stop() cuts every connection.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { appendFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import {
  connect as connectHttp2,
  type ClientHttp2Session,
  type ClientHttp2Stream,
} from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as connectTls } from 'node:tls';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { clientTemplate, createCsr, generateKey } from '../certificate/csr.ts';
import { TestCa } from '../certificate/test-ca.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { podLogsDirectory } from '../container/labels.ts';
import { FakeClock, systemClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { prepareConnection } from './api-listener.ts';
import { KubeletServer } from './server.ts';
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

const LINE = (text: string): string => `2026-12-06T00:00:00.000000000Z stdout F ${text}\n`;

/** Sends GET `path` on `session`; the stream, and its status once it answers. */
function open(
  session: ClientHttp2Session,
  path: string,
): { stream: ClientHttp2Stream; status: Promise<number> } {
  const stream = session.request({ ':path': path });
  const status = new Promise<number>((resolve, reject) => {
    stream.once('response', (headers) => {
      resolve(headers[':status'] ?? 0);
    });
    stream.once('error', reject);
  });
  return { stream, status };
}

/** GET `path` on `session`: status and whole body. */
async function get(session: ClientHttp2Session, path: string): Promise<[number, string]> {
  const { stream, status } = open(session, path);
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  await new Promise<void>((resolve, reject) => {
    stream.once('end', resolve);
    stream.once('error', reject);
  });
  return [await status, Buffer.concat(chunks).toString()];
}

/** Resolves with what `stream` has sent once it includes `text`. */
function readUntil(stream: ClientHttp2Stream, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const onData = (c: Buffer): void => {
      seen += c.toString();
      if (!seen.includes(text)) return;
      stream.off('data', onData);
      resolve(seen);
    };
    stream.on('data', onData);
    stream.once('error', reject);
  });
}

/** Resolves when `session` has closed; fails the test if it is still open after 5 s. */
function closed(session: ClientHttp2Session): Promise<void> {
  return new Promise((resolve, reject) => {
    if (session.closed || session.destroyed) {
      resolve();
      return;
    }
    const timer = setTimeout(() => {
      reject(new Error('the connection is still open'));
    }, 5000);
    session.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Lets pending I/O and timers of the loop run. */
const settle = (): Promise<void> => new Promise((r) => setTimeout(r, 50));

describe('the kubelet API over HTTP/2', () => {
  let dir = '';
  let server: KubeletServer;
  let ca: TestCa;
  let other: TestCa;
  let logFile = '';
  const users: string[] = [];
  const clock = new FakeClock();
  const cri = new FakeCriClient();
  const uid = randomUUID();
  const sessions: ClientHttp2Session[] = [];

  /** An HTTP/2 connection with a client certificate from `by` (default: the cluster CA). */
  const session = (by?: TestCa): ClientHttp2Session => {
    const signer = by ?? ca;
    const { key, keyPem } = generateKey();
    const cert = signer.sign(createCsr(key, clientTemplate('a')), 3_600_000);
    const s = connectHttp2(`https://127.0.0.1:${String(server.port)}`, {
      key: keyPem,
      cert,
      rejectUnauthorized: false,
    });
    s.on('error', () => undefined);
    sessions.push(s);
    return s;
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-http2-'));
    await selfSignedCertificate(dir);
    ca = new TestCa(systemClock);
    other = new TestCa(systemClock);
    await writeFile(join(dir, 'client-ca.pem'), ca.caPem);
    const podDir = podLogsDirectory({ namespace: 'ns', name: 'web', uid }, dir);
    await mkdir(join(podDir, 'app'), { recursive: true });
    logFile = join(podDir, 'app', '0.log');
    await writeFile(logFile, LINE('hello'));
    const id = await runTestContainer(cri, uid, podDir);
    const pod: Pod = {
      metadata: { name: 'web', namespace: 'ns', uid },
      spec: { containers: [{ name: 'app', image: TEST_IMAGE }] },
      status: runningStatus(id, '2026-12-06T00:00:00Z'),
    };
    server = new KubeletServer(
      testServerOptions(dir, { clientCAFile: join(dir, 'client-ca.pem'), anonymous: false }),
      {
        kube: recordingUsers(users),
        cri,
        clock,
        logger: new MemoryLogger(),
        pods: () => new Map([[uid, pod]]),
        runtimeCache: cacheOf(uid, [cachedRunning(uid, id)]),
      },
    );
    await server.start();
  });

  after(async () => {
    for (const s of sessions) s.destroy();
    await server.stop();
    cri.close();
    ca.dispose();
    other.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  test('ALPN picks h2 when offered, and http/1.1 for clients that want it', async () => {
    const negotiated = (protocols: string[]): Promise<string | false> =>
      new Promise((resolve, reject) => {
        const socket = connectTls(
          {
            host: '127.0.0.1',
            port: server.port,
            ALPNProtocols: protocols,
            rejectUnauthorized: false,
          },
          () => {
            resolve(socket.alpnProtocol ?? false);
            socket.destroy();
          },
        );
        socket.on('error', reject);
      });
    assert.equal(await negotiated(['h2', 'http/1.1']), 'h2');
    assert.equal(await negotiated(['http/1.1']), 'http/1.1');
  });

  test('each request on one connection is its certificate user', async () => {
    users.length = 0;
    const s = session();
    for (let i = 0; i < 3; i++) assert.equal((await get(s, '/pods'))[0], 200);
    assert.deepEqual(users, ['system:node:a', 'system:node:a', 'system:node:a']);
  });

  test('no certificate, or one from another CA, is a 401', async () => {
    const bare = connectHttp2(`https://127.0.0.1:${String(server.port)}`, {
      rejectUnauthorized: false,
    });
    bare.on('error', () => undefined);
    sessions.push(bare);
    assert.equal((await get(bare, '/pods'))[0], 401);
    assert.equal((await get(session(other), '/pods'))[0], 401);
  });

  test('container logs stream over their own stream, followed as they grow', async () => {
    const s = session();
    assert.deepEqual(await get(s, '/containerLogs/ns/web/app'), [200, 'hello\n']);
    const { stream, status } = open(s, '/containerLogs/ns/web/app?follow=true');
    assert.equal(await status, 200);
    await readUntil(stream, 'hello\n');
    // Another request meanwhile shares the connection.
    assert.equal((await get(s, '/pods'))[0], 200);
    await appendFile(logFile, LINE('again'));
    await clock.advance(1000);
    assert.match(await readUntil(stream, 'again\n'), /again\n$/);
    stream.close();
  });

  test('a connection with no stream for 90 s is closed; a quiet follow keeps its own', async () => {
    const idle = session();
    const busy = session();
    assert.equal((await get(idle, '/pods'))[0], 200);
    const { stream, status } = open(busy, '/containerLogs/ns/web/app?follow=true');
    assert.equal(await status, 200);
    await readUntil(stream, 'hello\n');
    await settle();
    await clock.advance(89_000);
    await settle();
    assert.equal(idle.closed || idle.destroyed, false, 'closed before 90 s');
    await clock.advance(2_000);
    await closed(idle);
    await settle();
    assert.equal(busy.closed || busy.destroyed, false, 'the quiet follow was cut');
    stream.close();
  });

  test('stop() cuts every connection, streams in progress included', async () => {
    const s = session();
    const { stream, status } = open(s, '/containerLogs/ns/web/app?follow=true');
    assert.equal(await status, 200);
    await readUntil(stream, 'hello\n');
    await server.stop();
    await closed(s);
  });
});

test('every connection is set to no Nagle delay and no renegotiation', () => {
  const calls: string[] = [];
  prepareConnection({
    setNoDelay(noDelay?: boolean) {
      calls.push(`setNoDelay(${String(noDelay)})`);
      return this as never;
    },
    disableRenegotiation() {
      calls.push('disableRenegotiation');
    },
  });
  assert.deepEqual(calls, ['setNoDelay(true)', 'disableRenegotiation']);
});
