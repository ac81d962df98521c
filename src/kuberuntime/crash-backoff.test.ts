import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { instance, spec } from '../container/testing.ts';
import type { RuntimePodStatus } from '../container/pod-status.ts';
import { containerBackoffKey, holdBackCrashLooping } from './crash-backoff.ts';
import { fakeBackoff } from './testing.ts';

const pod: Pod = {
  metadata: { uid: 'u', name: 'p', namespace: 'ns' },
  spec: { containers: [spec('c')] },
};

function run(finishedAt: number, now: number) {
  const exited = { ...instance('c', 'exited', { exitCode: 1 }), finishedAt };
  const status: RuntimePodStatus = {
    uid: 'u',
    name: 'p',
    namespace: 'ns',
    sandboxes: [],
    containers: [exited],
  };
  // The last restart was 300 s ago with a 300 s delay: by that clock it is due now.
  const backoff = fakeBackoff({
    [containerBackoffKey('u', 'c', spec('c').image ?? '')]: { remaining: 0, current: 300_000 },
  });
  const waiting = {};
  const start = holdBackCrashLooping(['c'], { pod, status, now, backoff }, waiting);
  return { start, waiting: waiting as Record<string, { retryAt: number }> };
}

describe('holdBackCrashLooping', () => {
  test('the delay runs from the exit (upstream IsInBackOffSince finishedAt), not from the last start', () => {
    // It ran 5 s after its restart: it waits the whole 300 s from its exit.
    const held = run(1_000_000, 1_000_000 + 1_000);
    assert.deepEqual(held.start, []);
    assert.equal(held.waiting['c']?.retryAt, 1_000_000 + 300_000);
    assert.deepEqual(run(1_000_000, 1_000_000 + 300_000).start, ['c']);
  });

  test('a wall clock stepped back holds the container no longer than the delay', () => {
    const held = run(10_000_000, 10_000_000 - 3_600_000);
    assert.equal(held.waiting['c']?.retryAt, 10_000_000 - 3_600_000 + 300_000);
  });
});
