import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { createServer } from '../util/node-http.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { HttpSource } from './http-source.ts';

const podYaml = (name: string): string =>
  `apiVersion: v1\nkind: Pod\nmetadata: {name: ${name}}\nspec: {containers: [{name: c, image: busybox}]}\n`;

describe('HttpSource', () => {
  let answer: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => {
    res.end();
  };
  const server = createServer((req, res) => {
    answer(req, res);
  });
  let url: string;
  before(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/pods`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  function source(timeoutMs = 10_000) {
    const updates: Pod[][] = [];
    const problems: string[] = [];
    const s = new HttpSource({
      url,
      headers: { 'X-Token': ['secret'] },
      nodeName: 'n1',
      clock: new FakeClock(),
      logger: new MemoryLogger(),
      periodMs: 20_000,
      timeoutMs,
      onUpdate: (pods) => updates.push(pods),
      onProblem: (_where, message) => problems.push(message),
    });
    return { s, updates, problems };
  }

  test('one pod or a PodList, fetched with the configured headers', async () => {
    let token: string | undefined;
    answer = (req, res) => {
      token = req.headers['x-token'] as string | undefined;
      res.end(podYaml('one'));
    };
    const { s, updates } = source();
    await s.fetchOnce(new AbortController().signal);
    assert.equal(token, 'secret');
    assert.deepEqual(
      updates.at(-1)?.map((p) => p.metadata?.name),
      ['one-n1'],
    );
    assert.equal(
      updates.at(-1)?.[0]?.metadata?.annotations?.['kubernetes.io/config.hash'],
      updates.at(-1)?.[0]?.metadata?.uid,
    );
    answer = (_req, res) => {
      res.end(
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'PodList',
          items: [
            { metadata: { name: 'a' }, spec: { containers: [{ name: 'c', image: 'i' }] } },
            { metadata: { name: 'b' }, spec: { containers: [{ name: 'c', image: 'i' }] } },
          ],
        }),
      );
    };
    await s.fetchOnce(new AbortController().signal);
    assert.deepEqual(
      updates.at(-1)?.map((p) => p.metadata?.name),
      ['a-n1', 'b-n1'],
    );
  });

  test('a 500, a hang or a bad body keep the last pods and are reported', async () => {
    answer = (_req, res) => {
      res.end(podYaml('kept'));
    };
    const { s, updates, problems } = source(200);
    const signal = new AbortController().signal;
    await s.fetchOnce(signal);
    assert.equal(updates.length, 1);
    answer = (_req, res) => {
      res.statusCode = 500;
      res.end('boom');
    };
    await s.fetchOnce(signal);
    answer = () => undefined; // never answers
    await s.fetchOnce(signal);
    answer = (_req, res) => {
      res.end('kind: Deployment\napiVersion: apps/v1\n');
    };
    await s.fetchOnce(signal);
    assert.equal(updates.length, 1, 'no update replaced the last good pods');
    assert.match(problems[0] ?? '', /: 500 Internal Server Error$/);
    assert.match(problems[1] ?? '', /timeout/);
    assert.match(problems[2] ?? '', /no kind "Deployment" is registered for version "apps\/v1"/);
  });

  test('an empty answer is an empty set (and reported)', async () => {
    answer = (_req, res) => {
      res.end();
    };
    const { s, updates, problems } = source();
    await s.fetchOnce(new AbortController().signal);
    assert.deepEqual(updates, [[]]);
    assert.match(problems[0] ?? '', /zero-length data/);
  });
});
