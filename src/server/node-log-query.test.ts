/**
 * The node log query (/logs/?query=, enableSystemLogQuery on): parameter checks and
 * the journalctl arguments as pure functions, then through a real KubeletServer on
 * loopback. This machine's real journalctl has no journal, so services fall back to
 * upstream's file heuristics there; a recording stand-in for journalctl (a shell
 * script) shows which arguments a journald service gets and that its output streams.
 */
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { FakeCriClient } from '../cri/fake/index.ts';
import { FakeClock, systemClock, type Clock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { HttpError } from './handlers.ts';
import { journalctlArgs, parseNodeLogQuery } from './node-log-query.ts';
import { KubeletServer } from './server.ts';
import {
  call,
  callRaw,
  recordingAuthorizer,
  selfSignedCertificate,
  testServerOptions,
} from './testing.ts';

const parse = (q: string) => parseNodeLogQuery(new URLSearchParams(q));

function rejects400(q: string, message: RegExp): void {
  assert.throws(
    () => parse(q),
    (err: unknown) => err instanceof HttpError && err.status === 400 && message.test(err.message),
    q,
  );
}

describe('parseNodeLogQuery and journalctlArgs', () => {
  test('services, a file, and every option parsed', () => {
    const q = parse(
      'query=kubelet&query=containerd&sinceTime=2026-12-01T10:00:00Z&untilTime=2026-12-01T12:30:00%2B01:00&tailLines=50&boot=-1&pattern=err.*',
    );
    assert.deepEqual(q.services, ['kubelet', 'containerd']);
    assert.deepEqual(q.files, []);
    assert.equal(q.tailLines, 50);
    assert.equal(q.boot, -1);
    assert.deepEqual(journalctlArgs(q, q.services), [
      '--utc',
      '--no-pager',
      '--since=2026-12-01 10:00:00',
      '--until=2026-12-01 11:30:00',
      '--pager-end',
      '--lines=50',
      '--unit=kubelet',
      '--unit=containerd',
      '--grep=err.*',
      '--case-sensitive=true',
      '--boot',
      '-1',
      '--output=short-precise',
    ]);
    assert.deepEqual(parse('query=/syslog').files, ['/syslog']);
    assert.deepEqual(journalctlArgs(parse('query=a'), ['a']), [
      '--utc',
      '--no-pager',
      '--unit=a',
      '--output=short-precise',
    ]);
  });

  test('bad input is a 400 naming the parameter', () => {
    rejects400('tailLines=5', /query: Required value/);
    rejects400('query=%20%20', /query cannot be empty/);
    rejects400('query=a;rm%20-rf', /unsupported characters/);
    rejects400(`query=${'a'.repeat(300)}`, /longer than 256/);
    rejects400('query=a&query=b&query=c&query=d&query=e', /Too many: 5/);
    rejects400('query=a&query=/b', /cannot specify a file and service/);
    rejects400('query=/a&query=/b', /more than one file/);
    rejects400('query=/a&tailLines=3', /cannot specify file with options/);
    rejects400('query=a&sinceTime=yesterday', /sinceTime: Invalid value: "yesterday"/);
    rejects400('query=a&untilTime=2026-13-01T00:00:00Z', /untilTime: Invalid value/);
    rejects400(
      'query=a&sinceTime=2026-12-02T00:00:00Z&untilTime=2026-12-01T00:00:00Z',
      /must be after `sinceTime`/,
    );
    rejects400('query=a&boot=1', /boot: Invalid value: 1: must be less than 1/);
    rejects400('query=a&boot=x', /boot: Invalid value: "x": not an integer/);
    rejects400('query=a&tailLines=100001', /between 0 and 100000/);
    rejects400('query=a&tailLines=-1', /between 0 and 100000/);
    rejects400('query=a&tailLines=99999999999999', /not an integer/);
    rejects400('query=a&pattern=(', /pattern: Invalid value: "\("/);
    // Every problem at once, not only the first.
    rejects400('query=a&boot=1&tailLines=-1', /boot: .*tailLines: /);
  });
});

describe('kubelet API /logs/?query=', () => {
  let dir = '';
  let varLog = '';
  let server: KubeletServer;
  let recorded = '';
  const asked: string[] = [];
  const start = async (journalctl?: string, clock: Clock = systemClock): Promise<KubeletServer> => {
    const s = new KubeletServer(
      testServerOptions(dir, {
        nodeLogsDir: varLog,
        systemLogQuery: true,
        ...(journalctl === undefined ? {} : { journalctl }),
      }),
      {
        kube: recordingAuthorizer(asked, new Set(['log'])),
        cri: new FakeCriClient(),
        clock,
        logger: new MemoryLogger(),
        pods: () => new Map(),
      },
    );
    await s.start();
    return s;
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-logquery-'));
    varLog = join(dir, 'var-log');
    await mkdir(join(varLog, 'svc'), { recursive: true });
    await mkdir(join(varLog, 'dironly'), { recursive: true });
    await writeFile(join(varLog, 'syslog'), 'booted\n');
    await writeFile(join(varLog, 'kube.log'), 'kube log\n');
    await writeFile(join(varLog, 'svc', 'svc.log'), 'nested svc\n');
    await writeFile(join(dir, 'secret'), 'host secret\n');
    await symlink(join(dir, 'secret'), join(varLog, 'escape'));
    await selfSignedCertificate(dir);
    recorded = join(dir, 'args');
    // Stands in for journalctl: knows kubelet.service, records its arguments, streams lines.
    const script = join(dir, 'journalctl');
    await writeFile(
      script,
      `#!/bin/sh\nif [ "$1" = "--field" ]; then echo kubelet.service; exit 0; fi\n` +
        `printf '%s\\n' "$@" > '${recorded}'\necho "journal line 1"\necho "journal line 2" >&2\n`,
    );
    await chmod(script, 0o755);
    server = await start();
  });

  after(async () => {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('services without journal entries are read from files, in upstream order', async () => {
    asked.length = 0;
    const r = await call(server.port, '/logs/?query=syslog');
    assert.equal(r.status, 200);
    assert.equal(r.type, 'text/plain;charset=UTF-8');
    assert.equal(r.body, 'booted\n');
    assert.deepEqual(asked, ['log']);
    assert.equal((await call(server.port, '/logs/?query=kube')).body, 'kube log\n');
    assert.equal((await call(server.port, '/logs/?query=svc')).body, 'nested svc\n');
    assert.equal(
      (await call(server.port, '/logs/?query=dironly')).body,
      '\nlog not found for dironly\n',
    );
    assert.equal(
      (await call(server.port, '/logs/?query=syslog&query=kube')).body,
      'booted\nkube log\n',
    );
    assert.match(
      (await call(server.port, '/logs/?query=syslog&tailLines=1')).body,
      /options present and query resolved to log files for \[syslog\]/,
    );
  });

  test('a file query is served below the root only; gzip when asked', async () => {
    assert.equal((await call(server.port, '/logs/?query=/svc/svc.log')).body, 'nested svc\n');
    const missing = await call(server.port, '/logs/?query=/nothere.log');
    assert.equal(missing.status, 400);
    for (const path of ['/logs/?query=/escape', '/logs/?query=escape', '/logs/?query=/../secret']) {
      const r = await call(server.port, path);
      assert.doesNotMatch(r.body, /host secret/, path);
    }
    assert.equal((await call(server.port, '/logs/?query=/escape')).status, 400);
    assert.equal((await call(server.port, '/logs/sub?query=syslog')).status, 400);
    const zipped = await callRaw(server.port, '/logs/?query=syslog', {
      headers: { 'accept-encoding': 'gzip' },
    });
    assert.equal(zipped.headers['content-encoding'], 'gzip');
    assert.equal(gunzipSync(zipped.bytes).toString(), 'booted\n');
  });

  test('a journald service runs journalctl with the query as arguments, output streamed', async () => {
    const journald = await start(join(dir, 'journalctl'));
    try {
      const r = await call(
        journald.port,
        '/logs/?query=kubelet&tailLines=10&pattern=a%20b%3B%20rm&sinceTime=2026-12-01T00:00:00Z',
      );
      assert.equal(r.status, 200);
      assert.match(r.body, /journal line 1/);
      assert.match(r.body, /journal line 2/);
      assert.deepEqual((await readFile(recorded, 'utf8')).trim().split('\n'), [
        '--utc',
        '--no-pager',
        '--since=2026-12-01 00:00:00',
        '--pager-end',
        '--lines=10',
        '--unit=kubelet',
        '--grep=a b; rm',
        '--case-sensitive=true',
        '--output=short-precise',
      ]);
      // Not in the journal: the file heuristics, as above.
      assert.equal((await call(journald.port, '/logs/?query=syslog')).body, 'booted\n');
    } finally {
      await journald.stop();
    }
  });

  test('a journalctl that hangs is killed at the 30 s deadline, with a line saying so', async () => {
    const hanging = join(dir, 'journalctl-hangs');
    await writeFile(
      hanging,
      '#!/bin/sh\nif [ "$1" = "--field" ]; then echo kubelet.service; exit 0; fi\necho started\nexec sleep 600\n',
    );
    await chmod(hanging, 0o755);
    const clock = new FakeClock();
    const slow = await start(hanging, clock);
    try {
      const before = clock.pending;
      const reply = call(slow.port, '/logs/?query=kubelet');
      // The query's deadline is a sleep on the injected clock; wait until it is set.
      while (clock.pending === before) await new Promise((r) => setTimeout(r, 10));
      await clock.advance(29_999);
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(clock.pending, before + 1, 'still running just before the deadline');
      await clock.advance(1);
      const r = await reply;
      assert.equal(r.status, 200);
      assert.match(r.body, /\nerror: the query ran past its 30s deadline\n$/);
    } finally {
      await slow.stop();
    }
  });

  test('bad parameters are a 400 before anything runs', async () => {
    for (const path of [
      '/logs/?query=a%3Brm',
      '/logs/?query=a&boot=2',
      '/logs/?query=a&tailLines=abc',
      '/logs/?query=a&pattern=%5B',
    ]) {
      const r = await call(server.port, path);
      assert.equal(r.status, 400, `${path}: ${r.body}`);
    }
  });
});
