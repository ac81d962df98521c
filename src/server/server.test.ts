import assert from 'node:assert/strict';
import { mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, test } from 'node:test';
import type { KubeClient } from '../kube/types.ts';
import { FakeClock, systemClock } from '../util/clock.ts';
import type { IncomingMessage } from 'node:http';
import {
  Authenticator,
  subresourcesFor,
  verbFor,
  WebhookAuthorizer,
  type UserInfo,
} from './auth.ts';
import { HttpError, parseLogOptions, parseTarget } from './handlers.ts';
import { CriLogParser, recordContent, recordTimestamp } from '../logs/cri-format.ts';
import { ContainerLogFiles, streamLogFiles, type LogOptions } from './logs.ts';

const LOG = [
  '2026-01-01T00:00:01.000000001Z stdout F one',
  '2026-01-01T00:00:02.000000000Z stderr P tw',
  '2026-01-01T00:00:02.500000000Z stderr F o',
  '2026-01-01T00:00:03.123456789Z stdout F three',
  '',
].join('\n');

async function render(options: Partial<LogOptions>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-logs-'));
  try {
    await writeFile(join(dir, '0.log'), LOG);
    const fh = await open(join(dir, '0.log'));
    const out = new PassThrough();
    const chunks: Buffer[] = [];
    out.on('data', (c: Buffer) => chunks.push(c));
    try {
      await streamLogFiles(ContainerLogFiles.single(fh), out, {
        follow: false,
        timestamps: false,
        ...options,
        clock: systemClock,
        signal: new AbortController().signal,
        isRunning: () => Promise.resolve(false),
      });
    } finally {
      await fh.close();
    }
    return Buffer.concat(chunks).toString();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('CRI log files', () => {
  test('each record is parsed on its own, a partial one without a newline', () => {
    const p = new CriLogParser();
    const records = [
      ...p.push(Buffer.from(LOG.slice(0, 50))),
      ...p.push(Buffer.from(LOG.slice(50))),
    ];
    assert.deepEqual(
      records.map((r) => [recordTimestamp(r), recordContent(r).toString(), r.newline]),
      [
        ['2026-01-01T00:00:01.000000001Z', 'one', true],
        ['2026-01-01T00:00:02.000000000Z', 'tw', false],
        ['2026-01-01T00:00:02.500000000Z', 'o', true],
        ['2026-01-01T00:00:03.123456789Z', 'three', true],
      ],
    );
  });

  test('tail, limit, timestamps and since select as kubectl expects', async () => {
    assert.equal(await render({}), 'one\ntwo\nthree\n');
    // --tail counts records, as upstream's does: the last two are "o" and "three".
    assert.equal(await render({ tailLines: 2 }), 'o\nthree\n');
    assert.equal(await render({ tailLines: 3 }), 'two\nthree\n');
    assert.equal(await render({ tailLines: 0 }), '');
    assert.equal(await render({ limitBytes: 5 }), 'one\nt');
    assert.equal(
      await render({ timestamps: true, tailLines: 1 }),
      '2026-01-01T00:00:03.123456789Z three\n',
    );
    // A line's timestamp is its first record's.
    assert.equal(
      await render({ timestamps: true, tailLines: 3 }),
      '2026-01-01T00:00:02.000000000Z two\n2026-01-01T00:00:03.123456789Z three\n',
    );
    assert.equal(await render({ sinceMs: Date.parse('2026-01-01T00:00:02Z') }), 'two\nthree\n');
  });
});

describe('request parsing', () => {
  test('relative and slash-carrying segments are refused before any lookup', () => {
    for (const bad of [
      '/containerLogs/a/../b/c',
      '/containerLogs/a/%2e%2e/b',
      '/x/a%2Fb',
      '/x/%zz',
    ]) {
      assert.throws(
        () => parseTarget(bad),
        (e) => e instanceof HttpError && e.status === 400,
        bad,
      );
    }
    assert.deepEqual(parseTarget('/containerLogs/ns/p/c?follow=true').segments, [
      'containerLogs',
      'ns',
      'p',
      'c',
    ]);
  });

  test('log options are validated', () => {
    const q = (s: string): URLSearchParams => new URLSearchParams(s);
    assert.throws(() => parseLogOptions(q('tailLines=-1'), 0), HttpError);
    assert.throws(() => parseLogOptions(q('limitBytes=0'), 0), HttpError);
    assert.throws(
      () => parseLogOptions(q('sinceSeconds=1&sinceTime=2026-01-01T00:00:00Z'), 0),
      HttpError,
    );
    assert.throws(() => parseLogOptions(q('sinceTime=yesterday'), 0), HttpError);
    assert.throws(() => parseLogOptions(q('follow=maybe'), 0), HttpError);
    assert.deepEqual(parseLogOptions(q('follow=true&tailLines=3&sinceSeconds=10'), 60_000), {
      follow: true,
      timestamps: false,
      previous: false,
      tailLines: 3,
      sinceMs: 50_000,
    });
  });
});

describe('authorization attributes', () => {
  test('verbs and subresources follow upstream', () => {
    assert.equal(verbFor('GET', false), 'get');
    assert.equal(verbFor('POST', false), 'create');
    assert.equal(verbFor('GET', true), 'create');
    assert.equal(verbFor('TRACE', false), undefined);
    assert.deepEqual(subresourcesFor('/pods'), ['pods', 'proxy']);
    assert.deepEqual(subresourcesFor('/stats/summary'), ['stats']);
    assert.deepEqual(subresourcesFor('/logs/syslog'), ['log']);
    assert.deepEqual(subresourcesFor('/exec/a/b/c'), ['proxy']);
  });

  test('the webhook caches allowed and denied answers for their TTLs', async () => {
    const clock = new FakeClock(0);
    let calls = 0;
    let allow = false;
    const kube = {
      create: (_path: unknown, body: { spec: { user: string } }) => {
        calls++;
        return Promise.resolve({ ...body, status: { allowed: allow } });
      },
    } as unknown as KubeClient;
    const authz = new WebhookAuthorizer({
      kube,
      clock,
      allowedTTLMs: 300_000,
      deniedTTLMs: 30_000,
    });
    const user: UserInfo = { username: 'u', uid: '', groups: [], extra: {} };
    const attrs = { user, verb: 'get', nodeName: 'n', subresource: 'proxy' };
    assert.equal(await authz.authorize(attrs), false);
    allow = true;
    assert.equal(await authz.authorize(attrs), false);
    assert.equal(calls, 1);
    await clock.advance(30_001);
    assert.equal(await authz.authorize(attrs), true);
    await clock.advance(299_000);
    assert.equal(await authz.authorize(attrs), true);
    assert.equal(calls, 2);
  });
});

describe('authentication', () => {
  const req = (headers: Record<string, string>): IncomingMessage =>
    ({ headers, socket: {} }) as unknown as IncomingMessage;

  test('tokens are reviewed once per TTL; anonymous only when nothing was presented', async () => {
    const clock = new FakeClock(0);
    let reviews = 0;
    const kube = {
      create: (_path: unknown, body: { spec: { token: string } }) => {
        reviews++;
        const ok = body.spec.token === 'good';
        return Promise.resolve({
          ...body,
          status: ok
            ? { authenticated: true, user: { username: 'alice', groups: ['devs'] } }
            : { authenticated: false },
        });
      },
    } as unknown as KubeClient;
    const authn = new Authenticator({
      kube,
      clock,
      x509Enabled: true,
      webhookEnabled: true,
      webhookCacheTTLMs: 120_000,
      anonymousEnabled: true,
    });
    const alice = await authn.authenticate(req({ authorization: 'Bearer good' }));
    assert.equal(alice?.username, 'alice');
    assert.deepEqual(alice?.groups, ['devs']);
    await authn.authenticate(req({ authorization: 'Bearer good' }));
    assert.equal(reviews, 1);
    await clock.advance(120_001);
    await authn.authenticate(req({ authorization: 'Bearer good' }));
    assert.equal(reviews, 2);
    assert.equal(await authn.authenticate(req({ authorization: 'Bearer bad' })), undefined);
    assert.equal((await authn.authenticate(req({})))?.username, 'system:anonymous');
  });
});
