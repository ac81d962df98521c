/**
 * FakeKubeClient: the shared contract, then what only the fake offers tests (forced
 * 410 Gone, injected errors, bookmarks, history limits) and the apiserver rules it
 * models beyond the contract (graceful pod deletion, finalizers, namespaces).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ConfigMap, Pod } from 'kubernetes-types/core/v1.js';
import { FakeClock } from '../util/clock.ts';
import { kubeClientContract } from './contract.ts';
import { FakeKubeClient } from './fake-client.ts';
import {
  CONFIGMAPS,
  inNamespace,
  isConflict,
  isGone,
  isNotFound,
  KubeApiError,
  NAMESPACES,
  PODS,
  type WatchEvent,
} from './types.ts';

kubeClientContract('FakeKubeClient', () => ({
  client: new FakeKubeClient({ requireNamespaces: true }),
}));

const cms = inNamespace(CONFIGMAPS, 'ns');
const pods = inNamespace(PODS, 'ns');
const cm = (name: string, data: Record<string, string> = {}): ConfigMap => ({
  metadata: { name },
  data,
});

/** The next event of a watch; fails when the watch ends. */
async function next<T>(iterator: AsyncIterator<WatchEvent<T>>): Promise<WatchEvent<T>> {
  const r = await iterator.next();
  assert.notEqual(r.done, true, 'the watch ended');
  return r.value as WatchEvent<T>;
}

async function collect<T>(events: AsyncIterable<WatchEvent<T>>): Promise<string[]> {
  const types: string[] = [];
  for await (const e of events) types.push(e.type);
  return types;
}

describe('FakeKubeClient test controls', () => {
  test('expireWatches fails running watches with 410 and rejects older resourceVersions', async () => {
    const client = new FakeKubeClient();
    const from = client.resourceVersion;
    await client.create(cms, cm('a'));
    const iterator = client.watch(cms, { resourceVersion: from })[Symbol.asyncIterator]();
    assert.equal((await next(iterator)).type, 'ADDED');
    const pending = iterator.next();
    client.expireWatches();
    await assert.rejects(pending, (err: unknown) => isGone(err));
    await assert.rejects(collect(client.watch(cms, { resourceVersion: from })), isGone);
    // The current resourceVersion is still a valid start.
    const ok = client.watch(cms, { resourceVersion: client.resourceVersion });
    const it2 = ok[Symbol.asyncIterator]();
    const ended = it2.next();
    client.endWatches();
    assert.equal((await ended).done, true);
  });

  test('a watch from before the kept history is 410 Expired', async () => {
    const client = new FakeKubeClient({ historyLimit: 2 });
    const from = client.resourceVersion;
    for (const n of ['a', 'b', 'c']) await client.create(cms, cm(n));
    await assert.rejects(collect(client.watch(cms, { resourceVersion: from })), (err: unknown) => {
      assert.ok(err instanceof KubeApiError);
      assert.equal(err.status, 410);
      assert.equal(err.reason, 'Expired');
      return true;
    });
  });

  test('failNext fails the matching calls only, as often as asked', async () => {
    const client = new FakeKubeClient();
    const boom = new KubeApiError(500, 'InternalError', 'boom');
    client.failNext({ verb: 'create', resource: 'configmaps', error: boom, times: 2 });
    await client.list(cms);
    await assert.rejects(client.create(cms, cm('a')), boom);
    await assert.rejects(client.create(cms, cm('a')), boom);
    await client.create(cms, cm('a'));
    assert.deepEqual(
      client.calls.map((c) => c.verb),
      ['list', 'create', 'create', 'create'],
    );
  });

  test('bookmarks go only to watches that asked, at the current resourceVersion', async () => {
    const client = new FakeKubeClient();
    const rv = client.resourceVersion;
    const withBookmarks = client.watch<ConfigMap>(cms, {
      resourceVersion: rv,
      allowWatchBookmarks: true,
    });
    const without = client.watch(cms, { resourceVersion: rv });
    const a = withBookmarks[Symbol.asyncIterator]();
    const b = without[Symbol.asyncIterator]();
    const first = next(a);
    const second = b.next();
    await client.create(inNamespace(CONFIGMAPS, 'other'), cm('x'));
    client.bookmark();
    const bookmark = await first;
    assert.equal(bookmark.type, 'BOOKMARK');
    assert.equal(bookmark.object.metadata?.resourceVersion, client.resourceVersion);
    client.endWatches();
    assert.equal((await second).done, true);
    assert.equal(client.activeWatches, 1);
    assert.equal((await a.next()).done, true);
    assert.equal(client.activeWatches, 0);
  });

  test('a watch ends at timeoutSeconds on the injected clock', async () => {
    const clock = new FakeClock();
    const client = new FakeKubeClient({ clock });
    const done = collect(client.watch(cms, { resourceVersion: '', timeoutSeconds: 60 }));
    await clock.advance(59_000);
    assert.equal(client.activeWatches, 1);
    await clock.advance(1000);
    assert.deepEqual(await done, []);
  });
});

