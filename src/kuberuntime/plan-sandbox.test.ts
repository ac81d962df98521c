/** computePodActions' sandbox checks: when the pod's sandbox is replaced, and why. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { computePodActions, type PodActions } from './plan.ts';
import type { SandboxStatus } from '../container/pod-status.ts';
import { instance, runtimeStatus, sandbox, testPod } from '../container/testing.ts';
import { fakeBackoff } from './testing.ts';

const NOW = 7_500;

describe('computePodActions: sandbox checks', () => {
  const decide = (sandboxes: SandboxStatus[], hostNetwork = false): PodActions =>
    computePodActions({
      pod: testPod({ hostNetwork }),
      status: runtimeStatus(sandboxes, [instance('main', 'running')]),
      now: NOW,
      backoff: fakeBackoff(),
    });

  test('two ready sandboxes are replaced', () => {
    const actions = decide([
      sandbox({ id: 'sb2', attempt: 1, createdAt: 5_000 }),
      sandbox({ id: 'sb1' }),
    ]);
    assert.equal(actions.createSandbox, true);
    assert.equal(actions.killPod, true);
    assert.equal(actions.attempt, 2);
    assert.equal(actions.sandboxId, 'sb2');
    assert.equal(actions.sandboxChangeReason, 'multiple ready sandboxes');
  });

  test('a not-ready newest sandbox is replaced even if an older one is ready', () => {
    const actions = decide([
      sandbox({ id: 'sb2', attempt: 1, state: 'notready' }),
      sandbox({ id: 'sb1' }),
    ]);
    assert.equal(actions.sandboxChangeReason, 'sandbox not ready');
    assert.equal(actions.attempt, 2);
  });

  test('a changed network mode replaces the sandbox', () => {
    assert.equal(decide([sandbox()], true).sandboxChangeReason, 'network namespace changed');
    assert.equal(
      decide([sandbox({ network: 'node' })], false).sandboxChangeReason,
      'network namespace changed',
    );
    assert.equal(decide([sandbox({ network: 'node', ips: [] })], true).createSandbox, false);
  });

  test('a pod-network sandbox without an IP is replaced', () => {
    const noIp: SandboxStatus = { id: 'sb1', state: 'ready', attempt: 0, createdAt: 1, ips: [] };
    assert.equal(decide([{ ...noIp, network: 'pod' }]).sandboxChangeReason, 'no pod IP');
    // Host-network sandboxes have no IP of their own.
    assert.equal(decide([{ ...noIp, network: 'node' }], true).createSandbox, false);
  });

  test('a sandbox known only from a list skips the network checks', () => {
    const listed: SandboxStatus = { id: 'sb1', state: 'ready', attempt: 0, createdAt: 1, ips: [] };
    const actions = decide([listed], true);
    assert.equal(actions.createSandbox, false);
    assert.equal(actions.sandboxChangeReason, undefined);
  });
});
