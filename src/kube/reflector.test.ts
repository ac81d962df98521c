/**
 * The reflector against FakeKubeClient on a FakeClock: paged list then watch, relist
 * on 410, resume from the last resourceVersion (bookmarks included), back-off on
 * errors, the stall timer, handler errors, health.
 */
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { describe, test } from 'node:test';
import type { ConfigMap } from 'kubernetes-types/core/v1.js';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FakeKubeClient } from './fake-client.ts';
import { Reflector, type ReflectorEventType, type ReflectorOptions } from './reflector.ts';
import {
  CONFIGMAPS,
  inNamespace,
  KubeApiError,
  type ListOptions,
  type ListResult,
  type ResourcePath,
} from './types.ts';

const cms = inNamespace(CONFIGMAPS, 'ns');
const cm = (name: string): ConfigMap => ({ metadata: { name } });

/** Lets the reflector's loop run until `condition` holds (no real time passes). */
async function until(what: string, condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (condition()) return;
    await new Promise((r) => setImmediate(r));
  }
  assert.fail(`timed out waiting for ${what}`);
}

function harness(
  client: FakeKubeClient,
  options: Partial<ReflectorOptions<ConfigMap>> & { clock?: FakeClock } = {},
) {
  const clock = options.clock ?? new FakeClock();
  const logger = new MemoryLogger();
  const syncs: string[][] = [];
  const events: string[] = [];
  const reflector = new Reflector<ConfigMap>({
    client,
    path: cms,
    clock,
    logger,
    random: () => 0,
    handler: {
      onSync: (items) => {
        syncs.push(items.map((i) => i.metadata?.name ?? ''));
      },
      onEvent: (type: ReflectorEventType, obj) => {
        events.push(`${type} ${obj.metadata?.name ?? ''}`);
      },
    },
    ...options,
  });
  const controller = new AbortController();
  const running = reflector.run(controller.signal);
  const stop = async (): Promise<void> => {
    controller.abort();
    await running;
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
  };
  const watches = (): number => client.calls.filter((c) => c.verb === 'watch').length;
  const lists = (): number => client.calls.filter((c) => c.verb === 'list').length;
  return { clock, logger, syncs, events, reflector, stop, watches, lists };
}

