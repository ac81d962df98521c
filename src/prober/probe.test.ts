/**
 * Single probe attempts against loopback servers: httpGet status classes, headers,
 * redirects (same host followed, another host a warning, loops), body cap, cancellation and
 * named ports; tcpSocket open and closed ports; handler-less probes.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Container, Probe } from 'kubernetes-types/core/v1.js';
import type { CriClient } from '../cri/index.ts';
import { resolvePort, runProbe } from './probe.ts';

const noExec: Pick<CriClient['runtime'], 'execSync'> = {
  execSync: () => Promise.reject(new Error('exec not expected')),
};

describe('runProbe', () => {
  let server: http.Server;
  let port = 0;
  const seen: http.IncomingHttpHeaders[] = [];

  before(async () => {
    server = http.createServer((req, res) => {
      seen.push(req.headers);
      if (req.url === '/ok') res.end('fine');
      else if (req.url === '/moved') {
        res.writeHead(302, { location: 'http://elsewhere.invalid/' });
        res.end('gone elsewhere');
      } else if (req.url === '/local') {
        // Same host name, relative location: followed.
        res.writeHead(301, { location: '/ok' });
        res.end();
      } else if (req.url?.startsWith('/loop') === true) {
        res.writeHead(302, { location: `/loop${Math.random()}` });
        res.end();
      } else if (req.url === '/big') res.end('x'.repeat(64 * 1024));
      else if (req.url === '/slow') {
        // Never answers: the probe timeout must end it.
      } else {
        res.writeHead(500);
        res.end('broken');
      }
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

  const container = (): Container => ({
    name: 'main',
    ports: [{ name: 'web', containerPort: port }],
  });
  const run = (probe: Probe) =>
    runProbe(
      probe,
      { containerId: 'c1', container: container(), podIP: '127.0.0.1' },
      noExec,
      new AbortController().signal,
    );

  test('httpGet: 2xx passes with the kube-probe user agent and the given headers', async () => {
    const r = await run({
      httpGet: { path: '/ok', port: 'web', httpHeaders: [{ name: 'X-Probe', value: 'yes' }] },
    });
    assert.deepEqual(r, { result: 'success', output: 'fine' });
    assert.equal(seen.at(-1)?.['user-agent'], 'kube-probe/1.37');
    assert.equal(seen.at(-1)?.['x-probe'], 'yes');
    assert.equal(seen.at(-1)?.accept, '*/*');
  });

  test('httpGet: a redirect to another host is not followed and passes with a warning', async () => {
    const before = seen.length;
    const r = await run({ httpGet: { path: '/moved', port } });
    assert.deepEqual(r, {
      result: 'warning',
      output: 'Probe terminated redirects, Response body: gone elsewhere',
    });
    assert.equal(seen.length, before + 1);
  });

  test('httpGet: a redirect to the same host is followed with the same headers', async () => {
    const before = seen.length;
    const r = await run({
      httpGet: { path: '/local', port, httpHeaders: [{ name: 'X-Probe', value: 'again' }] },
    });
    assert.deepEqual(r, { result: 'success', output: 'fine' });
    assert.equal(seen.length, before + 2);
    assert.equal(seen.at(-1)?.['x-probe'], 'again');
  });

  test('httpGet: a redirect loop fails after 10 redirects', async () => {
    const before = seen.length;
    const r = await run({ httpGet: { path: '/loop', port } });
    assert.equal(r.result, 'failure');
    assert.match(r.output, /stopped after 10 redirects$/);
    assert.equal(seen.length, before + 10);
  });

  test('httpGet: at most 10 KiB of the body is kept', async () => {
    const r = await run({ httpGet: { path: '/big', port } });
    assert.equal(r.result, 'success');
    assert.equal(r.output.length, 10 * 1024);
  });

  test('httpGet: stopping the worker mid-request rejects with its reason', async () => {
    const ac = new AbortController();
    const pending = runProbe(
      { httpGet: { path: '/slow', port } },
      { containerId: 'c1', container: container(), podIP: '127.0.0.1' },
      noExec,
      ac.signal,
    );
    setImmediate(() => {
      ac.abort(new Error('worker stopped'));
    });
    await assert.rejects(pending, /worker stopped/);
  });

  test('httpGet: a refused connection fails with the URL and the cause', async () => {
    const r = await run({ httpGet: { path: '/ok', port: 1 } });
    assert.equal(r.result, 'failure');
    // Go's wording, as upstream's events show it.
    assert.equal(
      r.output,
      'Get "http://127.0.0.1:1/ok": dial tcp 127.0.0.1:1: connect: connection refused',
    );
  });

  test('httpGet: a pod header overrides the user agent; an empty Accept drops it', async () => {
    await run({
      httpGet: {
        path: 'ok',
        port,
        httpHeaders: [
          { name: 'User-Agent', value: 'mine' },
          { name: 'Accept', value: '' },
        ],
      },
    });
    assert.equal(seen.at(-1)?.['user-agent'], 'mine');
    assert.equal(seen.at(-1)?.accept, undefined);
  });

  test('httpGet: 5xx fails with the status code', async () => {
    const r = await run({ httpGet: { path: '/bad', port } });
    assert.deepEqual(r, { result: 'failure', output: 'HTTP probe failed with statuscode: 500' });
  });

  test('an unknown port name or a port out of range is an error, in upstream words', async () => {
    await assert.rejects(run({ httpGet: { path: '/ok', port: 'nope' } }), {
      name: 'ProbeConfigError',
      code: 'BERTH_PROBE_CONFIG',
      message: 'port "nope" not found',
    });
    await assert.rejects(run({ tcpSocket: { port: 70_000 } }), {
      message: 'invalid port number: 70000',
    });
    assert.equal(resolvePort('8080', container()), 8080);
    assert.equal(resolvePort(0, container()), undefined);
  });

  test('tcpSocket: open port passes, closed port fails', async () => {
    assert.equal((await run({ tcpSocket: { port } })).result, 'success');
    const closed = net.createServer();
    await new Promise<void>((r) => {
      closed.listen(0, '127.0.0.1', r);
    });
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) =>
      closed.close(() => {
        r();
      }),
    );
    const r = await run({ tcpSocket: { port: closedPort } });
    assert.equal(r.result, 'failure');
    assert.equal(r.output, `dial tcp 127.0.0.1:${closedPort}: connect: connection refused`);
  });

  test('handler-less probes are errors; gRPC probes without a pod IP fail with a reason', async () => {
    await assert.rejects(run({}), /no handler/);
    const r = await runProbe(
      { grpc: { port } },
      { containerId: 'c1', container: container(), podIP: undefined },
      noExec,
      new AbortController().signal,
    );
    assert.deepEqual(r, { result: 'failure', output: 'the pod has no IP address yet' });
  });
});
