/**
 * tlsMinVersion on a real KubeletServer: VersionTLS13 refuses a TLS 1.2 client, and the
 * default (TLS 1.2) serves one.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { describe, test } from 'node:test';
import { FakeCriClient } from '../cri/fake/index.ts';
import { FakeStatsProvider } from '../stats/fake.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { KubeletServer } from './server.ts';
import { recordingUsers, selfSignedCertificate, testServerOptions } from './testing.ts';

const TIME = '2026-01-01T00:00:10.000Z';

/** The protocol a TLS 1.2-only client agrees on, or the handshake's error code. */
function handshakeTls12(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({
      host: '127.0.0.1',
      port,
      maxVersion: 'TLSv1.2',
      rejectUnauthorized: false,
    });
    socket.once('secureConnect', () => {
      resolve(socket.getProtocol() ?? '');
      socket.destroy();
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      resolve(err.code ?? err.message);
    });
  });
}

async function withServer(
  minVersion: 'TLSv1.2' | 'TLSv1.3' | undefined,
  body: (port: number) => Promise<void>,
): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-tls-version-'));
  await selfSignedCertificate(dir);
  const server = new KubeletServer(
    testServerOptions(dir, minVersion === undefined ? {} : { tlsMinVersion: minVersion }),
    {
      kube: recordingUsers([]),
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
  try {
    await body(server.port);
  } finally {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

describe('tlsMinVersion', () => {
  test('by default a TLS 1.2 client is served', async () => {
    await withServer(undefined, async (port) => {
      assert.equal(await handshakeTls12(port), 'TLSv1.2');
    });
  });

  test('VersionTLS13 refuses a TLS 1.2 client', async () => {
    await withServer('TLSv1.3', async (port) => {
      assert.notEqual(await handshakeTls12(port), 'TLSv1.2');
    });
  });
});