describe('Reflector', () => {
  test('lists in pages, syncs, then streams events from the list resourceVersion', async () => {
    const client = new FakeKubeClient();
    for (const n of ['a', 'b', 'c', 'd', 'e']) await client.create(cms, cm(n));
    const listRv = client.resourceVersion;
    const h = harness(client, { pageSize: 2 });
    assert.equal(h.reflector.hasSynced(), false);
    await h.reflector.whenSynced();
    assert.deepEqual(h.syncs, [['a', 'b', 'c', 'd', 'e']]);
    assert.equal(h.lists(), 3);
    await until('watch', () => client.activeWatches === 1);
    const watch = client.calls.find((c) => c.verb === 'watch');
    assert.equal(watch?.resourceVersion, listRv);
    const created = await client.create<ConfigMap>(cms, cm('f'));
    await client.update(cms, 'f', { ...created, data: { x: '1' } });
    await client.delete(cms, 'a');
    await until('events', () => h.events.length === 3);
    assert.deepEqual(h.events, ['ADDED f', 'MODIFIED f', 'DELETED a']);
    const health = h.reflector.health();
    assert.equal(health.synced, true);
    assert.equal(health.consecutiveErrors, 0);
    assert.equal(health.resourceVersion, client.resourceVersion);
    assert.equal(health.lastSyncAt, h.clock.now());
    assert.equal(health.lastEventAt, h.clock.now());
    await h.stop();
    assert.equal(client.activeWatches, 0);
  });

  test('410 Gone relists and replaces the handler state', async () => {
    const client = new FakeKubeClient();
    await client.create(cms, cm('a'));
    const h = harness(client);
    await until('watch', () => client.activeWatches === 1);
    await client.create(cms, cm('b'));
    await until('event', () => h.events.length === 1);
    client.expireWatches();
    await until('relist', () => h.syncs.length === 2);
    assert.deepEqual(h.syncs[1], ['a', 'b']);
    await until('watch again', () => client.activeWatches === 1);
    const health = h.reflector.health();
    assert.equal(health.restarts, 1);
    assert.equal(health.consecutiveErrors, 0);
    assert.equal(health.errors, 0);
    assert.ok(h.logger.records.some((r) => r.msg === 'Watch expired, listing again'));
    await h.stop();
  });

  test('410 Gone again right after a relist backs off instead of looping', async () => {
    const client = new FakeKubeClient();
    await client.create(cms, cm('a'));
    const h = harness(client);
    await until('watch', () => client.activeWatches === 1);
    const gone = new KubeApiError(410, 'Expired', 'too old resource version');
    client.failNext({ verb: 'watch', error: gone, times: 2 });
    client.expireWatches();
    // The first 410 relists at once; the next, with no event in between, waits 800 ms.
    await until('the relist and its failed watch', () => h.lists() === 2 && h.watches() === 2);
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    assert.equal(h.lists(), 2, 'no relist before the back-off');
    await h.clock.advance(799);
    assert.equal(h.lists(), 2);
    await h.clock.advance(1);
    await until('the next relist and its failed watch', () => h.lists() === 3 && h.watches() === 3);
    // Then 1600 ms.
    await h.clock.advance(1599);
    assert.equal(h.lists(), 3);
    await h.clock.advance(1);
    await until('a working watch', () => h.lists() === 4 && client.activeWatches === 1);
    // An event resets the count: the next 410 relists at once again.
    await client.create(cms, cm('b'));
    await until('event', () => h.events.length === 1);
    client.expireWatches();
    await until('immediate relist', () => h.lists() === 5);
    await h.stop();
  });

  test('a normal watch end resumes from the last bookmark, without a relist', async () => {
    const client = new FakeKubeClient();
    const h = harness(client);
    await until('watch', () => client.activeWatches === 1);
    // Writes elsewhere move the resourceVersion; only a bookmark tells the reflector.
    await client.create(inNamespace(CONFIGMAPS, 'other'), cm('x'));
    await client.create(inNamespace(CONFIGMAPS, 'other'), cm('y'));
    const bookmarkRv = client.resourceVersion;
    client.bookmark();
    await until('bookmark', () => h.reflector.health().resourceVersion === bookmarkRv);
    client.endWatches();
    await until('second watch', () => h.watches() === 2 && client.activeWatches === 1);
    assert.equal(client.calls.filter((c) => c.verb === 'watch')[1]?.resourceVersion, bookmarkRv);
    assert.equal(h.lists(), 1);
    assert.deepEqual(h.events, []);
    await h.stop();
  });

  test('the server-side watch timeout is 5 to 10 minutes', async () => {
    const clock = new FakeClock();
    const client = new FakeKubeClient({ clock });
    const h = harness(client, { clock, random: () => 0.5, stallTimeoutMs: 3_600_000 });
    await until('watch', () => client.activeWatches === 1);
    await client.create(cms, cm('a'));
    await until('event', () => h.events.length === 1);
    // 300 s · (1 + 0.5): the fake ends the watch on the clock, and the reflector resumes.
    await h.clock.advance(449_000);
    assert.equal(h.watches(), 1);
    await h.clock.advance(1000);
    await until('second watch', () => h.watches() === 2);
    assert.equal(h.reflector.health().restarts, 0);
    await h.stop();
  });

  test('errors back off exponentially with jitter, then recover', async () => {
    const client = new FakeKubeClient();
    const boom = new KubeApiError(500, 'InternalError', 'etcd is sad');
    client.failNext({ verb: 'list', error: boom, times: 3 });
    const h = harness(client);
    await until('first failure', () => h.lists() === 1 && h.clock.pending > 0);
    assert.equal(h.reflector.health().consecutiveErrors, 1);
    assert.equal(h.reflector.health().lastError, 'etcd is sad');
    // random() = 0: 800 ms, 1600 ms, 3200 ms.
    await h.clock.advance(799);
    assert.equal(h.lists(), 1);
    await h.clock.advance(1);
    await until('second list', () => h.lists() === 2);
    await h.clock.advance(1600);
    await until('third list', () => h.lists() === 3);
    assert.equal(h.reflector.health().consecutiveErrors, 3);
    await h.clock.advance(3200);
    await h.reflector.whenSynced();
    assert.equal(h.reflector.health().consecutiveErrors, 0);
    assert.equal(h.reflector.health().errors, 3);
    assert.equal(h.logger.records.filter((r) => r.msg === 'List failed, retrying').length, 3);
    await h.stop();
  });

  test('a watch error resumes the watch from the last resourceVersion after back-off', async () => {
    const client = new FakeKubeClient();
    const h = harness(client);
    await until('watch', () => client.activeWatches === 1);
    await client.create(cms, cm('a'));
    await until('event', () => h.events.length === 1);
    const rv = client.resourceVersion;
    client.failWatches(new KubeApiError(0, 'Unknown', 'connection reset'));
    await until('back-off', () => h.reflector.health().consecutiveErrors === 1);
    await h.clock.advance(800);
    await until('second watch', () => h.watches() === 2);
    assert.equal(client.calls.filter((c) => c.verb === 'watch')[1]?.resourceVersion, rv);
    assert.equal(h.lists(), 1);
    await h.stop();
  });

  test('a watch that delivers nothing within stallTimeoutMs is restarted', async () => {
    const client = new FakeKubeClient();
    const h = harness(client, { stallTimeoutMs: 10_000 });
    await until('watch', () => client.activeWatches === 1);
    await h.clock.advance(6000);
    await client.create(cms, cm('a'));
    await until('event', () => h.events.length === 1);
    await h.clock.advance(6000);
    assert.equal(h.watches(), 1, 'an event resets the stall timer');
    await h.clock.advance(4000);
    await until('stall', () => h.reflector.health().restarts === 1);
    assert.match(h.reflector.health().lastError ?? '', /delivered nothing for 10000 ms/);
    await h.clock.advance(800);
    await until('second watch', () => h.watches() === 2 && client.activeWatches === 1);
    assert.equal(h.lists(), 1);
    await h.stop();
  });

  test('a watch that ends at once without events is retried with back-off', async () => {
    const client = new FakeKubeClient();
    const h = harness(client);
    await until('watch', () => client.activeWatches === 1);
    client.endWatches();
    await until('short watch', () => h.reflector.health().consecutiveErrors === 1);
    assert.match(h.reflector.health().lastError ?? '', /ended at once/);
    assert.equal(h.watches(), 1);
    await h.clock.advance(800);
    await until('second watch', () => h.watches() === 2);
    await h.stop();
  });

  test('an expired continue token restarts the list in one request', async () => {
    class ExpiringContinue extends FakeKubeClient {
      override list<T>(path: ResourcePath, options: ListOptions = {}): Promise<ListResult<T>> {
        if (options.continue !== undefined) {
          return Promise.reject(new KubeApiError(410, 'Expired', 'continue token expired'));
        }
        return super.list<T>(path, options);
      }
    }
    const client = new ExpiringContinue();
    for (const n of ['a', 'b', 'c']) await client.create(cms, cm(n));
    const h = harness(client, { pageSize: 1 });
    await h.reflector.whenSynced();
    assert.deepEqual(h.syncs, [['a', 'b', 'c']]);
    await h.stop();
  });

  test('handler errors are logged and counted without stopping the stream', async () => {
    const client = new FakeKubeClient();
    const clock = new FakeClock();
    const logger = new MemoryLogger();
    const seen: string[] = [];
    const reflector = new Reflector<ConfigMap>({
      client,
      path: cms,
      clock,
      logger,
      handler: {
        onSync: () => undefined,
        onEvent: async (_type, obj) => {
          await Promise.resolve();
          if (obj.metadata?.name === 'bad') throw new Error('handler bug');
          seen.push(obj.metadata?.name ?? '');
        },
      },
    });
    const controller = new AbortController();
    const running = reflector.run(controller.signal);
    await until('watch', () => client.activeWatches === 1);
    await client.create(cms, cm('bad'));
    await client.create(cms, cm('good'));
    await until('good', () => seen.length === 1);
    assert.equal(reflector.health().handlerErrors, 1);
    assert.ok(
      logger.records.some((r) => r.level === 'error' && r.fields['error'] === 'handler bug'),
    );
    await assert.rejects(reflector.run(controller.signal), /already running/);
    controller.abort();
    await running;
  });

  test('whenSynced rejects when its signal aborts first', async () => {
    const client = new FakeKubeClient();
    client.failNext({ verb: 'list', error: new KubeApiError(503, 'Unknown', 'down'), times: 100 });
    const h = harness(client);
    const controller = new AbortController();
    const waiting = h.reflector.whenSynced(controller.signal);
    controller.abort(new Error('gave up'));
    await assert.rejects(waiting, /gave up/);
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
    await h.stop();
  });
});
