/**
 * Single probe attempts against loopback servers: httpGet status classes, headers,
 * redirects and named ports; tcpSocket open and closed ports; handler-less and gRPC.
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
        res.end();
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
  });

  test('httpGet: a redirect counts as success and is not followed', async () => {
    const before = seen.length;
    const r = await run({ httpGet: { path: '/moved', port } });
    assert.equal(r.result, 'success');
    assert.equal(seen.length, before + 1);
  });

  test('httpGet: 5xx fails with the status code', async () => {
    const r = await run({ httpGet: { path: '/bad', port } });
    assert.deepEqual(r, { result: 'failure', output: 'HTTP probe failed with statuscode: 500' });
  });

  test('an unknown port name fails clearly', async () => {
    const r = await run({ httpGet: { path: '/ok', port: 'nope' } });
    assert.deepEqual(r, { result: 'failure', output: 'unable to resolve port nope' });
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
    assert.match(r.output, /ECONNREFUSED/);
  });

  test('gRPC and handler-less probes fail with a reason', async () => {
    assert.match((await run({ grpc: { port } })).output, /not supported/);
    assert.match((await run({})).output, /no handler/);
  });
});
