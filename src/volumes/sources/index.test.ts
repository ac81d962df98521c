/**
 * ApiVolumeSources end to end on FakeKubeClient: the kube-api-access-xxxxx volume the
 * apiserver injects, the watch-based cache, and volumes that are not content volumes.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Volume } from 'kubernetes-types/core/v1.js';
import { CONFIGMAPS, inNamespace } from '../../kube/types.ts';
import { FakeClock } from '../../util/clock.ts';
import { MemoryLogger } from '../../util/logger.ts';
import { ApiVolumeSources, TokenManager, WatchingObjectCache } from './index.ts';
import { fakeDownward, plain, podWith, TokenFakeClient } from './testing.ts';

const signal = new AbortController().signal;
const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

/** The volume as the apiserver's ServiceAccount admission adds it. */
const kubeApiAccess: Volume = {
  name: 'kube-api-access-x7k2p',
  projected: {
    defaultMode: 420,
    sources: [
      { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
      { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
      {
        downwardAPI: {
          items: [
            { path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } },
          ],
        },
      },
    ],
  },
};

async function setup() {
  const clock = new FakeClock();
  const kube = new TokenFakeClient(clock);
  const logger = new MemoryLogger();
  await kube.create(inNamespace(CONFIGMAPS, 'ns'), {
    metadata: { name: 'kube-root-ca.crt' },
    data: { 'ca.crt': CA },
  });
  const tokens = new TokenManager({ kube, clock, logger, random: () => 0 });
  const cache = new WatchingObjectCache({ kube, clock, logger });
  const sources = new ApiVolumeSources({ kube, cache, tokens, downward: fakeDownward, logger });
  return { clock, kube, cache, sources, tokens };
}

describe('ApiVolumeSources', () => {
  test('builds the default kube-api-access volume: token, ca.crt, namespace', async () => {
    const { kube, cache, sources } = await setup();
    const pod = podWith({ serviceAccountName: 'default', volumes: [kubeApiAccess] });
    cache.register(pod);
    const resolved = await sources.payload(pod, kubeApiAccess, signal);
    assert.ok(resolved !== undefined);
    assert.equal(resolved.medium, 'memory');
    assert.equal(resolved.plugin, 'kubernetes.io~projected');
    assert.deepEqual(plain(resolved.payload), {
      token: ['token-1', '644'],
      'ca.crt': [CA, '644'],
      namespace: ['ns', '644'],
    });
    const request = kube.tokenRequests[0];
    assert.equal(request?.namespace, 'ns');
    assert.equal(request.body.spec.expirationSeconds, 3607);
    assert.deepEqual(request.body.spec.boundObjectRef, {
      apiVersion: 'v1',
      kind: 'Pod',
      name: 'web',
      uid: 'uid-web',
    });
    // ca.crt came from the per-object watch, not a GET.
    assert.ok(!kube.calls.some((c) => c.verb === 'get'));
    assert.ok(kube.calls.some((c) => c.verb === 'watch' && c.resource === 'configmaps'));
    await cache.stop();
    assert.equal(kube.activeWatches, 0);
  });

  test('a second payload of the same volume reuses the cached token', async () => {
    const { kube, cache, sources } = await setup();
    const pod = podWith({ volumes: [kubeApiAccess] });
    cache.register(pod);
    await sources.payload(pod, kubeApiAccess, signal);
    await sources.payload(pod, kubeApiAccess, signal);
    assert.equal(kube.tokenRequests.length, 1);
    await cache.stop();
  });

  test('is undefined for volumes that are not content volumes', async () => {
    const { cache, sources } = await setup();
    const emptyDir: Volume = { name: 'scratch', emptyDir: {} };
    assert.equal(await sources.payload(podWith({}), emptyDir, signal), undefined);
    await cache.stop();
  });

  test('without a cache every object is read with a GET', async () => {
    const clock = new FakeClock();
    const kube = new TokenFakeClient(clock);
    const logger = new MemoryLogger();
    await kube.create(inNamespace(CONFIGMAPS, 'ns'), { metadata: { name: 'c' }, data: { k: 'v' } });
    const tokens = new TokenManager({ kube, clock, logger });
    const sources = new ApiVolumeSources({ kube, tokens, downward: fakeDownward, logger });
    const resolved = await sources.payload(
      podWith({}),
      { name: 'v', configMap: { name: 'c' } },
      signal,
    );
    assert.deepEqual(plain(resolved?.payload ?? new Map()), { k: ['v', '644'] });
    await assert.rejects(
      sources.payload(podWith({}), { name: 'v', secret: { secretName: 'missing' } }, signal),
      /^VolumeError: secret "missing" not found$/,
    );
    assert.deepEqual(
      kube.calls.filter((c) => c.verb === 'get').map((c) => `${c.resource}/${c.name ?? ''}`),
      ['configmaps/c', 'secrets/missing'],
    );
  });
});
