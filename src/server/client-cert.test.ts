/**
 * x509 client certificates on a real KubeletServer: the identity is read once per
 * connection and kept for the requests that follow on it, so the server must refuse
 * TLS renegotiation (a new certificate under the same connection), as upstream's Go
 * server does. A certificate from another CA is a 401.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type TLSSocket } from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { TestCa } from '../certificate/test-ca.ts';
import { clientTemplate, createCsr, generateKey } from '../certificate/csr.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { FakeStatsProvider } from '../stats/fake.ts';
import { FakeClock, systemClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { KubeletServer } from './server.ts';
import { recordingUsers, selfSignedCertificate, testServerOptions } from './testing.ts';

const TIME = '2026-01-01T00:00:10.000Z';

/** A client key and certificate for node `name`, signed by `ca`, valid for an hour. */
function clientPair(ca: TestCa, name: string): { key: string; cert: string } {
  const { key, keyPem } = generateKey();
  return { key: keyPem, cert: ca.sign(createCsr(key, clientTemplate(name)), 3_600_000) };
}

function get(
  port: number,
  pair: { key: string; cert: string },
  agent: Agent | false,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path: '/pods', ...pair, rejectUnauthorized: false, agent },
      (res) => {
        res.resume();
        res.on('end', () => {
          resolve(res.statusCode ?? 0);
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('client certificates', () => {
  let dir = '';
  let server: KubeletServer;
  let ca: TestCa;
  let other: TestCa;
  const users: string[] = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-client-cert-'));
    await selfSignedCertificate(dir);
    ca = new TestCa(systemClock);
    other = new TestCa(systemClock);
    writeFileSync(join(dir, 'client-ca.pem'), ca.caPem);
    server = new KubeletServer(
      testServerOptions(dir, { clientCAFile: join(dir, 'client-ca.pem'), anonymous: false }),
      {
        kube: recordingUsers(users),
        cri: new FakeCriClient(),
        clock: new FakeClock(),
        logger: new MemoryLogger(),
        pods: () => new Map(),
        stats: new FakeStatsProvider({
          node: { nodeName: 'node-a', startTime: TIME, memory: { time: TIME } },
          pods: [],
        }),
      },
    );
    await server.start();
  });

  after(async () => {
    await server.stop();
    ca.dispose();
    other.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  test('every request on a kept-alive connection is its certificate user', async () => {
    users.length = 0;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    let connections = 0;
    const pair = clientPair(ca, 'a');
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) {
        statuses.push(await get(server.port, pair, agent));
        connections = Object.values(agent.freeSockets).flat().length;
      }
      assert.deepEqual(statuses, [200, 200, 200]);
      assert.equal(connections, 1);
      assert.deepEqual(users, ['system:node:a', 'system:node:a', 'system:node:a']);
    } finally {
      agent.destroy();
    }
  });

  test('a certificate from another CA is a 401', async () => {
    users.length = 0;
    assert.equal(await get(server.port, clientPair(other, 'b'), false), 401);
    assert.deepEqual(users, []);
  });

  test('identities decoded once per certificate: each connection is its own certificate user', async () => {
    users.length = 0;
    const d = clientPair(ca, 'd');
    const e = clientPair(ca, 'e');
    const statuses = [
      await get(server.port, d, false),
      await get(server.port, e, false),
      await get(server.port, d, false),
    ];
    assert.deepEqual(statuses, [200, 200, 200]);
    assert.deepEqual(users, ['system:node:d', 'system:node:e', 'system:node:d']);
    // The same name from another CA: the chain is checked per connection, never cached.
    users.length = 0;
    assert.equal(await get(server.port, clientPair(other, 'd'), false), 401);
    assert.deepEqual(users, []);
  });

  test('a returning client is not resumed: its certificate is checked on every connection', async () => {
    const pair = clientPair(ca, 'f');
    const handshake = (session?: Buffer): Promise<{ reused: boolean; ticket?: Buffer }> =>
      new Promise((resolve, reject) => {
        let ticket: Buffer | undefined;
        const socket = connect({
          host: '127.0.0.1',
          port: server.port,
          ...pair,
          rejectUnauthorized: false,
          ALPNProtocols: ['http/1.1'],
          ...(session !== undefined && { session }),
        });
        socket.on('session', (t: Buffer) => {
          ticket = t;
        });
        socket.once('error', reject);
        socket.once('secureConnect', () => {
          const reused = socket.isSessionReused();
          // TLS 1.3 tickets come after the handshake: a request and its answer follow them.
          socket.end('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
          socket.resume();
          socket.once('close', () => {
            resolve({ reused, ...(ticket !== undefined && { ticket }) });
          });
        });
      });
    const { ticket } = await handshake();
    assert.ok(ticket !== undefined, 'the server sent no ticket at all');
    assert.equal((await handshake(ticket)).reused, false);
  });

  test('renegotiation is refused, so a connection cannot change its certificate', async () => {
    const socket: TLSSocket = connect({
      host: '127.0.0.1',
      port: server.port,
      ...clientPair(ca, 'c'),
      rejectUnauthorized: false,
      // TLS 1.3 has no renegotiation at all; 1.2 does, unless the server refuses it.
      maxVersion: 'TLSv1.2',
    });
    try {
      await new Promise<void>((resolve, reject) => {
        socket.once('secureConnect', resolve);
        socket.once('error', reject);
      });
      // The refusal arrives as an error to the callback, or as an alert that closes the
      // connection; either way the old certificate is all the connection ever had.
      socket.on('error', () => undefined);
      const answer = await new Promise<Error | null>((resolve) => {
        socket.once('close', () => {
          resolve(new Error('closed'));
        });
        socket.renegotiate({ rejectUnauthorized: false }, (err) => {
          resolve(err);
        });
      });
      assert.notEqual(answer, null);
    } finally {
      socket.destroy();
    }
  });
});
