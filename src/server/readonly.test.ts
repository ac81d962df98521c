/**
 * The read-only port (readOnlyPort) through a real KubeletServer on loopback: plain
 * HTTP, no authentication, upstream's default routes only, counted as server_type
 * "readonly". The authorizer here allows nothing, so anything the read-only port
 * answers was not gated by it, and :10250 keeps refusing the same requests.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { FakeCriClient } from '../cri/fake/index.ts';
import { KubeletMetrics } from '../metrics/registry.ts';
import { FakeStatsProvider } from '../stats/fake.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { KubeletServer } from './server.ts';
import { call, recordingAuthorizer, selfSignedCertificate, testServerOptions } from './testing.ts';

const TIME = '2026-01-01T00:00:10.000Z';
const POD: Pod = {
  metadata: { name: 'web', namespace: 'ns', uid: 'uid-1' },
  spec: { containers: [{ name: 'app', image: 'registry.test/app:1' }] },
};

/** A port the OS says is free now (the read-only port takes a fixed number, as 10255). */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

function startServer(dir: string, readOnlyPort: number, asked: string[], metrics: KubeletMetrics) {
  return new KubeletServer(testServerOptions(dir, { readOnlyPort, configz: { kind: 'x' } }), {
    kube: recordingAuthorizer(asked, new Set()),
    cri: new FakeCriClient(),
    clock: new FakeClock(),
    logger: new MemoryLogger(),
    pods: () => new Map([['uid-1', POD]]),
    metrics,
    stats: new FakeStatsProvider({
      node: { nodeName: 'node-a', startTime: TIME, memory: { time: TIME } },
      pods: [],
    }),
  });
}

describe('kubelet read-only port', () => {
  let dir = '';
  let server: KubeletServer;
  const asked: string[] = [];
  const metrics = new KubeletMetrics({ nodeName: 'node-a' });
  const get = (path: string, method = 'GET') =>
    call(server.readOnlyPort, path, { method, tls: false });

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-readonly-'));
    await selfSignedCertificate(dir);
    server = startServer(dir, await freePort(), asked, metrics);
    await server.start();
  });

  after(async () => {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('0 leaves the port closed', async () => {
    const closed = startServer(dir, 0, [], new KubeletMetrics({ nodeName: 'node-a' }));
    await closed.start();
    try {
      assert.equal(closed.readOnlyPort, 0);
    } finally {
      await closed.stop();
    }
  });

  test('serves healthz, pods, stats and metrics over plain HTTP without asking anyone', async () => {
    assert.ok(server.readOnlyPort > 0);
    asked.length = 0;
    assert.deepEqual(await get('/healthz'), {
      status: 200,
      body: 'ok',
      type: 'text/plain; charset=utf-8',
    });
    const pods = await get('/pods');
    assert.equal(pods.status, 200);
    assert.deepEqual(
      (JSON.parse(pods.body) as { items: Pod[] }).items.map((p) => p.metadata?.name),
      ['web'],
    );
    const summary = await get('/stats/summary');
    assert.equal(summary.status, 200);
    assert.equal(
      (JSON.parse(summary.body) as { node: { nodeName: string } }).node.nodeName,
      'node-a',
    );
    assert.equal((await get('/metrics/probes')).status, 200);
    assert.equal((await get('/metrics/resource')).status, 200);
    assert.deepEqual(asked, [], 'the read-only port never consults the authorizer');
    // The same request on :10250 is gated: the authorizer allows nothing here.
    assert.equal((await call(server.port, '/pods')).status, 403);
    assert.deepEqual(asked, ['pods', 'proxy']);
  });

  test('debugging routes, configz and writes are not there', async () => {
    for (const path of [
      '/configz',
      '/containerLogs/ns/web/app',
      '/runningpods/',
      '/run/ns/web/app',
      '/exec/ns/web/app?command=id',
      '/portForward/ns/web',
      '/logs/',
      '/debug/pprof/',
      '/debug/flags/v',
      '/',
    ]) {
      const reply = await get(path, path.startsWith('/run/') ? 'POST' : 'GET');
      assert.equal(reply.status, 404, `${path}: ${reply.body}`);
    }
    assert.equal((await get('/pods', 'POST')).status, 405);
    assert.equal((await get('/pods/../configz')).status, 400);
  });

  test('requests are counted with server_type="readonly"', async () => {
    await get('/healthz');
    assert.match(
      (await get('/metrics')).body,
      /kubelet_http_requests_total\{[^}]*path="healthz"[^}]*server_type="readonly"[^}]*\} [1-9]/,
    );
  });
});
