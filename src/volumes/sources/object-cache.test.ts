/**
 * The watch-based object cache on FakeKubeClient and a FakeClock: one watch per
 * referenced object, reference counting across pods, change notifications, the
 * first-sync wait with GET fallback, and no watch left after unregister or stop.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ConfigMap, Secret } from 'kubernetes-types/core/v1.js';
import { FakeKubeClient } from '../../kube/fake-client.ts';
import { CONFIGMAPS, inNamespace, KubeApiError, SECRETS } from '../../kube/types.ts';
import { FakeClock } from '../../util/clock.ts';
import { MemoryLogger } from '../../util/logger.ts';
import { WatchingObjectCache } from './object-cache.ts';
import { podObjectRefs } from './pod-refs.ts';
import { podWith } from './testing.ts';

const cms = inNamespace(CONFIGMAPS, 'ns');
const secrets = inNamespace(SECRETS, 'ns');
const signal = new AbortController().signal;

/** Lets the watch loops run until `condition` holds (no real time passes). */
async function until(what: string, condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (condition()) return;
    await new Promise((r) => setImmediate(r));
  }
  assert.fail(`timed out waiting for ${what}`);
}

async function setup() {
  const clock = new FakeClock();
  const kube = new FakeKubeClient({ clock });
  await kube.create<ConfigMap>(cms, { metadata: { name: 'cfg' }, data: { k: '1' } });
  await kube.create<ConfigMap>(cms, { metadata: { name: 'other' }, data: { k: '1' } });
  await kube.create<Secret>(secrets, { metadata: { name: 'sec' }, data: {} });
  const cache = new WatchingObjectCache({
    kube,
    clock,
    logger: new MemoryLogger(),
    random: () => 0,
  });
  const changes: string[] = [];
  cache.onChange((kind, ns, name) => {
    changes.push(`${kind}/${ns}/${name}`);
  });
  return { clock, kube, cache, changes };
}

const usesCfg = (name: string) =>
  podWith(
    { volumes: [{ name: 'v', configMap: { name: 'cfg' } }], imagePullSecrets: [{ name: 'sec' }] },
    name,
  );
const listsOf = (kube: FakeKubeClient, resource: string) =>
  kube.calls.filter((c) => c.verb === 'list' && c.resource === resource).length;

