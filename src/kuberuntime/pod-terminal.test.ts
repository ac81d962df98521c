/** isPodTerminal: when a pod is over for good, and whether it succeeded. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isPodTerminal } from './plan.ts';
import type { RuntimeContainer } from '../container/pod-status.ts';
import {
  instance,
  runtimeStatus,
  sandbox,
  spec,
  testPod,
  type TestPodOptions,
} from '../container/testing.ts';

const exited = (name: string, exitCode: number, extra = {}): RuntimeContainer =>
  instance(name, 'exited', { exitCode, ...extra });

function terminal(options: TestPodOptions, containers: RuntimeContainer[]): string | undefined {
  return isPodTerminal(testPod(options), runtimeStatus([sandbox()], containers));
}

describe('isPodTerminal', () => {
  const two = { containers: ['a', 'b'] };
  const table: [string, TestPodOptions, RuntimeContainer[], string | undefined][] = [
    [
      'Never, all exited 0',
      { ...two, restartPolicy: 'Never' },
      [exited('a', 0), exited('b', 0)],
      'Succeeded',
    ],
    [
      'Never, one failed',
      { ...two, restartPolicy: 'Never' },
      [exited('a', 0), exited('b', 2)],
      'Failed',
    ],
    [
      'Never, one running',
      { ...two, restartPolicy: 'Never' },
      [exited('a', 0), instance('b', 'running')],
      undefined,
    ],
    ['Never, one not started', { ...two, restartPolicy: 'Never' }, [exited('a', 1)], undefined],
    [
      'Never, one created',
      { ...two, restartPolicy: 'Never' },
      [exited('a', 1), instance('b', 'created')],
      undefined,
    ],
    [
      'Never, one unknown',
      { ...two, restartPolicy: 'Never' },
      [exited('a', 1), instance('b', 'unknown')],
      undefined,
    ],
    [
      'OnFailure, all exited 0',
      { ...two, restartPolicy: 'OnFailure' },
      [exited('a', 0), exited('b', 0)],
      'Succeeded',
    ],
    [
      'OnFailure, one failed (will restart)',
      { ...two, restartPolicy: 'OnFailure' },
      [exited('a', 0), exited('b', 1)],
      undefined,
    ],
    [
      'Always, all exited 0',
      { ...two, restartPolicy: 'Always' },
      [exited('a', 0), exited('b', 0)],
      undefined,
    ],
    ['default policy is Always', two, [exited('a', 0), exited('b', 0)], undefined],
    [
      'Always pod, every container Never on its own',
      {
        containers: [spec('a', { restartPolicy: 'Never' }), spec('b', { restartPolicy: 'Never' })],
      },
      [exited('a', 0), exited('b', 3)],
      'Failed',
    ],
    [
      'the newest instance decides',
      { restartPolicy: 'OnFailure' },
      [exited('main', 1, { attempt: 0 }), exited('main', 0, { attempt: 1 })],
      'Succeeded',
    ],
    [
      'Never, failed init container',
      { restartPolicy: 'Never', initContainers: ['init'] },
      [exited('init', 1)],
      'Failed',
    ],
    [
      'Never, OOM-killed init container',
      { restartPolicy: 'Never', initContainers: ['init'] },
      [instance('init', 'exited', { exitCode: 0, reason: 'OOMKilled' })],
      'Failed',
    ],
    [
      'Never, unknown init container',
      { restartPolicy: 'Never', initContainers: ['init'] },
      [instance('init', 'unknown')],
      'Failed',
    ],
    [
      'OnFailure, failed init container (will restart)',
      { restartPolicy: 'OnFailure', initContainers: ['init'] },
      [exited('init', 1)],
      undefined,
    ],
    [
      'Never, init succeeded, app not started',
      { restartPolicy: 'Never', initContainers: ['init'] },
      [exited('init', 0)],
      undefined,
    ],
    [
      'sidecars do not keep a finished pod alive',
      { restartPolicy: 'Never', initContainers: [spec('side', { restartPolicy: 'Always' })] },
      [instance('side', 'running'), exited('main', 0)],
      'Succeeded',
    ],
    [
      'a crashed sidecar does not fail the pod',
      { restartPolicy: 'Never', initContainers: [spec('side', { restartPolicy: 'Always' })] },
      [exited('side', 1), exited('main', 0)],
      'Succeeded',
    ],
    ['nothing ran yet', { restartPolicy: 'Never' }, [], undefined],
  ];
  for (const [name, options, containers, want] of table) {
    test(name, () => {
      assert.equal(terminal(options, containers), want);
    });
  }

  test('a pod without app containers is never terminal', () => {
    assert.equal(
      isPodTerminal({ spec: { containers: [], restartPolicy: 'Never' } }, runtimeStatus([], [])),
      undefined,
    );
  });
});
