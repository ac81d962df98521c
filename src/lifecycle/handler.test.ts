/**
 * HandlerRunner against the fake CRI runtime, a fake clock and loopback HTTP servers:
 * exec without a timeout and upstream's failure message, httpGet (pod IP, named port,
 * headers, any status passes, HTTPS-to-HTTP fallback), sleep cut by the signal.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { testPod } from '../container/testing.ts';
import { lifecycleHarness, settle } from './testing.ts';

const pod: Pod = testPod();
const main = (port = 0): Container => ({
  name: 'main',
  ports: [{ name: 'hook', containerPort: port }],
});
const never = new AbortController().signal;

describe('HandlerRunner', () => {
  let server: http.Server;
  let port = 0;
  const seen: { url: string; headers: http.IncomingHttpHeaders }[] = [];

  before(async () => {
    server = http.createServer((req, res) => {
      seen.push({ url: req.url ?? '', headers: req.headers });
      res.writeHead(req.url === '/broken' ? 500 : 200);
      res.end('hook body');
    });
    await new Promise<void>((r) => {
      server.listen(0, '127.0.0.1', r);
    });
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    await new Promise<void>((r) =>
      server.close(() => {
        r();
      }),
    );
  });

  test('exec runs through ExecSync with no timeout and passes on exit 0', async () => {
    const h = await lifecycleHarness();
    const cmds: (readonly string[])[] = [];
    h.fake.onExec((_c, cmd) => {
      cmds.push(cmd);
      return { exitCode: 0 };
    });
    const r = await h.runner.run(
      pod,
      main(),
      h.containerId,
      { exec: { command: ['touch', '/x'] } },
      never,
    );
    assert.deepEqual(r, { ok: true });
    assert.deepEqual(cmds, [['touch', '/x']]);
    const [req] = h.fake.callsTo('RuntimeService/ExecSync') as { timeout: bigint }[];
    assert.equal(req?.timeout, 0n, 'hooks have no runtime timeout');
  });

  test('a failing exec reports upstream message with the output', async () => {
    const h = await lifecycleHarness();
    h.fake.onExec(() => ({ exitCode: 3, stdout: 'out', stderr: 'oops' }));
    const r = await h.runner.run(
      pod,
      main(),
      h.containerId,
      { exec: { command: ['sh', '-c', 'exit 3'] } },
      never,
    );
    assert.deepEqual(r, {
      ok: false,
      error: "command 'sh -c exit 3' exited with 3: oops",
      message:
        'Exec lifecycle hook ([sh -c exit 3]) for Container "main" in Pod "web_default(uid-1)" ' +
        `failed - error: command 'sh -c exit 3' exited with 3: oops, message: "outoops"`,
    });
  });

  test('httpGet goes to the pod IP and named port with the headers; any status passes', async () => {
    const h = await lifecycleHarness('127.0.0.1');
    const ok = await h.runner.run(
      pod,
      main(port),
      h.containerId,
      {
        httpGet: {
          port: 'hook',
          path: 'started',
          httpHeaders: [{ name: 'X-Hook', value: 'post' }],
        },
      },
      never,
    );
    assert.deepEqual(ok, { ok: true });
    assert.equal(seen.at(-1)?.url, '/started');
    assert.equal(seen.at(-1)?.headers['user-agent'], 'kube-lifecycle/1.37');
    assert.equal(seen.at(-1)?.headers['x-hook'], 'post');
    const broken = await h.runner.run(
      pod,
      main(port),
      h.containerId,
      { httpGet: { port, path: '/broken' } },
      never,
    );
    assert.deepEqual(broken, { ok: true }, 'upstream does not check the status code of hooks');
  });

  test('httpGet that cannot connect fails with the URL in the message', async () => {
    const h = await lifecycleHarness('127.0.0.1');
    const r = await h.runner.run(
      pod,
      main(),
      h.containerId,
      { httpGet: { port: 1, path: '/x' } },
      never,
    );
    assert.equal(r.ok, false);
    assert.match(
      r.ok ? '' : r.message,
      /^HTTP lifecycle hook \(\/x\) for Container "main" in Pod "web_default\(uid-1\)" failed - error: Get "http:\/\/127\.0\.0\.1:1\/x": dial tcp 127\.0\.0\.1:1: connect: connection refused$/,
    );
  });

  test('HTTPS answered in plain HTTP falls back to HTTP without credentials, with an event', async () => {
    const h = await lifecycleHarness('127.0.0.1');
    const before = seen.length;
    const r = await h.runner.run(
      pod,
      main(port),
      h.containerId,
      {
        httpGet: {
          scheme: 'HTTPS',
          port,
          path: '/tls',
          httpHeaders: [
            { name: 'Authorization', value: 'Bearer secret' },
            { name: 'X-Hook', value: 'kept' },
          ],
        },
      },
      never,
    );
    assert.deepEqual(r, { ok: true });
    const retried = seen.slice(before).filter((s) => s.url === '/tls');
    assert.equal(retried.length, 1);
    assert.equal(retried[0]?.headers.authorization, undefined);
    assert.equal(retried[0]?.headers['x-hook'], 'kept');
    assert.deepEqual(
      h.recorder.events.map((e) => [e.type, e.reason, e.message]),
      [
        [
          'Warning',
          'LifecycleHTTPFallback',
          `request to HTTPS lifecycle hook 127.0.0.1:${port} got HTTP response, retry with HTTP succeeded`,
        ],
      ],
    );
  });

  test('httpGet without a pod IP fails clearly', async () => {
    const h = await lifecycleHarness('');
    const r = await h.runner.run(pod, main(), h.containerId, { httpGet: { port: 80 } }, never);
    assert.equal(r.ok, false);
    assert.match(r.ok ? '' : r.error, /failed to find networking container/);
  });

  test('sleep waits its seconds on the clock and is cut by the signal', async () => {
    const h = await lifecycleHarness();
    let done = false;
    const run = h.runner
      .run(pod, main(), h.containerId, { sleep: { seconds: 5 } }, never)
      .then((r) => {
        done = true;
        return r;
      });
    await settle();
    await h.clock.advance(4999);
    await settle();
    assert.equal(done, false);
    await h.clock.advance(1);
    assert.deepEqual(await run, { ok: true });

    const ac = new AbortController();
    const cut = h.runner.run(pod, main(), h.containerId, { sleep: { seconds: 60 } }, ac.signal);
    await settle();
    ac.abort(new Error('grace period over'));
    await assert.rejects(cut, /grace period over/);
    assert.equal(h.clock.pending, 0, 'no timer left behind');
  });

  test('a handler with no action fails as invalid', async () => {
    const h = await lifecycleHarness();
    const r = await h.runner.run(pod, main(), h.containerId, {}, never);
    assert.deepEqual(r, {
      ok: false,
      error: 'invalid handler: {}',
      message: 'Cannot run handler: invalid handler: {}',
    });
  });
});
