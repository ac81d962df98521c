import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Node, Pod, PodStatus } from 'kubernetes-types/core/v1.js';
import { MemoryEventRecorder } from '../events/types.ts';
import { MemoryLogger } from '../util/logger.ts';
import { AdmissionManager } from './manager.ts';

const node: Node = {
  metadata: { name: 'n1', labels: {} },
  status: { allocatable: { cpu: '1', memory: '1Gi', pods: '10' } },
};

function pod(name: string, cpu: string, phase?: string): Pod {
  return {
    metadata: { name, namespace: 'ns', uid: `uid-${name}` },
    spec: { containers: [{ name: 'c', image: 'x', resources: { requests: { cpu } } }] },
    ...(phase !== undefined && { status: { phase } }),
  };
}

function setup(pods: Pod[]) {
  const recorder = new MemoryEventRecorder();
  const statuses = new Map<string, PodStatus>();
  const byUid = new Map(pods.map((p) => [p.metadata?.uid ?? '', p]));
  const admission = new AdmissionManager({
    node: () => node,
    pods: () => byUid,
    phase: (uid) => statuses.get(uid)?.phase,
    setStatus: (p, s) => statuses.set(p.metadata?.uid ?? '', s),
    recorder,
    logger: new MemoryLogger(),
  });
  return { admission, recorder, statuses };
}

test('the second pod that does not fit is rejected with event and Failed status; the decision sticks', () => {
  const a = pod('a', '800m');
  const b = pod('b', '500m');
  const { admission, recorder, statuses } = setup([a, b]);
  assert.equal(admission.admit(a), true);
  assert.equal(admission.admit(b), false);
  assert.deepEqual(recorder.reasons(), ['OutOfcpu']);
  const s = statuses.get('uid-b');
  assert.equal(s?.phase, 'Failed');
  assert.equal(s.reason, 'OutOfcpu');
  assert.match(s.message ?? '', /^Pod was rejected: Node didn't have enough resource: cpu/);
  assert.equal(s.qosClass, 'Burstable');
  // Asked again (an update), the answer is the same and no new event is sent.
  assert.equal(admission.admit(b), false);
  assert.equal(admission.admit(a), true);
  assert.equal(recorder.events.length, 1);
  assert.equal(admission.isRejected('uid-b'), true);
});

test('a terminal pod frees its resources; a pod already terminal is not re-admitted', () => {
  const a = pod('a', '800m');
  const b = pod('b', '500m');
  const { admission, statuses } = setup([a, b]);
  assert.equal(admission.admit(a), true);
  statuses.set('uid-a', { phase: 'Succeeded' });
  assert.equal(admission.admit(b), true);
  const done = pod('old', '5', 'Failed');
  assert.equal(admission.admit(done), true, 'an ended pod is only reported, never checked');
});

test('forget clears a rejection (the object is gone)', () => {
  const big = pod('big', '2');
  const { admission } = setup([big]);
  assert.equal(admission.admit(big), false);
  admission.forget('uid-big');
  assert.equal(admission.isRejected('uid-big'), false);
});
