import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { cri } from '../cri/index.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { systemClock } from '../util/clock.ts';
import { parseTarget, type HandlerDeps } from './handlers.ts';
import { streamingUrl } from './stream-target.ts';
import { cacheOf, cachedRunning, runTestContainer, TEST_IMAGE } from './testing.ts';

describe('streamingUrl and the PLEG cache', () => {
  const client = new FakeCriClient();
  const uid = randomUUID();
  const pod: Pod = {
    metadata: { name: 'web', namespace: 'ns', uid },
    spec: { containers: [{ name: 'app', image: TEST_IMAGE }] },
  };
  let containerId = '';
  before(async () => {
    containerId = await runTestContainer(client, uid, `/tmp/berth-handlers-test-${uid}`);
  });
  after(() => {
    client.close();
  });

  const deps = (containers: readonly cri.Container[]): HandlerDeps => ({
    cri: client,
    clock: systemClock,
    nodeName: 'node',
    podLogsDir: '/nonexistent',
    pods: () => new Map([[uid, pod]]),
    runtimeCache: cacheOf(uid, containers),
  });
  const target = parseTarget('/exec/ns/web/app?command=true&stdout=1');
  const running = (id: string): cri.Container => cachedRunning(uid, id);

  it('a running container in the cache is asked for directly, without a listing', async () => {
    client.clearCalls();
    const r = await streamingUrl(
      deps([running(containerId)]),
      'exec',
      target,
      AbortSignal.timeout(5000),
    );
    assert.match(r.url, /\/exec\//);
    assert.deepEqual(r.streams, { stdin: false, stdout: true, stderr: false, tty: false });
    assert.equal(client.callsTo('RuntimeService/ListContainers').length, 0);
    assert.deepEqual(
      client.callsTo('RuntimeService/Exec').map((c) => (c as { containerId: string }).containerId),
      [containerId],
    );
  });

  it('a cached container the runtime no longer has falls back to the live listing', async () => {
    client.clearCalls();
    const r = await streamingUrl(
      deps([running('gone')]),
      'exec',
      target,
      AbortSignal.timeout(5000),
    );
    assert.match(r.url, /\/exec\//);
    assert.equal(client.callsTo('RuntimeService/ListContainers').length, 1);
    assert.deepEqual(
      client.callsTo('RuntimeService/Exec').map((c) => (c as { containerId: string }).containerId),
      ['gone', containerId],
    );
  });

  it('nothing cached: the live listing, as without a cache', async () => {
    client.clearCalls();
    const r = await streamingUrl(
      deps([]),
      'attach',
      parseTarget('/attach/ns/web/app?stdout=1'),
      AbortSignal.timeout(5000),
    );
    assert.match(r.url, /\/attach\//);
    assert.equal(client.callsTo('RuntimeService/ListContainers').length, 1);
  });
});
