/**
 * projected volumes: merged sources, per-source optional, aggregated errors, conflicting
 * paths, tokens (mode with fsGroup), clusterTrustBundle (off, by name, by signer, modes).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod, Volume } from 'kubernetes-types/core/v1.js';
import { FakeClock } from '../../util/clock.ts';
import { MemoryLogger } from '../../util/logger.ts';
import { VolumeError } from '../types.ts';
import { podServiceAccount, resolveProjectedVolume, type ProjectedDeps } from './projected.ts';
import { TokenManager } from './token-manager.ts';
import { fakeDownward, MapObjectReader, plain, podWith, TokenFakeClient } from './testing.ts';

const signal = new AbortController().signal;

function deps(): ProjectedDeps & { kube: TokenFakeClient; objects: MapObjectReader } {
  const clock = new FakeClock();
  const kube = new TokenFakeClient(clock);
  const objects = new MapObjectReader()
    .set('configmap', 'ns', { metadata: { name: 'cfg' }, data: { a: 'A', b: 'B' } })
    .set('secret', 'ns', {
      metadata: { name: 'sec' },
      data: { s: Buffer.from('S').toString('base64') },
    });
  const tokens = new TokenManager({ kube, clock, logger: new MemoryLogger(), random: () => 0 });
  return { kube, objects, tokens, downward: fakeDownward };
}

const volume = (
  sources: NonNullable<NonNullable<Volume['projected']>['sources']>,
  defaultMode?: number,
): Volume => ({
  name: 'all',
  projected: { sources, ...(defaultMode === undefined ? {} : { defaultMode }) },
});

async function resolve(pod: Pod, v: Volume, d: ProjectedDeps) {
  assert.ok(v.projected !== undefined);
  return resolveProjectedVolume(pod, v, v.projected, d, signal);
}

describe('resolveProjectedVolume', () => {
  test('merges configMap, secret, downwardAPI and token sources on tmpfs', async () => {
    const d = deps();
    const v = volume(
      [
        { configMap: { name: 'cfg', items: [{ key: 'a', path: 'cfg/a' }] } },
        { secret: { name: 'sec', items: [{ key: 's', path: 'sec/s', mode: 0o400 }] } },
        { downwardAPI: { items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }] } },
        { serviceAccountToken: { path: 'token', audience: 'vault', expirationSeconds: 7200 } },
      ],
      0o440,
    );
    const resolved = await resolve(podWith({ serviceAccountName: 'builder' }), v, d);
    assert.equal(resolved.medium, 'memory');
    assert.equal(resolved.plugin, 'kubernetes.io~projected');
    assert.deepEqual(plain(resolved.payload), {
      'cfg/a': ['A', '440'],
      'sec/s': ['S', '400'],
      name: ['web', '440'],
      token: ['token-1', '440'],
    });
    const spec = d.kube.tokenRequests[0]?.body.spec;
    assert.equal(d.kube.tokenRequests[0]?.serviceAccount, 'builder');
    assert.deepEqual(spec?.audiences, ['vault']);
    assert.equal(spec.expirationSeconds, 7200);
  });

  test('token defaults: the default service account, 3600 s, the apiserver audience', async () => {
    const d = deps();
    await resolve(podWith({}), volume([{ serviceAccountToken: { path: 't' } }]), d);
    const request = d.kube.tokenRequests[0];
    assert.equal(request?.serviceAccount, 'default');
    assert.deepEqual(request.body.spec.audiences, []);
    assert.equal(request.body.spec.expirationSeconds, 3600);
  });

  test('with an fsGroup the token starts 0600 (ownership adds group read later)', async () => {
    const d = deps();
    const pod = podWith({ securityContext: { fsGroup: 2000 } });
    const resolved = await resolve(pod, volume([{ serviceAccountToken: { path: 't' } }], 0o644), d);
    assert.equal(resolved.payload.get('t')?.mode, 0o600);
  });

  test('an optional missing source adds nothing; other failures are aggregated', async () => {
    const d = deps();
    const ok = await resolve(
      podWith({}),
      volume([{ configMap: { name: 'gone', optional: true } }, { secret: { name: 'sec' } }]),
      d,
    );
    assert.deepEqual(Object.keys(plain(ok.payload)), ['s']);
    await assert.rejects(
      resolve(
        podWith({}),
        volume([
          { configMap: { name: 'gone' } },
          { secret: { name: 'nope' } },
          { secret: { name: 'sec' } },
        ]),
        d,
      ),
      (err: unknown) =>
        err instanceof VolumeError &&
        err.code === 'BERTH_VOLUME_SOURCE_NOT_FOUND' &&
        err.message === '[configmap "gone" not found, secret "nope" not found]',
    );
  });

  test('two sources writing the same path, or a file under another file, conflict', async () => {
    const d = deps();
    for (const sources of [
      [
        { configMap: { name: 'cfg' } },
        { configMap: { name: 'cfg', items: [{ key: 'b', path: 'a' }] } },
      ],
      [
        { configMap: { name: 'cfg', items: [{ key: 'a', path: 'x' }] } },
        { secret: { name: 'sec', items: [{ key: 's', path: 'x/s' }] } },
      ],
    ]) {
      await assert.rejects(
        resolve(podWith({}), volume(sources), d),
        (err: unknown) =>
          err instanceof VolumeError &&
          err.code === 'BERTH_VOLUME_INVALID' &&
          /conflicting duplicate paths/.test(err.message),
      );
    }
  });

  test('clusterTrustBundle: off without a source, by name or signer, 0600 with fsGroup', async () => {
    const off = deps();
    await assert.rejects(
      resolve(podWith({}), volume([{ clusterTrustBundle: { name: 'b', path: 'ca.pem' } }]), off),
      (err: unknown) =>
        err instanceof VolumeError &&
        err.message === 'ClusterTrustBundle projection is not supported in static kubelet mode',
    );
    const asked: string[] = [];
    const d: ProjectedDeps = {
      ...deps(),
      trustBundles: {
        byName: (name, allowMissing) => {
          asked.push(`name:${name}:${String(allowMissing)}`);
          return Promise.resolve(Buffer.from('PEM-A'));
        },
        bySigner: (signer, selector, allowMissing) => {
          asked.push(`signer:${signer}:${JSON.stringify(selector)}:${String(allowMissing)}`);
          return Promise.resolve(Buffer.from('PEM-B'));
        },
      },
    };
    const got = await resolve(
      podWith({}),
      volume(
        [
          { clusterTrustBundle: { name: 'b', path: 'a.pem' } },
          {
            clusterTrustBundle: {
              signerName: 'example.com/s',
              labelSelector: {},
              optional: true,
              path: 'dir/b.pem',
            },
          },
        ],
        0o440,
      ),
      d,
    );
    assert.deepEqual(
      plain(got.payload),
      plain(
        new Map([
          ['a.pem', { data: Buffer.from('PEM-A'), mode: 0o440 }],
          ['dir/b.pem', { data: Buffer.from('PEM-B'), mode: 0o440 }],
        ]),
      ),
    );
    assert.deepEqual(asked, ['name:b:false', 'signer:example.com/s:{}:true']);
    const withGroup = await resolve(
      podWith({ securityContext: { fsGroup: 5 } }),
      volume([{ clusterTrustBundle: { name: 'b', path: 'a.pem' } }]),
      d,
    );
    assert.equal(withGroup.payload.get('a.pem')?.mode, 0o600);
    await assert.rejects(
      resolve(podWith({}), volume([{ clusterTrustBundle: { path: 'x.pem' } }]), d),
      /requires either name or signerName to be set/,
    );
    await assert.rejects(
      resolve(podWith({}), volume([{ clusterTrustBundle: { name: 'b', path: '../x' } }]), d),
      (err: unknown) => err instanceof VolumeError && err.code === 'BERTH_VOLUME_PATH_ESCAPE',
    );
  });

  test('an escaping token path is refused', async () => {
    const d = deps();
    await assert.rejects(
      resolve(podWith({}), volume([{ serviceAccountToken: { path: '../token' } }]), d),
      (err: unknown) => err instanceof VolumeError && err.code === 'BERTH_VOLUME_PATH_ESCAPE',
    );
    assert.equal(d.kube.tokenRequests.length, 0);
  });
});

test('podServiceAccount falls back to the deprecated field, then "default"', () => {
  assert.equal(podServiceAccount(podWith({ serviceAccount: 'old' })), 'old');
  assert.equal(
    podServiceAccount(podWith({ serviceAccountName: 'new', serviceAccount: 'old' })),
    'new',
  );
  assert.equal(podServiceAccount(podWith({})), 'default');
});
