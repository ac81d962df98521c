/**
 * Hostile requests to the kubelet API: every route's path and query parsing answers a
 * 4xx (an HttpError) for what it cannot use, never a 500 from a parser's TypeError, and
 * the server keeps answering. The parsers are fuzzed directly, then through a real
 * KubeletServer on loopback (fake runtime, everything allowed).
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect as tlsConnect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import fc from 'fast-check';
import { FakeCriClient } from '../../src/cri/fake/index.ts';
import { HttpError, parseLogOptions, parseTarget } from '../../src/server/handlers.ts';
import { parseNodeLogQuery } from '../../src/server/node-log-query.ts';
import { KubeletServer } from '../../src/server/server.ts';
import {
  call,
  recordingUsers,
  runTestContainer,
  selfSignedCertificate,
  testServerOptions,
} from '../../src/server/testing.ts';
import { FakeClock } from '../../src/util/clock.ts';
import { MemoryLogger } from '../../src/util/logger.ts';
import { expectTyped, fuzz, fuzzAsync } from './run.ts';

const isHttpError = (err: unknown): boolean => err instanceof HttpError;

const ROUTES = [
  'pods',
  'runningpods',
  'containerLogs',
  'logs',
  'stats',
  'summary',
  'metrics',
  'cadvisor',
  'probes',
  'resource',
  'healthz',
  'configz',
  'exec',
  'run',
  'attach',
  'portForward',
  'debug',
  'pprof',
  'checkpoint',
  'ns',
  'web',
  'app',
  'uid-1',
  'query',
  '',
];
const PARAMS = [
  'follow',
  'timestamps',
  'previous',
  'tailLines',
  'limitBytes',
  'sinceSeconds',
  'sinceTime',
  'container',
  'query',
  'untilTime',
  'pattern',
  'boot',
  'cmd',
  'command',
  'stdin',
  'stdout',
  'stderr',
  'tty',
  'input',
  'output',
  'error',
  'port',
  'only_cpu_and_memory',
  'seconds',
];
const hostile = fc.oneof(
  fc.constantFrom(
    '',
    '0',
    '1',
    '-1',
    'true',
    'false',
    'TRUE',
    '1e3',
    '9007199254740993',
    '99999999999999999999',
    '2026-01-01T00:00:00Z',
    '2026-13-45T99:99:99Z',
    '2026-01-01T00:00:00.123456789+05:30',
    '0000-01-01T00:00:00Z',
    '..',
    '%',
    '%zz',
    '\0',
    '(?:a+)+$',
    '[',
    '\\',
    '*',
    'kubelet',
    '/var/log',
    '../../etc/passwd',
    'a'.repeat(2000),
  ),
  fc.string({ maxLength: 30 }),
  fc.integer().map(String),
);
const segment = fc.oneof(
  fc.constantFrom(...ROUTES),
  hostile.map(encodeURIComponent),
  fc.constantFrom('..', '.', '%2e%2e', '%2F', '%5C', '%00', '%', '%zz', '%c3%28'),
);
const query = fc
  .array(fc.tuple(fc.constantFrom(...PARAMS), hostile), { maxLength: 5 })
  .map((pairs) => new URLSearchParams(pairs));
const target = fc
  .tuple(fc.array(segment, { minLength: 1, maxLength: 6 }), query, fc.boolean())
  .map(
    ([segs, q, slash]) =>
      `/${segs.join('/')}${slash ? '/' : ''}${q.size > 0 ? `?${q.toString()}` : ''}`,
  );

describe('fuzz: kubelet API query parsing', () => {
  test('request targets split into segments or a 400', (t) => {
    fuzz(
      t,
      fc.property(fc.oneof(target, fc.string({ maxLength: 80 })), (raw) => {
        const parsed = expectTyped(() => parseTarget(raw), isHttpError);
        for (const s of parsed?.segments ?? []) assert.ok(s !== '..' && !s.includes('/'));
      }),
      600,
    );
  });

  test('pod log options and node log queries parse or are a 400', (t) => {
    fuzz(
      t,
      fc.property(query, fc.integer({ min: 0, max: 4e12 }), (q, now) => {
        expectTyped(() => parseLogOptions(q, now), isHttpError);
        expectTyped(() => parseNodeLogQuery(q), isHttpError);
      }),
      600,
    );
  });
});

describe('fuzz: kubelet API routes', () => {
  let dir = '';
  let server: KubeletServer;
  const logger = new MemoryLogger();

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-fuzz-api-'));
    await selfSignedCertificate(dir);
    await mkdir(join(dir, 'var-log'));
    await writeFile(join(dir, 'var-log', 'kubelet.log'), 'one\ntwo\n');
    const cri = new FakeCriClient();
    const logDir = join(dir, 'ns_web_uid-1');
    await mkdir(join(logDir, 'app'), { recursive: true });
    await writeFile(join(logDir, 'app', '0.log'), '2026-01-01T00:00:00Z stdout F hello\n');
    const id = await runTestContainer(cri, 'uid-1', logDir);
    const pod: Pod = {
      metadata: { name: 'web', namespace: 'ns', uid: 'uid-1' },
      spec: { containers: [{ name: 'app', image: 'i' }] },
      status: {
        containerStatuses: [
          {
            name: 'app',
            image: 'i',
            imageID: '',
            ready: true,
            restartCount: 0,
            containerID: `containerd://${id}`,
            state: { running: { startedAt: '2026-01-01T00:00:00Z' } },
          },
        ],
      },
    };
    server = new KubeletServer(
      testServerOptions(dir, {
        authorizationMode: 'AlwaysAllow',
        nodeLogsDir: join(dir, 'var-log'),
        systemLogQuery: true,
        systemLogHandler: true,
        journalctl: '/bin/false',
        configz: { kind: 'KubeletConfiguration' },
      }),
      {
        kube: recordingUsers([]),
        cri,
        clock: new FakeClock(),
        logger,
        pods: () => new Map([['uid-1', pod]]),
      },
    );
    await server.start();
  });

  after(async () => {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('any path and query on any route: an answer, never a 500, the server keeps serving', async (t) => {
    await fuzzAsync(
      t,
      fc.asyncProperty(
        target,
        fc.constantFrom('GET', 'GET', 'POST', 'HEAD', 'PUT'),
        async (path, method) => {
          // follow=true on a running container would stream until cancelled.
          const safe = path.replace(/follow=[^&]*/g, 'follow=false');
          const reply = await call(server.port, safe, { method });
          assert.ok(reply.status >= 200 && reply.status < 600, `status ${reply.status}`);
          assert.notEqual(reply.status, 500, `${method} ${safe}: ${reply.body.slice(0, 200)}`);
        },
      ),
      200,
    );
    assert.equal((await call(server.port, '/healthz')).status, 200);
  });

  test('raw request heads no client library would send get an answer or a closed socket', async (t) => {
    const line = fc.oneof(
      target,
      fc.string({ maxLength: 60 }),
      fc.constantFrom(
        '/\r\nX: y',
        '/ HTTP/1.1',
        '*',
        'http://x/pods',
        '/%00',
        '/' + 'a'.repeat(20_000),
      ),
    );
    await fuzzAsync(
      t,
      fc.asyncProperty(
        fc.constantFrom('GET', 'POST', 'OPTIONS', 'CONNECT', 'G\0T', ''),
        line,
        fc.array(fc.tuple(fc.string({ maxLength: 20 }), fc.string({ maxLength: 40 })), {
          maxLength: 4,
        }),
        async (method, path, headers) => {
          const head =
            `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
            headers.map(([k, v]) => `${k}: ${v}\r\n`).join('') +
            'Connection: close\r\n\r\n';
          const socket = tlsConnect({
            host: '127.0.0.1',
            port: server.port,
            rejectUnauthorized: false,
            ALPNProtocols: ['http/1.1'],
          });
          socket.on('error', () => undefined);
          socket.end(head);
          let answer = '';
          socket.on('data', (c: Buffer) => {
            answer += c.toString('latin1');
          });
          await new Promise((resolve) => socket.once('close', resolve));
          if (answer !== '') assert.doesNotMatch(answer, /^HTTP\/1\.1 500/);
        },
      ),
      100,
    );
    assert.equal((await call(server.port, '/healthz')).status, 200);
  });
});
