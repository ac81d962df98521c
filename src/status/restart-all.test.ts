/**
 * RestartAllContainers in the status (upstream's generateAPIPodStatus with
 * RestartAllContainersOnContainerExits): the AllContainersRestarting condition, the
 * removed containers waiting with reason RestartingAllContainers, restart counts and
 * last terminations carried over, and a restartPolicy Never pod that keeps running.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Pod, PodStatus } from 'kubernetes-types/core/v1.js';
import type { RuntimeContainer } from '../container/pod-status.ts';
import { shouldAllContainersRestart } from '../container/restart-policy.ts';
import {
  generateStatus,
  runtimeContainer as instance,
  runtimeStatus as runtime,
} from './testing.ts';
import type { StatusInput } from './generate.ts';

const NOW = new Date('2026-01-01T00:00:10Z');

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
    initContainers: [c('init'), c('sidecar', { restartPolicy: 'Always' })],
    containers: [c('source', { restartPolicy: 'Never', restartPolicyRules: rules }), c('regular')],
  },
  status: { phase: 'Running', conditions: [{ type: 'PodScheduled', status: 'True' }] },
};

function status(containers: RuntimeContainer[], extra: Partial<StatusInput> = {}): PodStatus {
  return generateStatus(pod, containers, NOW, extra);
}

const cond = (s: PodStatus, type: string) => s.conditions?.find((x) => x.type === type);
const byName = (s: PodStatus, name: string) =>
  [...(s.initContainerStatuses ?? []), ...(s.containerStatuses ?? [])].find((x) => x.name === name);

const allRunning = [
  instance('init', 'exited'),
  instance('sidecar', 'running'),
  instance('source', 'running'),
  instance('regular', 'running'),
];

describe('RestartAllContainers status', () => {
  test('an exit matching the rule restarts all; the condition is False otherwise', () => {
    const running = status(allRunning);
    assert.equal(cond(running, 'AllContainersRestarting')?.status, 'False');
    const exited = [...allRunning.slice(0, 2), instance('source', 'exited', { exitCode: 42 })];
    assert.equal(shouldAllContainersRestart(pod, runtime(exited), running), true);
    const other = [...allRunning.slice(0, 2), instance('source', 'exited', { exitCode: 1 })];
    assert.equal(shouldAllContainersRestart(pod, runtime(other), running), false);
  });

  test('containers removed for the restart wait with its reason, one restart more, phase not Failed', () => {
    const previous = status(allRunning);
    const s = status([], {
      previous,
      restartAll: { restarting: true, podRestarting: true },
    });
    assert.equal(cond(s, 'AllContainersRestarting')?.status, 'True');
    assert.equal(cond(s, 'AllContainersRestarting')?.reason, 'RestartAllContainersStarted');
    for (const name of ['init', 'sidecar', 'source', 'regular']) {
      const cs = byName(s, name);
      assert.equal(cs?.state?.waiting?.reason, 'RestartingAllContainers', name);
      assert.equal(cs?.lastState?.terminated?.exitCode, 137, name);
      assert.equal(cs?.restartCount, 1, name);
    }
    assert.notEqual(s.phase, 'Failed');
    // Initialized stays True while the init container runs again.
    assert.equal(cond(s, 'Initialized')?.status, 'True');
    // The removed containers' own statuses no longer say they exited: no second restart.
    assert.equal(shouldAllContainersRestart(pod, runtime([]), { ...s, conditions: [] }), false);
  });

  test('started again: the restart count and the last termination are carried over', () => {
    const removed = status([], {
      previous: status(allRunning),
      restartAll: { restarting: true, podRestarting: true },
    });
    const s = status(
      [
        instance('init', 'exited', { id: 'init-new' }),
        instance('sidecar', 'running', { id: 'sc-new' }),
      ],
      { previous: removed },
    );
    assert.equal(byName(s, 'init')?.restartCount, 1);
    assert.equal(byName(s, 'init')?.lastState?.terminated?.reason, 'RestartingAllContainers');
    assert.equal(byName(s, 'sidecar')?.restartCount, 1);
    assert.equal(byName(s, 'source')?.restartCount, 1);
    assert.equal(cond(s, 'AllContainersRestarting')?.status, 'False');
  });
});
