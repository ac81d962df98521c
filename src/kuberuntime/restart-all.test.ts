import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { runtimeContainer as instance, runtimeStatus as runtime } from '../status/testing.ts';
import { computePodActions } from './plan.ts';
import { fakeBackoff } from './testing.ts';
import { containersToReset } from './restart-all.ts';

const rules = [
  { action: 'RestartAllContainers', exitCodes: { operator: 'In', values: [42] } },
] as const;
const c = (name: string, extra: Record<string, unknown> = {}): Container => ({
  name,
  image: 'busybox:1',
  ...extra,
});
const pod: Pod = {
  metadata: { uid: 'u1', name: 'p', namespace: 'ns' },
  spec: {
    restartPolicy: 'Never',
    initContainers: [
      c('init'),
      c('sidecar', { restartPolicy: 'Always', restartPolicyRules: rules }),
    ],
    containers: [c('source', { restartPolicy: 'Never', restartPolicyRules: rules }), c('regular')],
  },
};

describe('RestartAllContainers plan', () => {
  test('every instance goes: app targets, init targets, then the exits that triggered it; running ones killed', () => {
    const status = runtime([
      instance('init', 'exited'),
      instance('sidecar', 'exited', { exitCode: 42 }),
      instance('sidecar', 'running', { attempt: 1 }),
      instance('source', 'exited', { exitCode: 42 }),
      instance('regular', 'running'),
    ]);
    assert.deepEqual(
      containersToReset(pod, status).map((x) => `${x.id}${x.kill ? ' kill' : ''}`),
      ['regular-0 kill', 'init-0', 'sidecar-1 kill', 'source-0', 'sidecar-0'],
    );
  });

  test('a round restarting all containers only removes them', () => {
    const status = runtime([
      instance('source', 'exited', { exitCode: 42 }),
      instance('regular', 'running'),
    ]);
    const plan = computePodActions({
      pod,
      status,
      now: 0,
      backoff: fakeBackoff({}),
      restartAll: true,
    });
    assert.deepEqual(
      plan.containersToReset.map((x) => x.name),
      ['regular', 'source'],
    );
    assert.deepEqual([...plan.containersToStart, ...plan.initContainersToStart], []);
    assert.equal(plan.killPod, false);
  });
});