describe('WatchingObjectCache', () => {
  test('watches each referenced object and serves it without a GET', async () => {
    const { kube, cache } = await setup();
    cache.register(usesCfg('a'));
    assert.equal(cache.watches, 2);
    const got = await cache.get('configmap', 'ns', 'cfg', signal);
    assert.deepEqual(got?.data, { k: '1' });
    assert.equal((await cache.get('secret', 'ns', 'sec', signal))?.metadata?.name, 'sec');
    assert.ok(!kube.calls.some((c) => c.verb === 'get'));
    await until('two watches', () => kube.activeWatches === 2);
    await cache.stop();
  });

  test('reports changes and deletions of watched objects only', async () => {
    const { kube, cache, changes } = await setup();
    cache.register(usesCfg('a'));
    await until('watches', () => kube.activeWatches === 2);
    await kube.patch(cms, 'other', { data: { k: '2' } }, 'merge');
    await kube.patch(cms, 'cfg', { data: { k: '2' } }, 'merge');
    await until('a change', () => changes.length === 1);
    assert.deepEqual(changes, ['configmap/ns/cfg']);
    assert.deepEqual((await cache.get('configmap', 'ns', 'cfg', signal))?.data, { k: '2' });
    await kube.delete(cms, 'cfg');
    await until('the deletion', () => changes.length === 2);
    assert.equal(await cache.get('configmap', 'ns', 'cfg', signal), undefined);
    await cache.stop();
  });

  test('an object shared by pods is watched once and until its last pod goes', async () => {
    const { kube, cache } = await setup();
    cache.register(usesCfg('a'));
    cache.register(usesCfg('b'));
    assert.equal(cache.watches, 2);
    await until('watches', () => kube.activeWatches === 2);
    cache.unregister('uid-a');
    assert.equal(cache.watches, 2);
    cache.unregister('uid-b');
    cache.unregister('uid-b');
    assert.equal(cache.watches, 0);
    await until('watches closed', () => kube.activeWatches === 0);
    await cache.stop();
  });

  test('re-registering a changed pod keeps shared watches and drops stale ones', async () => {
    const { kube, cache } = await setup();
    cache.register(usesCfg('a'));
    await until('watches', () => kube.activeWatches === 2);
    const changed = podWith(
      {
        volumes: [{ name: 'v', configMap: { name: 'cfg' } }],
        containers: [{ name: 'c', envFrom: [{ configMapRef: { name: 'other' } }] }],
      },
      'a',
    );
    cache.register(changed);
    assert.equal(cache.watches, 2);
    await until(
      'secret watch closed',
      () => kube.activeWatches === 2 && listsOf(kube, 'configmaps') === 2,
    );
    // cfg was listed once (not restarted), other once; the secret watch is gone.
    assert.equal(listsOf(kube, 'configmaps'), 2);
    assert.equal((await cache.get('configmap', 'ns', 'other', signal))?.metadata?.name, 'other');
    await cache.stop();
    assert.equal(kube.activeWatches, 0);
  });

  test('objects no pod references are read with a GET; missing ones are undefined', async () => {
    const { kube, cache } = await setup();
    assert.equal((await cache.get('configmap', 'ns', 'other', signal))?.metadata?.name, 'other');
    assert.equal(await cache.get('secret', 'ns', 'nope', signal), undefined);
    assert.deepEqual(
      kube.calls.filter((c) => c.verb === 'get').map((c) => c.name),
      ['other', 'nope'],
    );
    kube.failNext({ verb: 'get', error: new KubeApiError(403, 'Forbidden', 'denied') });
    await assert.rejects(cache.get('secret', 'ns', 'sec', signal), /denied/);
  });

  test('waits for the first list up to 1 s, then falls back to a GET', async () => {
    const { clock, kube, cache } = await setup();
    kube.failNext({ verb: 'list', error: new KubeApiError(0, 'Unknown', 'down'), times: 100 });
    cache.register(podWith({ volumes: [{ name: 'v', configMap: { name: 'cfg' } }] }));
    const state: { result?: ConfigMap | undefined; settled: boolean } = { settled: false };
    const pending = cache.get('configmap', 'ns', 'cfg', signal).then((r) => {
      state.result = r;
      state.settled = true;
    });
    await until('the wait', () => clock.pending >= 2);
    assert.equal(state.settled, false);
    await clock.advance(1000);
    await pending;
    assert.equal(state.result?.metadata?.name, 'cfg');
    assert.ok(kube.calls.some((c) => c.verb === 'get' && c.name === 'cfg'));
    await cache.stop();
    assert.equal(clock.pending, 0, 'no sleep left behind');
  });

  test('a caller abort ends the wait with its reason', async () => {
    const { kube, cache } = await setup();
    kube.failNext({ verb: 'list', error: new KubeApiError(0, 'Unknown', 'down'), times: 100 });
    cache.register(podWith({ volumes: [{ name: 'v', configMap: { name: 'cfg' } }] }));
    const controller = new AbortController();
    const pending = cache.get('configmap', 'ns', 'cfg', controller.signal);
    controller.abort(new Error('pod gone'));
    await assert.rejects(pending, /pod gone/);
    await cache.stop();
  });

  test('an immutable object is served from the cache without keeping its watch', async () => {
    const { kube, cache } = await setup();
    await kube.create<ConfigMap>(cms, {
      metadata: { name: 'frozen' },
      data: { k: 'v' },
      immutable: true,
    });
    cache.register(podWith({ volumes: [{ name: 'v', configMap: { name: 'frozen' } }] }));
    assert.deepEqual((await cache.get('configmap', 'ns', 'frozen', signal))?.data, { k: 'v' });
    await until(
      'the watch closed',
      () => kube.activeWatches === 0 && listsOf(kube, 'configmaps') === 1,
    );
    assert.ok(!kube.calls.some((c) => c.verb === 'get'));
    assert.equal(cache.watches, 1);
    await cache.stop();
  });

  test('stop ends every watch and refuses new registrations', async () => {
    const { kube, cache } = await setup();
    cache.register(usesCfg('a'));
    await until('watches', () => kube.activeWatches === 2);
    await cache.stop();
    await cache.stop();
    assert.equal(kube.activeWatches, 0);
    assert.equal(cache.watches, 0);
    assert.throws(() => {
      cache.register(usesCfg('b'));
    }, /stopped/);
  });
});

test('podObjectRefs finds env, envFrom, volumes, projected, pull secrets, CSI', () => {
  const refs = podObjectRefs(
    podWith({
      initContainers: [
        {
          name: 'i',
          env: [{ name: 'E', valueFrom: { configMapKeyRef: { name: 'cm-env', key: 'k' } } }],
        },
      ],
      containers: [
        {
          name: 'c',
          envFrom: [{ secretRef: { name: 's-from' } }, { configMapRef: { name: 'cm-from' } }],
          env: [{ name: 'S', valueFrom: { secretKeyRef: { name: 's-env', key: 'k' } } }],
        },
      ],
      imagePullSecrets: [{ name: 'pull' }],
      volumes: [
        { name: 'a', configMap: { name: 'cm-vol' } },
        { name: 'b', secret: { secretName: 's-vol' } },
        {
          name: 'c',
          projected: {
            sources: [{ configMap: { name: 'cm-proj' } }, { secret: { name: 's-proj' } }],
          },
        },
        { name: 'd', csi: { driver: 'x', nodePublishSecretRef: { name: 's-csi' } } },
      ],
    }),
  );
  assert.deepEqual([...refs.configMaps].sort(), ['cm-env', 'cm-from', 'cm-proj', 'cm-vol']);
  assert.deepEqual([...refs.secrets].sort(), [
    'pull',
    's-csi',
    's-env',
    's-from',
    's-proj',
    's-vol',
  ]);
});
