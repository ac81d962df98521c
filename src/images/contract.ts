/**
 * The ImageEnsurer contract: what container start and image volumes rely on. The image
 * manager (over the fake CRI image service, on the fake clock) and FakeImageManager pass
 * it; both run it from contract.test.ts. Credentials, parallel pulls, pull QPS and
 * metrics are the real manager's own behaviour and stay in manager.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import type { MemoryEventRecorder } from '../events/types.ts';
import type { FakeClock } from '../util/clock.ts';
import type { ImageEnsurer } from './types.ts';

export interface ImageContractSubject {
  readonly images: ImageEnsurer;
  readonly recorder: MemoryEventRecorder;
  readonly clock: FakeClock;
  /** The image is on the node. */
  addPresent(ref: string): void;
  /** A pull of the image succeeds (it is not on the node yet). */
  addPullable(ref: string): void;
}

const pod: Pod = { metadata: { uid: 'u1', name: 'p', namespace: 'ns' } };
const target = { kind: 'Pod' as const, namespace: 'ns', name: 'p', uid: 'u1' };
const live = (): AbortSignal => new AbortController().signal;

function container(image: string, imagePullPolicy?: Container['imagePullPolicy']): Container {
  return { name: 'main', image, ...(imagePullPolicy !== undefined && { imagePullPolicy }) };
}

export function imageEnsurerContract(name: string, make: () => ImageContractSubject): void {
  describe(`ImageEnsurer contract: ${name}`, () => {
    const ensure = (s: ImageContractSubject, c: Container, signal = live()) =>
      s.images.ensureImage(pod, c, [], undefined, target, signal);

    test('a present image is used as it is (IfNotPresent, Never)', async () => {
      const s = make();
      s.addPresent('reg.local/app:1');
      for (const policy of ['IfNotPresent', 'Never'] as const) {
        const r = await ensure(s, container('reg.local/app:1', policy));
        assert.ok(r.ok, JSON.stringify(r));
        assert.equal(r.image, 'reg.local/app:1');
        assert.notEqual(r.imageRef, '');
      }
      assert.deepEqual(s.recorder.reasons(), ['Pulled', 'Pulled']);
    });

    test('a missing image is pulled, and then present', async () => {
      const s = make();
      s.addPullable('reg.local/app:2');
      const r = await ensure(s, container('reg.local/app:2'));
      assert.ok(r.ok, JSON.stringify(r));
      assert.deepEqual(s.recorder.reasons(), ['Pulling', 'Pulled']);
      const again = await ensure(s, container('reg.local/app:2', 'Never'));
      assert.ok(again.ok, JSON.stringify(again));
    });

    test('Never without the image, and a bad name, fail with their reasons', async () => {
      const s = make();
      const never = await ensure(s, container('reg.local/absent:1', 'Never'));
      assert.equal(never.ok ? undefined : never.reason, 'ErrImageNeverPull');
      const bad = await ensure(s, container('Not A Name'));
      assert.equal(bad.ok ? undefined : bad.reason, 'InvalidImageName');
      assert.deepEqual(s.recorder.reasons(), ['ErrImageNeverPull', 'InspectFailed']);
    });

    test('a failed pull is ErrImagePull, then ImagePullBackOff until the back-off ends', async () => {
      const s = make();
      const first = await ensure(s, container('reg.local/absent:1'));
      assert.equal(first.ok ? undefined : first.reason, 'ErrImagePull');
      assert.ok(!first.ok && first.retryAfterMs !== undefined && first.retryAfterMs > 0);
      const second = await ensure(s, container('reg.local/absent:1'));
      assert.equal(second.ok ? undefined : second.reason, 'ImagePullBackOff');
      assert.deepEqual(s.recorder.reasons(), ['Pulling', 'Failed', 'Failed', 'BackOff']);
      s.addPullable('reg.local/absent:1');
      await s.clock.advance(10_000);
      const third = await ensure(s, container('reg.local/absent:1'));
      assert.ok(third.ok, JSON.stringify(third));
    });

    test('an aborted signal rejects', async () => {
      const s = make();
      s.addPullable('reg.local/app:3');
      const ac = new AbortController();
      ac.abort(new Error('stop'));
      await assert.rejects(ensure(s, container('reg.local/app:3'), ac.signal));
    });
  });
}
