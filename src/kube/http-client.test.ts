/**
 * HttpKubeClient at the HTTP level, against a local node:http server on 127.0.0.1:
 * methods, paths and headers, patch content types, errors as answered, connection
 * reuse and rotation, the rate limiter, and watch streams (chunked NDJSON, bookmarks,
 * ERROR 410, abort, idle watches outliving the request timeout).
 */
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, test } from 'node:test';
import { FakeClock } from '../util/clock.ts';
import { isAbortError } from '../util/errors.ts';
import { HttpKubeClient } from './http-client.ts';
import { failureStatus } from './status.ts';
import { defaultUserAgent } from './user-agent.ts';
import {
  CONFIGMAPS,
  inNamespace,
  isGone,
  KubeApiError,
  NODES,
  PODS,
  type WatchEvent,
} from './types.ts';

interface Seen {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
}

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

const json = (res: ServerResponse, status: number, value: unknown): void => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
};

async function collect<T>(events: AsyncIterable<WatchEvent<T>>): Promise<WatchEvent<T>[]> {
  const out: WatchEvent<T>[] = [];
  for await (const e of events) out.push(e);
  return out;
}

describe('HttpKubeClient over HTTP', () => {
  const server = createServer();
  let url: string;
  let handler: Handler;
  let seen: Seen[];
  let connections: number;
  let client: HttpKubeClient;
  const cms = inNamespace(CONFIGMAPS, 'ns');
  const make = (extra: Partial<ConstructorParameters<typeof HttpKubeClient>[0]> = {}) =>
    new HttpKubeClient({ credentials: { server: url, insecureSkipTlsVerify: false }, ...extra });

  before(async () => {
    server.on('connection', () => connections++);
    server.on('request', (req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
        handler(req, res, body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  beforeEach(async () => {
    // Undefined before the first test.
    await (client as HttpKubeClient | undefined)?.destroy();
    server.closeAllConnections();
    seen = [];
    connections = 0;
    handler = (_req, res) => {
      json(res, 200, { metadata: { name: 'x' } });
    };
    client = make({ credentials: { server: url, insecureSkipTlsVerify: false, token: 'tok' } });
  });

  test('JSON in and out with the expected method, path, query and headers', async () => {
    handler = (_req, res, body) => {
      json(res, 200, { echo: body === '' ? null : (JSON.parse(body) as unknown) });
    };
    await client.get(cms, 'a');
    await client.list(cms, { labelSelector: 'a=b', limit: 10, continue: 'tok' });
    await client.create(cms, { metadata: { name: 'a' } }, { fieldManager: 'kubelet' });
    await client.update(cms, 'a', { metadata: { name: 'a' } });
    await client.update(NODES, 'n1', { status: {} }, { subresource: 'status' });
    assert.deepEqual(
      seen.map((s) => `${s.method} ${s.url}`),
      [
        'GET /api/v1/namespaces/ns/configmaps/a',
        'GET /api/v1/namespaces/ns/configmaps?labelSelector=a%3Db&limit=10&continue=tok',
        'POST /api/v1/namespaces/ns/configmaps?fieldManager=kubelet',
        'PUT /api/v1/namespaces/ns/configmaps/a',
        'PUT /api/v1/nodes/n1/status',
      ],
    );
    const first = seen[0];
    assert.equal(first?.headers['authorization'], 'Bearer tok');
    assert.equal(first.headers['accept'], 'application/json');
    assert.equal(first.headers['user-agent'], defaultUserAgent());
    assert.equal(seen[2]?.headers['content-type'], 'application/json');
    assert.equal(seen[2].body, '{"metadata":{"name":"a"}}');
  });

  test('each patch type has its content type; apply needs a fieldManager and may force', async () => {
    await client.patch(cms, 'a', { data: {} }, 'strategic');
    await client.patch(cms, 'a', { data: {} }, 'merge');
    await client.patch(cms, 'a', [{ op: 'remove', path: '/data' }], 'json');
    await client.patch(cms, 'a', { data: {} }, 'apply', { fieldManager: 'kubelet', force: true });
    await client.patch(PODS, 'p', { status: {} }, 'strategic', { subresource: 'status' });
    assert.deepEqual(
      seen.map((s) => [s.url, s.headers['content-type']]),
      [
        ['/api/v1/namespaces/ns/configmaps/a', 'application/strategic-merge-patch+json'],
        ['/api/v1/namespaces/ns/configmaps/a', 'application/merge-patch+json'],
        ['/api/v1/namespaces/ns/configmaps/a', 'application/json-patch+json'],
        [
          '/api/v1/namespaces/ns/configmaps/a?fieldManager=kubelet&force=true',
          'application/apply-patch+yaml',
        ],
        ['/api/v1/pods/p/status', 'application/strategic-merge-patch+json'],
      ],
    );
    await assert.rejects(client.patch(cms, 'a', {}, 'apply'), /needs a fieldManager/);
    assert.equal(seen.length, 5);
  });

  test('delete sends DeleteOptions with preconditions and grace period', async () => {
    await client.delete(inNamespace(PODS, 'ns'), 'p', {
      gracePeriodSeconds: 0,
      preconditions: { uid: 'u1' },
    });
    assert.equal(seen[0]?.method, 'DELETE');
    assert.deepEqual(JSON.parse(seen[0].body), {
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      gracePeriodSeconds: 0,
      preconditions: { uid: 'u1' },
    });
  });

  test('answers other than 2xx become KubeApiError; transport failures are status 0', async () => {
    handler = (_req, res) => {
      json(res, 409, failureStatus(409, 'AlreadyExists', 'configmaps "a" exists'));
    };
    await assert.rejects(client.create(cms, {}), (err: unknown) => {
      assert.ok(err instanceof KubeApiError);
      assert.equal(err.status, 409);
      assert.equal(err.reason, 'AlreadyExists');
      assert.match(
        err.message,
        /^POST \/api\/v1\/namespaces\/ns\/configmaps: configmaps "a" exists$/,
      );
      return true;
    });
    handler = (_req, res) => {
      res.writeHead(500);
      res.end('something broke');
    };
    await assert.rejects(client.get(cms, 'a'), (err: unknown) => {
      assert.ok(err instanceof KubeApiError);
      assert.equal(err.reason, 'InternalError');
      assert.match(err.message, /something broke/);
      return true;
    });
    handler = (req) => {
      req.socket.destroy();
    };
    await assert.rejects(client.get(cms, 'a'), (err: unknown) => {
      assert.ok(err instanceof KubeApiError);
      assert.equal(err.status, 0);
      assert.equal(err.reason, 'Unknown');
      assert.ok(err.cause instanceof Error);
      return true;
    });
    const closed = make();
    await closed.close();
    await assert.rejects(closed.get(cms, 'a'), /client is closed/);
  });

  test('requests reuse one keep-alive connection and leave no abort listeners', async () => {
    const controller = new AbortController();
    for (let i = 0; i < 30; i++) await client.get(cms, 'a', { signal: controller.signal });
    // The pool may open a second socket while the first one is still being
    // released, but never one per request.
    assert.ok(connections <= 2, `${connections} connections for 30 requests`);
    // The abort listener goes when the body closes, a tick after json() resolves.
    assert.ok(getEventListeners(controller.signal, 'abort').length <= 1);
    await new Promise((r) => setImmediate(r));
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
    await assert.rejects(client.get(cms, 'a', { signal: AbortSignal.abort() }), isAbortError);
  });

  test('new TLS credentials get a new connection after in-flight requests finish', async () => {
    let release: () => void = () => undefined;
    handler = (req, res) => {
      if (req.url?.endsWith('/slow') === true)
        release = () => {
          json(res, 200, { slow: true });
        };
      else json(res, 200, {});
    };
    await client.get(cms, 'a');
    const slow = client.get(cms, 'slow');
    while (seen.length < 2) await new Promise((r) => setImmediate(r));
    // A new token alone keeps the connection pool.
    assert.equal(
      client.setCredentials({ server: url, insecureSkipTlsVerify: false, token: 't2' }),
      false,
    );
    await client.get(cms, 'a');
    assert.equal(seen[2]?.headers['authorization'], 'Bearer t2');
    const before = connections;
    assert.equal(
      client.setCredentials({ server: url, insecureSkipTlsVerify: false, cert: 'new', key: 'k' }),
      true,
    );
    await client.get(cms, 'a');
    assert.equal(connections, before + 1);
    release();
    assert.deepEqual(await slow, { slow: true });
    await client.close();
  });

  test('the token bucket spaces requests (qps/burst) on the injected clock', async () => {
    const clock = new FakeClock();
    const limited = make({ clock, qps: 1, burst: 2 });
    await limited.get(cms, 'a');
    await limited.get(cms, 'a');
    let third = false;
    const pending = limited.get(cms, 'a').then(() => (third = true));
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(third, false);
    assert.equal(seen.length, 2);
    await clock.advance(1000);
    await pending;
    assert.equal(seen.length, 3);
    await limited.close();
  });

  test('429 and 5xx with Retry-After are waited out and sent again, up to 10 times', async () => {
    const clock = new FakeClock();
    const retrying = make({ clock });
    /** Runs `op` while moving the fake clock a second at a time. */
    const driving = async <T>(op: Promise<T>): Promise<T> => {
      let done = false;
      const settled = op.then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      );
      void settled.then(() => (done = true));
      while (!done) {
        await new Promise((r) => setTimeout(r, 5));
        await clock.advance(1000);
      }
      const outcome = await settled;
      if ('error' in outcome) throw outcome.error;
      return outcome.value;
    };
    let answers: { code: number; retryAfter?: string }[] = [];
    handler = (_req, res) => {
      const next = answers.shift() ?? { code: 200 };
      if (next.code === 200) {
        json(res, 200, { metadata: { name: 'x' } });
        return;
      }
      res.setHeader('content-type', 'application/json');
      if (next.retryAfter !== undefined) res.setHeader('retry-after', next.retryAfter);
      res.writeHead(next.code);
      res.end(JSON.stringify(failureStatus(next.code, 'TooManyRequests', 'slow down')));
    };
    answers = [
      { code: 429, retryAfter: '1' },
      { code: 503, retryAfter: '2' },
    ];
    const t0 = clock.now();
    await driving(retrying.create(cms, { metadata: { name: 'x' } }));
    assert.equal(seen.length, 3, 'sent three times');
    assert.ok(clock.now() - t0 >= 3000, 'waited the 1 s and the 2 s asked for');
    assert.equal(seen[2]?.body, seen[0]?.body, 'the body sent again');
    // Without Retry-After (or with a date, which client-go does not read either): the error.
    seen = [];
    answers = [{ code: 429 }];
    await assert.rejects(retrying.get(cms, 'x'), { status: 429 });
    answers = [{ code: 500, retryAfter: 'Wed, 21 Oct 2026 07:28:00 GMT' }];
    await assert.rejects(retrying.get(cms, 'x'), { status: 500 });
    assert.equal(seen.length, 2);
    // Eleven in a row: ten retries, then the error.
    seen = [];
    answers = Array.from({ length: 11 }, () => ({ code: 429, retryAfter: '0' }));
    await assert.rejects(driving(retrying.get(cms, 'x')), { status: 429 });
    assert.equal(seen.length, 11);
    // Aborted while waiting: the caller's reason.
    answers = [{ code: 429, retryAfter: '30' }];
    const controller = new AbortController();
    const pending = retrying.get(cms, 'x', { signal: controller.signal });
    await new Promise((r) => setTimeout(r, 20));
    controller.abort(new Error('stop'));
    await assert.rejects(pending, /stop/);
    await retrying.close();
  });

  describe('watch', () => {
    const lines = (...events: unknown[]): string =>
      events.map((e) => `${JSON.stringify(e)}\n`).join('');
    const cm = (name: string, rv: string) => ({
      kind: 'ConfigMap',
      metadata: { name, resourceVersion: rv, annotations: { note: 'ümlaut ✓' } },
    });

    test('streams chunked NDJSON split anywhere, bookmarks included, until the server ends', async () => {
      handler = (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        const text = lines(
          { type: 'ADDED', object: cm('a', '11') },
          { type: 'BOOKMARK', object: { kind: 'ConfigMap', metadata: { resourceVersion: '12' } } },
          { type: 'MODIFIED', object: cm('a', '13') },
        );
        const bytes = Buffer.from(text);
        // Cut mid-event and mid-character, then send the rest in small pieces.
        const cuts = [5, 60, bytes.indexOf(Buffer.from('✓')) + 1, bytes.length].sort(
          (a, b) => a - b,
        );
        let at = 0;
        const send = (): void => {
          const cut = cuts.shift();
          if (cut === undefined) {
            res.end();
            return;
          }
          res.write(bytes.subarray(at, cut));
          at = cut;
          setImmediate(send);
        };
        send();
      };
      const events = await collect(
        client.watch<ReturnType<typeof cm>>(cms, { resourceVersion: '10', timeoutSeconds: 300 }),
      );
      assert.deepEqual(
        events.map((e) => `${e.type}@${e.object.metadata.resourceVersion}`),
        ['ADDED@11', 'BOOKMARK@12', 'MODIFIED@13'],
      );
      assert.equal(events[0]?.object.metadata.annotations.note, 'ümlaut ✓');
      assert.equal(
        seen[0]?.url,
        '/api/v1/namespaces/ns/configmaps?watch=1&allowWatchBookmarks=true&resourceVersion=10&timeoutSeconds=300',
      );
    });

    test('an ERROR event with 410 throws a gone KubeApiError after earlier events', async () => {
      handler = (_req, res) => {
        res.writeHead(200);
        res.end(
          lines(
            { type: 'ADDED', object: cm('a', '11') },
            {
              type: 'ERROR',
              object: failureStatus(410, 'Expired', 'too old resource version: 5 (9)'),
            },
          ),
        );
      };
      const got: string[] = [];
      await assert.rejects(
        (async () => {
          for await (const e of client.watch(cms, { resourceVersion: '5' })) got.push(e.type);
        })(),
        (err: unknown) => {
          assert.ok(isGone(err));
          assert.equal((err as KubeApiError).reason, 'Expired');
          return true;
        },
      );
      assert.deepEqual(got, ['ADDED']);
    });

    test('an HTTP error answer to a watch throws; a malformed line throws status 0', async () => {
      handler = (_req, res) => {
        json(res, 403, failureStatus(403, 'Forbidden', 'no'));
      };
      await assert.rejects(collect(client.watch(cms)), (e: unknown) => {
        assert.equal((e as KubeApiError).reason, 'Forbidden');
        return true;
      });
      handler = (_req, res) => {
        res.writeHead(200);
        res.end('{"type":"ADDED","object":{}}\nnot json\n');
      };
      await assert.rejects(collect(client.watch(cms)), (e: unknown) => {
        assert.equal((e as KubeApiError).status, 0);
        assert.match((e as Error).message, /cannot decode watch event/);
        return true;
      });
    });

    test('aborting ends the iteration quietly and closes the request', async () => {
      let closed: Promise<void> = Promise.resolve();
      handler = (_req, res) => {
        closed = new Promise((resolve) => res.on('close', resolve));
        res.writeHead(200);
        res.write(lines({ type: 'ADDED', object: cm('a', '1') }));
      };
      const controller = new AbortController();
      const got: string[] = [];
      for await (const e of client.watch(cms, { signal: controller.signal })) {
        got.push(e.type);
        controller.abort();
      }
      assert.deepEqual(got, ['ADDED']);
      await closed;
      assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
      // Aborted before it starts: no request at all, and no error.
      assert.deepEqual(await collect(client.watch(cms, { signal: AbortSignal.abort() })), []);
      assert.equal(seen.length, 1);
    });

    test('close() ends running watches quietly and resolves', async () => {
      handler = (_req, res) => {
        res.writeHead(200);
        res.write(lines({ type: 'ADDED', object: cm('a', '1') }));
      };
      const closing = make();
      const got: string[] = [];
      let closed: Promise<void> | undefined;
      for await (const e of closing.watch(cms)) {
        got.push(e.type);
        closed = closing.close();
      }
      assert.deepEqual(got, ['ADDED']);
      await closed;
    });

    test('a quiet watch outlives the request timeout that cuts off a stalled GET', async () => {
      const quick = make({ requestTimeoutMs: 150 });
      handler = (req, res) => {
        res.writeHead(200);
        if (req.url?.includes('watch=1') === true) {
          res.write(lines({ type: 'ADDED', object: cm('a', '1') }));
          setTimeout(() => res.end(lines({ type: 'MODIFIED', object: cm('a', '2') })), 400);
        } else {
          res.write('{"partial":');
        }
      };
      await assert.rejects(quick.get(cms, 'a'), (e: unknown) => (e as KubeApiError).status === 0);
      const events = await collect(quick.watch(cms));
      assert.deepEqual(
        events.map((e) => e.type),
        ['ADDED', 'MODIFIED'],
      );
      await quick.destroy();
    });
  });
});
