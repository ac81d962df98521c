/**
 * The contract every `KubeClient` passes: the fake (unit tests) and the real client
 * against a real kube-apiserver (e2e) run this same suite, so behaviour the fake shows
 * in other managers' unit tests is behaviour the apiserver shows too.
 *
 * It works in a namespace of its own, on ConfigMaps (no controller touches them) and
 * on one Pod with a scheduler name nobody serves (so it stays Pending, untouched) for
 * the status subresource and strategic merge of lists.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { ConfigMap, Pod } from 'kubernetes-types/core/v1.js';
import { isAbortError } from '../util/errors.ts';
import {
  CONFIGMAPS,
  inNamespace,
  KubeApiError,
  NAMESPACES,
  PODS,
  SERVICEACCOUNTS,
  isAlreadyExists,
  type KubeClient,
  type ResourcePath,
  type WatchEvent,
} from './types.ts';

/** What a contract factory returns: the client under test and how to clean up after it. */
export interface ContractTarget {
  readonly client: KubeClient;
  /** Called after the suite (stop servers, …); the client is closed by the suite. */
  readonly cleanup?: () => Promise<void>;
}

async function rejectsWith(
  promise: Promise<unknown>,
  status: number,
  reason: KubeApiError['reason'],
): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof KubeApiError, `expected a KubeApiError, got ${String(err)}`);
    assert.equal(err.status, status, err.message);
    assert.equal(err.reason, reason, err.message);
    return true;
  });
}

/** Reads `count` events of a watch (or fewer if it ends), then stops it. */
async function take<T>(events: AsyncIterable<WatchEvent<T>>, count: number) {
  const out: WatchEvent<T>[] = [];
  for await (const event of events) {
    if (event.type === 'BOOKMARK') continue;
    out.push(event);
    if (out.length >= count) break;
  }
  return out;
}

/** The next event of a watch, skipping bookmarks; fails when the watch ends. */
async function next<T>(iterator: AsyncIterator<WatchEvent<T>>): Promise<WatchEvent<T>> {
  for (;;) {
    const r = await iterator.next();
    assert.notEqual(r.done, true, 'the watch ended');
    const event = r.value as WatchEvent<T>;
    if (event.type !== 'BOOKMARK') return event;
  }
}

const nameOf = (o: { metadata?: { name?: string } }): string => o.metadata?.name ?? '';
const rvOf = (o: { metadata?: { resourceVersion?: string } }): string =>
  o.metadata?.resourceVersion ?? '';

