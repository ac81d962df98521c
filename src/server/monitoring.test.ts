/**
 * The monitoring routes through a real KubeletServer on loopback (self-signed serving
 * certificate from openssl, anonymous authentication), with fake stats and fake authz.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { FakeCriClient } from '../cri/fake/index.ts';
import { KubeletMetrics } from '../metrics/registry.ts';
import { FakeStatsProvider } from '../stats/fake.ts';
import type { Summary } from '../stats/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { call, recordingAuthorizer, selfSignedCertificate, testServerOptions } from './testing.ts';
import { KubeletServer } from './server.ts';

const TIME = '2026-01-01T00:00:10.000Z';
const SUMMARY: Summary = {
  node: {
    nodeName: 'node-a',
    startTime: TIME,
    cpu: { time: TIME, usageNanoCores: 5, usageCoreNanoSeconds: 3e9 },
    memory: { time: TIME, workingSetBytes: 2048 },
  },
  pods: [],
};

describe('kubelet API monitoring routes', () => {
  let dir = '';
  let server: KubeletServer;
  let port = 0;
  let syncLoopProblem: string | undefined;
  const stats = new FakeStatsProvider(SUMMARY);
  const metrics = new KubeletMetrics({ nodeName: 'node-a' });
  /** Subresources the webhook was asked about, and those it allows. */
  const asked: string[] = [];
  const allowed = new Set(['stats', 'metrics', 'healthz', 'proxy']);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-server-'));
    await selfSignedCertificate(dir);
    const kube = recordingAuthorizer(asked, allowed);
    const options = testServerOptions(dir, {
      configz: { kind: 'KubeletConfiguration', apiVersion: 'kubelet.config.k8s.io/v1beta1' },
    });
    server = new KubeletServer(options, {
      kube,
      cri: new FakeCriClient(),
      clock: new FakeClock(),
      logger: new MemoryLogger(),
      pods: () => new Map(),
      metrics,
      stats,
      syncLoopHealth: () => syncLoopProblem,
    });
    await server.start();
    port = server.port;
  });

  after(async () => {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('/healthz answers ok, lists checks with ?verbose and fails with the listing', async () => {
    assert.deepEqual(await call(port, '/healthz'), {
      status: 200,
      body: 'ok',
      type: 'text/plain; charset=utf-8',
    });
    const verbose = await call(port, '/healthz?verbose');
    assert.equal(verbose.body, '[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n');
    assert.equal((await call(port, '/healthz/ping')).body, 'ok');
    syncLoopProblem = 'sync Loop took longer than expected';
    try {
      const failed = await call(port, '/healthz');
      assert.equal(failed.status, 500);
      assert.equal(
        failed.body,
        '[+]ping ok\n[+]log ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n',
      );
      const sub = await call(port, '/healthz/syncloop');
      assert.equal(sub.status, 500);
      assert.equal(sub.body, 'internal server error: sync Loop took longer than expected\n');
      const excluded = await call(port, '/healthz?exclude=syncloop');
      assert.equal(excluded.status, 200);
    } finally {
      syncLoopProblem = undefined;
    }
    assert.equal((await call(port, '/healthz/nope')).status, 404);
  });

  test('/metrics and /metrics/probes serve their registries and count requests', async () => {
    metrics.prober.record({
      probeType: 'Liveness',
      result: 'failed',
      namespace: 'ns',
      pod: 'p',
      podUID: 'u',
      container: 'c',
      durationSeconds: 1,
    });
    await call(port, '/healthz');
    const m = await call(port, '/metrics');
    assert.equal(m.status, 200);
    assert.equal(m.type, 'text/plain; version=0.0.4; charset=utf-8');
    assert.match(
      m.body,
      /^kubelet_http_requests_total\{method="GET",path="healthz",server_type="readwrite",long_running="false"\} \d+$/m,
    );
    assert.match(m.body, /^kubelet_node_name\{node="node-a"\} 1$/m);
    const p = await call(port, '/metrics/probes');
    assert.match(p.body, /^prober_probe_total\{probe_type="Liveness",result="failed",/m);
    assert.doesNotMatch(p.body, /kubelet_http/);
    const cadvisor = await call(port, '/metrics/cadvisor');
    assert.equal(cadvisor.status, 200);
    assert.match(cadvisor.body, /^machine_cpu_cores \d+$/m);
    assert.equal((await call(port, '/metrics', { method: 'POST' })).status, 405);
  });

  test('/stats/summary serves the provider, with only_cpu_and_memory passed on', async () => {
    const s = await call(port, '/stats/summary');
    assert.equal(s.status, 200);
    assert.equal(s.type, 'application/json');
    assert.deepEqual(JSON.parse(s.body), SUMMARY);
    await call(port, '/stats/summary?only_cpu_and_memory=true');
    assert.equal(stats.calls.at(-1)?.onlyCpuAndMemory, true);
    assert.equal((await call(port, '/stats/summary?only_cpu_and_memory=maybe')).status, 400);
    assert.equal((await call(port, '/stats/other')).status, 404);
  });

  test('/metrics/resource renders the summary, and the scrape error when it fails', async () => {
    const ok = await call(port, '/metrics/resource');
    assert.equal(ok.status, 200);
    assert.match(ok.body, /^node_cpu_usage_seconds_total 3 \d+$/m);
    assert.match(ok.body, /^resource_scrape_error 0$/m);
    stats.error = new Error('runtime down');
    try {
      const failed = await call(port, '/metrics/resource');
      assert.equal(failed.status, 200);
      assert.match(failed.body, /^resource_scrape_error 1$/m);
    } finally {
      stats.error = undefined;
    }
  });

  test('/configz wraps the configuration; authz asks configz, then proxy', async () => {
    asked.length = 0;
    const c = await call(port, '/configz');
    assert.equal(c.status, 200);
    assert.deepEqual(JSON.parse(c.body), {
      kubeletconfig: { kind: 'KubeletConfiguration', apiVersion: 'kubelet.config.k8s.io/v1beta1' },
    });
    assert.deepEqual(asked, ['configz', 'proxy']);
    allowed.delete('proxy');
    allowed.delete('stats');
    try {
      assert.equal((await call(port, '/configz')).status, 403);
      asked.length = 0;
      assert.equal((await call(port, '/stats/summary')).status, 403);
      assert.deepEqual(asked, ['stats']);
    } finally {
      allowed.add('proxy');
      allowed.add('stats');
    }
  });
});