describe('FakeKubeClient apiserver rules', () => {
  const boundPod = (name: string): Pod => ({
    metadata: { name },
    spec: { nodeName: 'node-1', containers: [{ name: 'c', image: 'i' }] },
  });

  test('a pod bound to a node is deleted gracefully, then for good with grace 0', async () => {
    const clock = new FakeClock();
    const client = new FakeKubeClient({ clock });
    const created = await client.create(pods, boundPod('p'));
    await client.delete(pods, 'p');
    const terminating = await client.get<Pod>(pods, 'p');
    assert.equal(terminating.metadata?.deletionGracePeriodSeconds, 30);
    assert.equal(terminating.metadata.deletionTimestamp, '2026-01-01T00:00:30Z');
    await client.delete(pods, 'p', {
      gracePeriodSeconds: 0,
      preconditions: { uid: created.metadata?.uid ?? '' },
    });
    await assert.rejects(client.get(pods, 'p'), isNotFound);
  });

  test('an unbound pod goes at once; finalizers hold an object until removed', async () => {
    const client = new FakeKubeClient();
    await client.create(pods, { metadata: { name: 'p' }, spec: { containers: [] } });
    await client.delete(pods, 'p');
    await assert.rejects(client.get(pods, 'p'), isNotFound);
    await client.create(cms, { metadata: { name: 'f', finalizers: ['x/y'] } });
    await client.delete(cms, 'f');
    const held = await client.get<ConfigMap>(cms, 'f');
    assert.ok(held.metadata?.deletionTimestamp !== undefined);
    await client.patch(cms, 'f', { metadata: { finalizers: null } }, 'merge');
    await assert.rejects(client.get(cms, 'f'), isNotFound);
  });

  test('deleting a namespace deletes what is in it; creates need it when required', async () => {
    const client = new FakeKubeClient({ requireNamespaces: true });
    await assert.rejects(client.create(cms, cm('a')), isNotFound);
    await client.create(NAMESPACES, { metadata: { name: 'ns' } });
    await client.create(cms, cm('a'));
    await client.delete(NAMESPACES, 'ns');
    assert.deepEqual(client.objects(cms), []);
  });

  test('a patch naming another uid or an old resourceVersion is a Conflict', async () => {
    const client = new FakeKubeClient();
    const created = await client.create(cms, cm('a'));
    await assert.rejects(
      client.patch(cms, 'a', { metadata: { uid: 'other' }, data: { x: '1' } }, 'strategic'),
      isConflict,
    );
    await client.patch(cms, 'a', { data: { x: '1' } }, 'merge');
    await assert.rejects(
      client.patch(
        cms,
        'a',
        { metadata: { resourceVersion: created.metadata?.resourceVersion ?? '' } },
        'merge',
      ),
      isConflict,
    );
  });

  test('generateName makes a unique name; creationTimestamp comes from the clock', async () => {
    const client = new FakeKubeClient({ clock: new FakeClock() });
    const a = await client.create<ConfigMap>(cms, { metadata: { generateName: 'x-' } });
    const b = await client.create<ConfigMap>(cms, { metadata: { generateName: 'x-' } });
    assert.match(a.metadata?.name ?? '', /^x-[0-9a-f]{5}$/);
    assert.notEqual(a.metadata?.name, b.metadata?.name);
    assert.equal(a.metadata?.creationTimestamp, '2026-01-01T00:00:00Z');
  });

  test('a pod scheduled onto the node appears as ADDED to a spec.nodeName watch', async () => {
    const client = new FakeKubeClient();
    const unbound = await client.create<Pod>(pods, {
      metadata: { name: 'p' },
      spec: { containers: [] },
    });
    const iterator = client
      .watch<Pod>(PODS, {
        resourceVersion: client.resourceVersion,
        fieldSelector: 'spec.nodeName=node-1',
      })
      [Symbol.asyncIterator]();
    const pending = next(iterator);
    await client.update(pods, 'p', { ...unbound, spec: { containers: [], nodeName: 'node-1' } });
    const added = await pending;
    assert.equal(added.type, 'ADDED');
    assert.equal(added.object.spec?.nodeName, 'node-1');
    await iterator.return?.();
  });
});
