/**
 * The API listener's connection limits: a TLS connection that never sends a request is
 * closed (it was held forever), while a request that is slow to answer is not cut.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { createApiListener, type ApiListener } from './api-listener.ts';
import { selfSignedCertificate } from './testing.ts';

const FIRST_REQUEST_MS = 200;

describe('API listener connection limits', () => {
  let dir = '';
  let listener: ApiListener;
  let port = 0;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-listener-'));
    await selfSignedCertificate(dir);
    listener = createApiListener(
      {
        cert: await readFile(join(dir, 'cert.pem')),
        key: await readFile(join(dir, 'key.pem')),
      },
      {
        logger: new MemoryLogger(),
        clock: new FakeClock(),
        shouldUpgrade: () => false,
        firstRequestTimeoutMs: FIRST_REQUEST_MS,
        request: (_req, res) => {
          // A quiet answer, as a `logs -f` on a silent container: longer than the wait.
          void sleep(FIRST_REQUEST_MS * 5).then(() => res.end('late'));
        },
        upgrade: (_req, socket) => socket.destroy(),
      },
    );
    listener.server.listen(0, '127.0.0.1');
    await once(listener.server, 'listening');
    port = (listener.server.address() as AddressInfo).port;
  });

  after(async () => {
    listener.destroyConnections();
    listener.server.close();
    await rm(dir, { recursive: true, force: true });
  });

  const open = () =>
    connect({ host: '127.0.0.1', port, rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] });

  test('a connection that completes TLS and sends nothing is closed', async () => {
    const socket = open();
    await once(socket, 'secureConnect');
    // Before the fix this waited forever (the test runner's timeout failed it).
    await once(socket, 'close');
  });

  test('a request answered after the first-request wait is not cut', async () => {
    const socket = open();
    await once(socket, 'secureConnect');
    socket.write('GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    let answer = '';
    socket.on('data', (c: Buffer) => {
      answer += c.toString();
    });
    await once(socket, 'close');
    assert.match(answer, /^HTTP\/1\.1 200/);
    assert.match(answer, /late$/);
  });
});
