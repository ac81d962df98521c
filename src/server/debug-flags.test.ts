/**
 * PUT /debug/flags/v through a real KubeletServer on loopback: upstream's answers, and
 * the change reaching a logger made before it (a child keeps no level of its own).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { FakeCriClient } from '../cri/fake/index.ts';
import { FakeClock } from '../util/clock.ts';
import { createLogger, LogVerbosity, MemoryLogger } from '../util/logger.ts';
import { parseVerbosity } from './debug-flags.ts';
import { call, recordingAuthorizer, selfSignedCertificate, testServerOptions } from './testing.ts';
import { KubeletServer } from './server.ts';

describe('/debug/flags/v', () => {
  let dir = '';
  const servers: KubeletServer[] = [];
  const verbosity = new LogVerbosity(0);
  const asked: string[] = [];
  let port = 0;
  let disabledPort = 0;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-debug-flags-'));
    await selfSignedCertificate(dir);
    for (const debugFlags of [verbosity, undefined]) {
      const server = new KubeletServer(
        testServerOptions(dir, { ...(debugFlags !== undefined && { debugFlags }) }),
        {
          kube: recordingAuthorizer(asked, new Set(['proxy'])),
          cri: new FakeCriClient(),
          clock: new FakeClock(),
          logger: new MemoryLogger(),
          pods: () => new Map(),
        },
      );
      await server.start();
      servers.push(server);
    }
    port = servers[0]?.port ?? 0;
    disabledPort = servers[1]?.port ?? 0;
  });

  after(async () => {
    for (const s of servers) await s.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('PUT sets the verbosity every logger sharing it obeys; authz asks proxy', async () => {
    const out = new PassThrough();
    const lines: string[] = [];
    out.on('data', (c: Buffer) => lines.push(c.toString()));
    const child = createLogger({ verbosity, destination: out }).child({ component: 'x' });
    child.debug('hidden at 0');
    asked.length = 0;
    const r = await call(port, '/debug/flags/v', { method: 'PUT', body: '4' });
    assert.equal(r.status, 200);
    assert.equal(r.body, 'successfully set klog.logging.verbosity to 4\n');
    assert.equal(r.type, 'text/plain');
    assert.deepEqual(asked, ['proxy']);
    assert.equal(verbosity.value, 4);
    child.debug('shown at 4');
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(lines.filter((l) => l.includes('hidden at 0')).length, 0);
    assert.equal(lines.filter((l) => l.includes('shown at 4')).length, 1);
    assert.equal((await call(port, '/debug/flags/v', { method: 'PUT', body: '0' })).status, 200);
    assert.equal(verbosity.value, 0);
  });

  test("bad values and other methods get upstream's answers; the verbosity stays", async () => {
    const bad = await call(port, '/debug/flags/v', { method: 'PUT', body: 'four' });
    assert.equal(bad.status, 400);
    assert.equal(bad.body, 'strconv.ParseUint: parsing "four": invalid syntax\n');
    const big = await call(port, '/debug/flags/v', { method: 'PUT', body: '4294967296' });
    assert.equal(big.body, 'strconv.ParseUint: parsing "4294967296": value out of range\n');
    const huge = await call(port, '/debug/flags/v', { method: 'PUT', body: '1'.repeat(70_000) });
    assert.equal(huge.status, 400);
    const get = await call(port, '/debug/flags/v');
    assert.equal(get.status, 406);
    assert.equal(get.body, 'unsupported http method\n');
    assert.equal(verbosity.value, 0);
  });

  test('enableDebugFlagsHandler: false answers as the disabled endpoint', async () => {
    const r = await call(disabledPort, '/debug/flags/v', { method: 'PUT', body: '4' });
    assert.equal(r.status, 405);
    assert.equal(r.body, 'flags endpoint is disabled.\n');
  });

  test('parseVerbosity takes exactly what Go strconv.ParseUint(v, 10, 32) takes', () => {
    assert.equal(parseVerbosity('0'), 0);
    assert.equal(parseVerbosity('10'), 10);
    assert.equal(parseVerbosity('4294967295'), 4294967295);
    for (const v of ['', '-1', '+1', ' 4', '4\n', '0x4', '1e3'])
      assert.equal(typeof parseVerbosity(v), 'string', v);
  });
});
