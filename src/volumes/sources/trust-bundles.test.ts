/**
 * ClusterTrustBundles on the fake apiserver: lazy start, version fallback, by name and by
 * signer + selector (nil selects nothing, {} everything), de-duplication, optional,
 * upstream's error texts, the cache dropped and listeners told when a bundle changes.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { FakeKubeClient } from '../../kube/fake-client.ts';
import { KubeApiError, type ResourcePath } from '../../kube/types.ts';
import { FakeClock } from '../../util/clock.ts';
import { MemoryLogger } from '../../util/logger.ts';
import { VolumeError } from '../types.ts';
import {
  pemBlocks,
  pemCertificate,
  selectorRequirements,
  TrustBundleCache,
  type ClusterTrustBundle,
} from './trust-bundles.ts';

const V1: ResourcePath = {
  group: 'certificates.k8s.io',
  version: 'v1',
  resource: 'clustertrustbundles',
};
const V1BETA1: ResourcePath = { ...V1, version: 'v1beta1' };

const pem = (text: string): string => pemCertificate(Buffer.from(text));

function bundle(
  name: string,
  certs: readonly string[],
  signerName?: string,
  labels?: Record<string, string>,
): ClusterTrustBundle {
  return {
    metadata: { name, ...(labels !== undefined && { labels }) },
    spec: { trustBundle: certs.map(pem).join(''), ...(signerName !== undefined && { signerName }) },
  };
}

/** The certificates of a PEM answer, sorted (the order is shuffled on purpose). */
const certs = (data: Buffer): string[] =>
  pemBlocks(data.toString('utf8'))
    .map((d) => d.toString('utf8'))
    .sort();

const running: AbortController[] = [];
afterEach(() => {
  for (const c of running.splice(0)) c.abort();
});

function setup(kube = new FakeKubeClient()) {
  const clock = new FakeClock();
  const cache = new TrustBundleCache({ kube, clock, logger: new MemoryLogger() });
  const stop = new AbortController();
  running.push(stop);
  const done = cache.run(stop.signal);
  return { kube, clock, cache, stop, done };
}

const signal = new AbortController().signal;

describe('TrustBundleCache', () => {
  test('lists nothing until a pod asks, then serves a bundle by name', async () => {
    const kube = new FakeKubeClient();
    await kube.create(V1, bundle('ca', ['one', 'two', 'one']));
    const { cache } = setup(kube);
    await Promise.resolve();
    assert.equal(
      kube.calls.filter((c) => c.verb === 'list').length,
      0,
      'no list before the first request',
    );
    assert.deepEqual(certs(await cache.byName('ca', false, signal)), ['one', 'two']);
    await assert.rejects(
      cache.byName('missing', false, signal),
      (err: unknown) =>
        err instanceof VolumeError &&
        err.message ===
          'while getting ClusterTrustBundle: clustertrustbundle.certificates.k8s.io "missing" not found',
    );
    assert.equal((await cache.byName('missing', true, signal)).length, 0);
  });

  test('falls back to v1beta1 when v1 is not served', async () => {
    const kube = new FakeKubeClient();
    await kube.create(V1BETA1, bundle('ca', ['beta']));
    kube.failNext({
      verb: 'list',
      resource: 'clustertrustbundles',
      error: new KubeApiError(404, 'NotFound', 'the server could not find the requested resource'),
    });
    const { cache } = setup(kube);
    assert.deepEqual(certs(await cache.byName('ca', false, signal)), ['beta']);
  });

  test('no served version: every request gets upstream static-mode text', async () => {
    const kube = new FakeKubeClient();
    const notFound = new KubeApiError(404, 'NotFound', 'not found');
    kube.failNext({ verb: 'list', resource: 'clustertrustbundles', error: notFound, times: 3 });
    const { cache, done } = setup(kube);
    await assert.rejects(cache.byName('ca', false, signal), /not supported in static kubelet mode/);
    await done;
  });

  test('by signer: nil selector matches nothing, {} everything, labels filter', async () => {
    const kube = new FakeKubeClient();
    await kube.create(V1, bundle('a', ['x', 'y'], 'example.com/s', { env: 'prod' }));
    await kube.create(V1, bundle('b', ['y', 'z'], 'example.com/s', { env: 'dev' }));
    await kube.create(V1, bundle('c', ['other'], 'example.com/t'));
    const { cache } = setup(kube);
    await assert.rejects(
      cache.bySigner('example.com/s', undefined, false, signal),
      (err: unknown) =>
        err instanceof VolumeError &&
        err.message ===
          'combination of signerName and labelSelector matched zero ClusterTrustBundles',
    );
    assert.equal((await cache.bySigner('example.com/s', undefined, true, signal)).length, 0);
    assert.deepEqual(certs(await cache.bySigner('example.com/s', {}, false, signal)), [
      'x',
      'y',
      'z',
    ]);
    assert.deepEqual(
      certs(await cache.bySigner('example.com/s', { matchLabels: { env: 'prod' } }, false, signal)),
      ['x', 'y'],
    );
    assert.deepEqual(
      certs(
        await cache.bySigner(
          'example.com/s',
          { matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['prod'] }] },
          false,
          signal,
        ),
      ),
      ['y', 'z'],
    );
  });

  test('a changed bundle is served at once and listeners are told', async () => {
    const kube = new FakeKubeClient();
    await kube.create(V1, bundle('a', ['old'], 'example.com/s'));
    const { cache } = setup(kube);
    const changes: string[] = [];
    cache.onChange((name, signer) => changes.push(`${name}/${signer}`));
    assert.deepEqual(certs(await cache.bySigner('example.com/s', {}, false, signal)), ['old']);
    // The first list is a change too: pods that failed before it are retried.
    assert.deepEqual(changes.splice(0), ['a/example.com/s']);
    const current = await kube.get<ClusterTrustBundle>(V1, 'a');
    await kube.update(V1, 'a', { ...current, spec: { ...current.spec, trustBundle: pem('new') } });
    for (let i = 0; i < 50 && !changes.includes('a/example.com/s'); i++) {
      await new Promise((r) => setImmediate(r));
    }
    assert.ok(changes.includes('a/example.com/s'), `changes: ${changes.join(',')}`);
    assert.deepEqual(certs(await cache.bySigner('example.com/s', {}, false, signal)), ['new']);
  });
});

test('selectorRequirements follows LabelSelectorAsSelector', () => {
  assert.equal(selectorRequirements(undefined), undefined);
  assert.deepEqual(selectorRequirements({}), []);
  assert.throws(
    () => selectorRequirements({ matchExpressions: [{ key: 'k', operator: 'Gt', values: ['1'] }] }),
    /"Gt" is not a valid label selector operator/,
  );
});

test('pemCertificate writes 64-character lines that pemBlocks reads back', () => {
  const der = Buffer.alloc(100, 7);
  const text = pemCertificate(der);
  assert.ok(text.split('\n').every((l) => l.length <= 64));
  assert.deepEqual(pemBlocks(`junk\n${text}more junk`), [der]);
});
