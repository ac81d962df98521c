import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { verifyRunAsNonRoot } from './security.ts';

const c = (sc?: Container['securityContext']): Container => ({
  name: 'main',
  image: 'x',
  ...(sc !== undefined && { securityContext: sc }),
});
const pod = (sc?: NonNullable<Pod['spec']>['securityContext']): Pod => ({
  metadata: { name: 'p', namespace: 'ns', uid: 'u1' },
  spec: { containers: [], ...(sc !== undefined && { securityContext: sc }) },
});

test('without runAsNonRoot anything goes', () => {
  verifyRunAsNonRoot(pod(), c(), { uid: 0 });
});

test('runAsUser 0 breaks the policy; another runAsUser satisfies it whatever the image', () => {
  assert.throws(
    () => {
      verifyRunAsNonRoot(pod({ runAsNonRoot: true }), c({ runAsUser: 0 }), {});
    },
    {
      message: `container's runAsUser breaks non-root policy (pod: "p_ns(u1)", container: main)`,
    },
  );
  verifyRunAsNonRoot(pod({ runAsNonRoot: true, runAsUser: 1000 }), c(), { uid: 0 });
});

test('the image user decides otherwise: root, non-numeric and out of range are refused', () => {
  const p = pod();
  const nonRoot = c({ runAsNonRoot: true });
  assert.throws(() => {
    verifyRunAsNonRoot(p, nonRoot, { uid: 0 });
  }, /image will run as root/);
  assert.throws(() => {
    verifyRunAsNonRoot(p, nonRoot, { username: 'nobody' });
  }, /image has non-numeric user \(nobody\), cannot verify user is non-root/);
  assert.throws(() => {
    verifyRunAsNonRoot(p, nonRoot, { uid: 2 ** 32 });
  }, /invalid user id/);
  verifyRunAsNonRoot(p, nonRoot, { uid: 65534 });
  // The container's false overrides the pod's true.
  verifyRunAsNonRoot(pod({ runAsNonRoot: true }), c({ runAsNonRoot: false }), { uid: 0 });
});
