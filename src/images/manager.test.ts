import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Pod, Secret } from 'kubernetes-types/core/v1.js';
import { FakeCriClient } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { Backoff } from '../util/backoff.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { ImageManager } from './manager.ts';

const pod: Pod = { metadata: { uid: 'u1', name: 'p', namespace: 'ns' } };
const target = { kind: 'Pod' as const, namespace: 'ns', name: 'p', uid: 'u1' };

function setup(pullRate?: { qps: number; burst: number }): {
  cri: FakeCriClient;
  recorder: MemoryEventRecorder;
  clock: FakeClock;
  images: ImageManager;
} {
  const clock = new FakeClock();
  const cri = new FakeCriClient({ flavor: 'containerd2', clock });
  const recorder = new MemoryEventRecorder();
  const images = new ImageManager({
    images: cri.image,
    recorder,
    clock,
    logger: new MemoryLogger(),
    backoff: new Backoff(clock, { initialMs: 10_000, maxMs: 300_000, resetAfterMs: 600_000 }),
    maxParallelPulls: 1,
    ...(pullRate !== undefined && { pullRate }),
  });
  return { cri, recorder, clock, images };
}

const container = (image: string, imagePullPolicy?: Container['imagePullPolicy']): Container => ({
  name: 'main',
  image,
  ...(imagePullPolicy !== undefined && { imagePullPolicy }),
});

describe('ImageManager', () => {
  test('IfNotPresent with the image present: no pull, a Pulled "already present" event', async () => {
    const { cri, recorder, images } = setup();
    cri.addImage('reg.local/app:1', { preloaded: true });
    const r = await images.ensureImage(
      pod,
      container('reg.local/app:1', 'IfNotPresent'),
      [],
      undefined,
      target,
      new AbortController().signal,
    );
    assert.equal(r.ok, true);
    assert.equal(cri.callsTo('ImageService/PullImage').length, 0);
    assert.match(recorder.events[0]?.message ?? '', /already present on machine/);
  });

  test('Never without the image: ErrImageNeverPull with the upstream message', async () => {
    const { recorder, images } = setup();
    const r = await images.ensureImage(
      pod,
      container('reg.local/absent:1', 'Never'),
      [],
      undefined,
      target,
      new AbortController().signal,
    );
    assert.deepEqual(r.ok ? undefined : r.reason, 'ErrImageNeverPull');
    assert.deepEqual(recorder.reasons(), ['ErrImageNeverPull']);
    assert.match(r.ok ? '' : r.message, /is not present with pull policy of Never/);
  });

  test('no tag means :latest and Always: the image is pulled even when present', async () => {
    const { cri, recorder, images } = setup();
    cri.addImage('reg.local/app:latest', { preloaded: true });
    const r = await images.ensureImage(
      pod,
      container('reg.local/app'),
      [],
      undefined,
      target,
      new AbortController().signal,
    );
    assert.equal(r.ok && r.image, 'reg.local/app:latest');
    assert.equal(cri.callsTo('ImageService/PullImage').length, 1);
    assert.deepEqual(recorder.reasons(), ['Pulling', 'Pulled']);
    assert.match(
      recorder.events[1]?.message ?? '',
      /Successfully pulled image "reg.local\/app" in [\d.]+s/,
    );
  });

  test('a failed pull is ErrImagePull, then ImagePullBackOff until the back-off (10 s) passes', async () => {
    const { clock, recorder, images } = setup();
    const signal = new AbortController().signal;
    const c = container('reg.local/missing:1', 'IfNotPresent');
    const first = await images.ensureImage(pod, c, [], undefined, target, signal);
    assert.equal(first.ok ? '' : first.reason, 'ErrImagePull');
    assert.ok(
      recorder.events.some((e) => e.reason === 'Failed' && e.message === 'Error: ErrImagePull'),
    );
    const second = await images.ensureImage(pod, c, [], undefined, target, signal);
    assert.equal(second.ok ? '' : second.reason, 'ImagePullBackOff');
    assert.equal(second.ok ? 0 : second.retryAfterMs, 10_000);
    await clock.advance(10_000);
    const third = await images.ensureImage(pod, c, [], undefined, target, signal);
    assert.equal(third.ok ? '' : third.reason, 'ErrImagePull');
  });

  test('pull secrets for the image registry are passed as CRI auth', async () => {
    const { cri, images } = setup();
    cri.addImage('reg.local:5000/private:1', { credentials: { username: 'u', password: 'p' } });
    const secret: Secret = {
      type: 'kubernetes.io/dockerconfigjson',
      data: {
        '.dockerconfigjson': Buffer.from(
          JSON.stringify({ auths: { 'reg.local:5000': { username: 'u', password: 'p' } } }),
        ).toString('base64'),
      },
    };
    const signal = new AbortController().signal;
    const without = await images.ensureImage(
      pod,
      container('reg.local:5000/private:1', 'Always'),
      [],
      undefined,
      target,
      signal,
    );
    assert.equal(without.ok, false);
    const other: Pod = { metadata: { uid: 'u2', name: 'q', namespace: 'ns' } };
    const withSecret = await images.ensureImage(
      other,
      container('reg.local:5000/private:1', 'Always'),
      [secret],
      undefined,
      target,
      signal,
    );
    assert.equal(withSecret.ok, true);
  });

  test('an invalid reference is InvalidImageName with an InspectFailed event', async () => {
    const { recorder, images } = setup();
    const r = await images.ensureImage(
      pod,
      container('Bad//Name:::'),
      [],
      undefined,
      target,
      new AbortController().signal,
    );
    assert.equal(r.ok ? '' : r.reason, 'InvalidImageName');
    assert.deepEqual(recorder.reasons(), ['InspectFailed']);
  });

  test('registryPullQPS / registryBurst: a pull over the rate fails as upstream ("pull QPS exceeded") without reaching the runtime', async () => {
    const { cri, clock, recorder, images } = setup({ qps: 1, burst: 2 });
    const signal = new AbortController().signal;
    for (const name of ['a', 'b', 'c', 'd'])
      cri.addImage(`reg.local/${name}:1`, { preloaded: false });
    const pull = (name: string) =>
      images.ensureImage(pod, container(`reg.local/${name}:1`), [], undefined, target, signal);
    assert.equal((await pull('a')).ok, true);
    assert.equal((await pull('b')).ok, true);
    const third = await pull('c');
    assert.equal(third.ok ? '' : third.reason, 'ErrImagePull');
    const message = third.ok ? '' : third.message;
    assert.equal(message, 'Failed to pull image "reg.local/c:1": pull QPS exceeded');
    assert.equal(cri.callsTo('ImageService/PullImage').length, 2);
    assert.ok(recorder.events.some((e) => e.message === message && e.type === 'Warning'));
    // One token back a second later: another image pulls (c itself is in its back-off).
    await clock.advance(1000);
    assert.equal((await pull('d')).ok, true);
    assert.equal(cri.callsTo('ImageService/PullImage').length, 3);
  });

  test('registryPullQPS 0 does not throttle', async () => {
    const { cri, images } = setup({ qps: 0, burst: 1 });
    const signal = new AbortController().signal;
    for (const name of ['a', 'b', 'c']) {
      cri.addImage(`reg.local/${name}:1`, { preloaded: false });
      const r = await images.ensureImage(
        pod,
        container(`reg.local/${name}:1`),
        [],
        undefined,
        target,
        signal,
      );
      assert.equal(r.ok, true);
    }
    assert.equal(cri.callsTo('ImageService/PullImage').length, 3);
  });
});