/** Registers the contract suite for one implementation. */
export function kubeClientContract(
  name: string,
  factory: () => ContractTarget | Promise<ContractTarget>,
): void {
  describe(`KubeClient contract: ${name}`, () => {
    let target: ContractTarget;
    let client: KubeClient;
    const ns = `berth-contract-${randomBytes(3).toString('hex')}`;
    const cms: ResourcePath = inNamespace(CONFIGMAPS, ns);
    const pods: ResourcePath = inNamespace(PODS, ns);
    let seq = 0;
    const unique = (prefix: string): string => `${prefix}-${++seq}`;
    const configMap = (n: string, data: Record<string, string>, labels?: Record<string, string>) =>
      ({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: n, ...(labels === undefined ? {} : { labels }) },
        data,
      }) satisfies ConfigMap;
    // A guard so a broken watch fails the test instead of hanging it.
    const guard = (): AbortSignal => AbortSignal.timeout(20_000);

    before(async () => {
      target = await factory();
      client = target.client;
      await client.create(NAMESPACES, { metadata: { name: ns } });
      // Pods need the namespace's default ServiceAccount, which a controller may not have made yet.
      try {
        await client.create(inNamespace(SERVICEACCOUNTS, ns), { metadata: { name: 'default' } });
      } catch (err) {
        if (!isAlreadyExists(err)) throw err;
      }
    });

    after(async () => {
      await client.delete(NAMESPACES, ns).catch(() => undefined);
      await client.close();
      await target.cleanup?.();
    });

    test('create fills in uid, resourceVersion and creationTimestamp; get returns the same', async () => {
      const n = unique('create');
      const created = await client.create<ConfigMap>(cms, configMap(n, { a: '1' }));
      assert.equal(created.metadata?.name, n);
      assert.equal(created.metadata.namespace, ns);
      assert.ok((created.metadata.uid ?? '') !== '');
      assert.ok(rvOf(created) !== '');
      assert.ok((created.metadata.creationTimestamp ?? '') !== '');
      const got = await client.get<ConfigMap>(cms, n);
      assert.equal(got.metadata?.uid, created.metadata.uid);
      assert.equal(rvOf(got), rvOf(created));
      assert.deepEqual(got.data, { a: '1' });
    });

    test('creating an existing name is AlreadyExists (409)', async () => {
      const n = unique('exists');
      await client.create(cms, configMap(n, {}));
      await rejectsWith(client.create(cms, configMap(n, {})), 409, 'AlreadyExists');
    });

    test('get, update, patch and delete of a missing object are NotFound (404)', async () => {
      const n = unique('missing');
      await rejectsWith(client.get(cms, n), 404, 'NotFound');
      await rejectsWith(client.update(cms, n, configMap(n, {})), 404, 'NotFound');
      await rejectsWith(client.patch(cms, n, { data: { a: '1' } }, 'merge'), 404, 'NotFound');
      await rejectsWith(client.delete(cms, n), 404, 'NotFound');
    });

    test('list filters by label and field selector and pages with limit and continue', async () => {
      const group = unique('list');
      for (const i of [1, 2, 3]) {
        await client.create(cms, configMap(`${group}-${i}`, {}, { group, odd: String(i % 2) }));
      }
      const all = await client.list<ConfigMap>(cms, { labelSelector: `group=${group}` });
      assert.deepEqual(all.items.map(nameOf).sort(), [`${group}-1`, `${group}-2`, `${group}-3`]);
      assert.ok(all.metadata.resourceVersion !== '');
      const odd = await client.list<ConfigMap>(cms, { labelSelector: `group=${group},odd=1` });
      assert.deepEqual(odd.items.map(nameOf).sort(), [`${group}-1`, `${group}-3`]);
      const byName = await client.list<ConfigMap>(cms, {
        fieldSelector: `metadata.name=${group}-2`,
      });
      assert.deepEqual(byName.items.map(nameOf), [`${group}-2`]);
      const first = await client.list<ConfigMap>(cms, {
        labelSelector: `group=${group}`,
        limit: 2,
      });
      assert.equal(first.items.length, 2);
      assert.ok((first.metadata.continue ?? '') !== '');
      const rest = await client.list<ConfigMap>(cms, {
        labelSelector: `group=${group}`,
        limit: 2,
        continue: first.metadata.continue ?? '',
      });
      assert.deepEqual(
        [...first.items, ...rest.items].map(nameOf).sort(),
        all.items.map(nameOf).sort(),
      );
      assert.ok((rest.metadata.continue ?? '') === '');
    });

    test('update with a stale resourceVersion is Conflict (409); a no-op keeps it', async () => {
      const n = unique('update');
      const created = await client.create<ConfigMap>(cms, configMap(n, { a: '1' }));
      const updated = await client.update<ConfigMap>(cms, n, { ...created, data: { a: '2' } });
      assert.deepEqual(updated.data, { a: '2' });
      assert.notEqual(rvOf(updated), rvOf(created));
      await rejectsWith(client.update(cms, n, { ...created, data: { a: '3' } }), 409, 'Conflict');
      const same = await client.update<ConfigMap>(cms, n, updated);
      assert.equal(rvOf(same), rvOf(updated));
    });

    test('merge, strategic, json and apply patches', async () => {
      const n = unique('patch');
      await client.create(cms, configMap(n, { a: '1', b: '2' }));
      const merged = await client.patch<ConfigMap>(cms, n, { data: { b: null, c: '3' } }, 'merge');
      assert.deepEqual(merged.data, { a: '1', c: '3' });
      const strategic = await client.patch<ConfigMap>(
        cms,
        n,
        { metadata: { labels: { x: 'y' } }, data: { a: '9' } },
        'strategic',
      );
      assert.deepEqual(strategic.data, { a: '9', c: '3' });
      assert.deepEqual(strategic.metadata?.labels, { x: 'y' });
      const json = await client.patch<ConfigMap>(
        cms,
        n,
        [{ op: 'add', path: '/data/d', value: '4' }],
        'json',
      );
      assert.deepEqual(json.data, { a: '9', c: '3', d: '4' });
      const applied = await client.patch<ConfigMap>(
        cms,
        n,
        { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: n }, data: { e: '5' } },
        'apply',
        { fieldManager: 'berth-contract', force: true },
      );
      assert.equal(applied.data?.['e'], '5');
      assert.equal(applied.data['a'], '9');
      const fresh = unique('apply');
      const created = await client.patch<ConfigMap>(
        cms,
        fresh,
        { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: fresh }, data: { f: '6' } },
        'apply',
        { fieldManager: 'berth-contract' },
      );
      assert.deepEqual(created.data, { f: '6' });
      await assert.rejects(client.patch(cms, n, { data: {} }, 'apply'));
    });

    test('status subresource writes only status; strategic patch merges lists by key', async () => {
      const n = unique('pod');
      const pod: Pod = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: n },
        spec: {
          schedulerName: 'berth-contract-nobody',
          automountServiceAccountToken: false,
          containers: [{ name: 'c', image: 'berth.local/none:1', command: ['sleep', '1'] }],
        },
      };
      await client.create(pods, pod);
      const withStatus = await client.patch<Pod>(
        pods,
        n,
        { status: { message: 'from-status' } },
        'merge',
        { subresource: 'status' },
      );
      assert.equal(withStatus.status?.message, 'from-status');
      const current = await client.get<Pod>(pods, n);
      const main = await client.update<Pod>(pods, n, {
        ...current,
        metadata: { ...current.metadata, labels: { via: 'main' } },
        status: { ...current.status, message: 'from-main' },
      });
      assert.equal(main.metadata?.labels?.['via'], 'main');
      assert.equal(main.status?.message, 'from-status');
      const viaStatus = await client.update<Pod>(
        pods,
        n,
        {
          ...main,
          spec: {
            ...main.spec,
            containers: main.spec?.containers ?? [],
            activeDeadlineSeconds: 60,
          },
          status: { ...main.status, message: 'second' },
        },
        { subresource: 'status' },
      );
      assert.equal(viaStatus.status?.message, 'second');
      assert.equal(viaStatus.spec?.activeDeadlineSeconds, undefined);
      const patched = await client.patch<Pod>(
        pods,
        n,
        { spec: { containers: [{ name: 'c', image: 'berth.local/none:2' }] } },
        'strategic',
      );
      assert.equal(patched.spec?.containers[0]?.image, 'berth.local/none:2');
      assert.deepEqual(patched.spec.containers[0].command, ['sleep', '1']);
    });

    test('delete checks uid and resourceVersion preconditions', async () => {
      const n = unique('delete');
      const created = await client.create<ConfigMap>(cms, configMap(n, {}));
      const uid = created.metadata?.uid ?? '';
      await rejectsWith(
        client.delete(cms, n, { preconditions: { uid: '00000000-0000-0000-0000-000000000000' } }),
        409,
        'Conflict',
      );
      await rejectsWith(
        client.delete(cms, n, { preconditions: { resourceVersion: '1' } }),
        409,
        'Conflict',
      );
      await client.delete(cms, n, { preconditions: { uid, resourceVersion: rvOf(created) } });
      await rejectsWith(client.get(cms, n), 404, 'NotFound');
    });

    test('watch from a resourceVersion sees ADDED, MODIFIED, DELETED in order', async () => {
      const n = unique('watch');
      const from = (await client.list(cms)).metadata.resourceVersion;
      const created = await client.create<ConfigMap>(cms, configMap(n, { a: '1' }));
      await client.update(cms, n, { ...created, data: { a: '2' } });
      await client.delete(cms, n);
      const events = await take(
        client.watch<ConfigMap>(cms, {
          resourceVersion: from,
          fieldSelector: `metadata.name=${n}`,
          allowWatchBookmarks: true,
          timeoutSeconds: 30,
          signal: guard(),
        }),
        3,
      );
      assert.deepEqual(
        events.map((e) => e.type),
        ['ADDED', 'MODIFIED', 'DELETED'],
      );
      assert.deepEqual(events[1]?.object.data, { a: '2' });
      const rvs = events.map((e) => Number(rvOf(e.object)));
      assert.ok(
        rvs.every((rv, i) => i === 0 || rv > (rvs[i - 1] ?? 0)),
        rvs.join(','),
      );
    });

    test('a live watch sees a new object, and one leaving the selector as DELETED', async () => {
      const n = unique('live');
      const from = (await client.list(cms)).metadata.resourceVersion;
      const events = client.watch<ConfigMap>(cms, {
        resourceVersion: from,
        labelSelector: `live=${n}`,
        timeoutSeconds: 30,
        signal: guard(),
      });
      const iterator = events[Symbol.asyncIterator]();
      const first = next(iterator);
      const created = await client.create<ConfigMap>(cms, configMap(n, {}, { live: n }));
      assert.equal((await first).type, 'ADDED');
      await client.update(cms, n, { ...created, metadata: { ...created.metadata, labels: {} } });
      const left = await next(iterator);
      assert.equal(left.type, 'DELETED');
      assert.equal(nameOf(left.object), n);
      await iterator.return?.();
    });

    test('an aborted watch ends quietly; an aborted request rejects with the abort reason', async () => {
      const n = unique('abort');
      await client.create(cms, configMap(n, {}));
      const controller = new AbortController();
      const events = client.watch<ConfigMap>(cms, {
        fieldSelector: `metadata.name=${n}`,
        allowWatchBookmarks: true,
        signal: controller.signal,
      });
      const iterator = events[Symbol.asyncIterator]();
      assert.equal((await next(iterator)).type, 'ADDED');
      controller.abort();
      // A bookmark already on its way may still arrive; then the iteration ends.
      const rest: string[] = [];
      for (let r = await iterator.next(); r.done !== true; r = await iterator.next()) {
        rest.push(r.value.type);
      }
      assert.ok(
        rest.every((t) => t === 'BOOKMARK'),
        rest.join(','),
      );
      await assert.rejects(client.get(cms, n, { signal: AbortSignal.abort() }), isAbortError);
    });
  });
}
