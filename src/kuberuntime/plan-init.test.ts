/**
 * computePodActions for init containers and sidecars: a matrix for one regular init
 * container (restart policy x its state x back-off x sandbox state), then sequences of
 * several init containers, garbage-collected instances and sidecar life cycles.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ProbeResultsReader } from '../prober/types.ts';
import { computePodActions, type PodActions } from './plan.ts';
import type { RuntimeContainer, SandboxStatus } from '../container/pod-status.ts';
import {
  instance,
  runtimeStatus,
  sandbox,
  spec,
  testPod,
  TEST_POD_UID,
  type TestPodOptions,
} from '../container/testing.ts';
import { fakeBackoff, fakeProbes } from './testing.ts';

// 5 s after the fixtures' containers exited (at 2.5 s): a 20 s back-off has 15 s left.
const NOW = 7_500;

type Policy = 'Always' | 'OnFailure' | 'Never';
type InitState = 'none' | 'created' | 'running' | 'exited0' | 'exited1' | 'oomkilled' | 'unknown';

function initInstance(state: InitState): RuntimeContainer[] {
  switch (state) {
    case 'none':
      return [];
    case 'exited0':
      return [instance('init', 'exited', { exitCode: 0 })];
    case 'exited1':
      return [instance('init', 'exited', { exitCode: 1 })];
    case 'oomkilled':
      // The runtime's reason marks the failure even if the exit code does not.
      return [instance('init', 'exited', { exitCode: 0, reason: 'OOMKilled' })];
    case 'created':
    case 'running':
    case 'unknown':
      return [instance('init', state)];
  }
}

interface InitExpected {
  readonly killPod: boolean;
  readonly createSandbox: boolean;
  readonly initToStart: readonly string[];
  readonly toStart: readonly string[];
  readonly initFailed: boolean;
  readonly waiting: boolean;
  readonly kills: readonly string[];
}

function initOracle(
  policy: Policy,
  state: InitState,
  backoff: boolean,
  ready: boolean,
): InitExpected {
  const exitedInstance = state === 'exited0' || state === 'exited1' || state === 'oomkilled';
  const failed = state === 'exited1' || state === 'oomkilled' || state === 'unknown';
  const base = { killPod: false, createSandbox: false, initFailed: false, kills: [] as string[] };
  if (!ready) {
    if (policy === 'Never' && state !== 'none') {
      return { ...base, killPod: true, initToStart: [], toStart: [], waiting: false };
    }
    const gated = backoff && exitedInstance;
    return {
      ...base,
      killPod: true,
      createSandbox: true,
      initToStart: gated ? [] : ['init'],
      toStart: [],
      waiting: gated,
    };
  }
  if (state === 'running') return { ...base, initToStart: [], toStart: [], waiting: false };
  if (state === 'exited0') return { ...base, initToStart: [], toStart: ['main'], waiting: false };
  if (failed && policy === 'Never') {
    return {
      ...base,
      killPod: true,
      initFailed: true,
      initToStart: [],
      toStart: [],
      waiting: false,
    };
  }
  const gated = backoff && exitedInstance;
  return {
    ...base,
    kills: state === 'unknown' ? ['unknown state'] : [],
    initToStart: gated ? [] : ['init'],
    toStart: [],
    waiting: gated,
  };
}

describe('computePodActions: regular init container matrix', () => {
  for (const policy of ['Always', 'OnFailure', 'Never'] as const) {
    for (const state of [
      'none',
      'created',
      'running',
      'exited0',
      'exited1',
      'oomkilled',
      'unknown',
    ] as const) {
      for (const backoff of [false, true]) {
        for (const ready of [true, false]) {
          const name = `${policy} init ${state}${backoff ? ' in back-off' : ''} sandbox=${ready ? 'ready' : 'notready'}`;
          test(name, () => {
            const want = initOracle(policy, state, backoff, ready);
            const got = computePodActions({
              pod: testPod({ restartPolicy: policy, initContainers: ['init'] }),
              status: runtimeStatus(
                [sandbox(ready ? {} : { state: 'notready' })],
                initInstance(state),
              ),
              now: NOW,
              backoff: fakeBackoff(
                backoff
                  ? {
                      [`${TEST_POD_UID}_init_registry.test/init:1`]: {
                        remaining: 5_000,
                        current: 10_000,
                      },
                    }
                  : {},
              ),
            });
            assert.equal(got.killPod, want.killPod, 'killPod');
            assert.equal(got.createSandbox, want.createSandbox, 'createSandbox');
            assert.deepEqual(got.initContainersToStart, want.initToStart, 'initContainersToStart');
            assert.equal(
              got.nextInitContainerToStart,
              want.initToStart.length > 0 ? 'init' : undefined,
            );
            assert.deepEqual(got.containersToStart, want.toStart, 'containersToStart');
            assert.equal(got.initFailed === true, want.initFailed, 'initFailed');
            assert.equal(got.waiting['init'] !== undefined, want.waiting, 'waiting');
            assert.deepEqual(
              got.containersToKill.map((k) => k.reason),
              want.kills,
            );
          });
        }
      }
    }
  }
});

function planFor(
  options: TestPodOptions,
  containers: RuntimeContainer[],
  extra: { probes?: ProbeResultsReader; sandboxes?: SandboxStatus[] } = {},
): PodActions {
  return computePodActions({
    pod: testPod(options),
    status: runtimeStatus(extra.sandboxes ?? [sandbox()], containers),
    now: NOW,
    backoff: fakeBackoff(),
    ...(extra.probes === undefined ? {} : { probes: extra.probes }),
  });
}

describe('computePodActions: init container sequences', () => {
  const inits = { initContainers: ['a', 'b'] };

  test('starts the first init container in a fresh sandbox, before any app container', () => {
    const actions = planFor(inits, [], { sandboxes: [] });
    assert.equal(actions.createSandbox, true);
    assert.deepEqual(actions.initContainersToStart, ['a']);
    assert.deepEqual(actions.containersToStart, []);
  });

  test('one at a time, in order', () => {
    assert.deepEqual(planFor(inits, []).initContainersToStart, ['a']);
    assert.deepEqual(planFor(inits, [instance('a', 'running')]).initContainersToStart, []);
    const afterA = planFor(inits, [instance('a', 'exited', { exitCode: 0 })]);
    assert.deepEqual(afterA.initContainersToStart, ['b']);
    assert.deepEqual(afterA.containersToStart, []);
    const afterB = planFor(inits, [
      instance('a', 'exited', { exitCode: 0 }),
      instance('b', 'exited', { exitCode: 0 }),
    ]);
    assert.deepEqual(afterB.initContainersToStart, []);
    assert.deepEqual(afterB.containersToStart, ['main']);
  });

  test('a garbage-collected earlier init container is not rerun', () => {
    const actions = planFor(inits, [instance('b', 'exited', { exitCode: 0 })]);
    assert.deepEqual(actions.initContainersToStart, []);
    assert.deepEqual(actions.containersToStart, ['main']);
  });

  test('an app container in the sandbox means initialisation is done', () => {
    const actions = planFor(inits, [instance('main', 'running')]);
    assert.deepEqual(actions.initContainersToStart, []);
    assert.deepEqual(actions.containersToStart, []);
    assert.equal(actions.killPod, false);
  });

  test('init containers from an older sandbox do not count', () => {
    const actions = planFor(
      inits,
      [
        instance('a', 'exited', { exitCode: 0, sandboxId: 'old' }),
        instance('b', 'exited', { exitCode: 0, sandboxId: 'old' }),
      ],
      { sandboxes: [sandbox({ id: 'new', attempt: 1, createdAt: 9_000 })] },
    );
    assert.deepEqual(actions.initContainersToStart, ['a']);
    assert.deepEqual(actions.containersToStart, []);
  });

  test('a failed second init container with Never fails the pod', () => {
    const actions = planFor({ ...inits, restartPolicy: 'Never' }, [
      instance('a', 'exited', { exitCode: 0 }),
      instance('b', 'exited', { exitCode: 3 }),
    ]);
    assert.equal(actions.initFailed, true);
    assert.equal(actions.killPod, true);
    assert.deepEqual(actions.initContainersToStart, []);
    assert.deepEqual(actions.containersToStart, []);
  });

  test('a container-level OnFailure lets an init container retry in a Never pod', () => {
    const actions = planFor(
      { restartPolicy: 'Never', initContainers: [spec('a', { restartPolicy: 'OnFailure' })] },
      [instance('a', 'exited', { exitCode: 3 })],
    );
    assert.equal(actions.initFailed, undefined);
    assert.deepEqual(actions.initContainersToStart, ['a']);
  });
});

describe('computePodActions: sidecars', () => {
  const withSidecar = (side = spec('side', { restartPolicy: 'Always' })): TestPodOptions => ({
    initContainers: [side, 'b'],
  });

  test('the sidecar starts first; the next init container once it runs', () => {
    assert.deepEqual(planFor(withSidecar(), []).initContainersToStart, ['side']);
    const running = planFor(withSidecar(), [instance('side', 'running')]);
    assert.deepEqual(running.initContainersToStart, ['b']);
    assert.equal(running.nextInitContainerToStart, 'b');
  });

  test('a startup probe holds the next init container until it passes', () => {
    const side = spec('side', { restartPolicy: 'Always', startupProbe: {} });
    const run = (result?: 'success' | 'failure'): PodActions =>
      planFor(withSidecar(side), [instance('side', 'running', { from: side })], {
        probes: fakeProbes(result === undefined ? {} : { 'side-0': { startup: result } }),
      });
    assert.deepEqual(run().initContainersToStart, []);
    assert.deepEqual(run('success').initContainersToStart, ['b']);
    const failed = run('failure');
    assert.deepEqual(failed.initContainersToStart, ['side']);
    assert.deepEqual(
      failed.containersToKill.map((k) => k.reason),
      ['startup'],
    );
  });

  test('without a probe reader a startup probe counts as passed', () => {
    const side = spec('side', { restartPolicy: 'Always', startupProbe: {} });
    const actions = planFor(withSidecar(side), [instance('side', 'running', { from: side })]);
    assert.deepEqual(actions.initContainersToStart, ['b']);
  });

  test('kept running alongside the app containers', () => {
    const actions = planFor(withSidecar(), [
      instance('side', 'running'),
      instance('b', 'exited', { exitCode: 0 }),
    ]);
    assert.deepEqual(actions.initContainersToStart, []);
    assert.deepEqual(actions.containersToStart, ['main']);
  });

  test('restarted when it exits, whatever the pod policy', () => {
    for (const restartPolicy of ['Always', 'OnFailure', 'Never'] as const) {
      const actions = planFor({ ...withSidecar(), restartPolicy }, [
        instance('side', 'exited', { exitCode: 0 }),
        instance('b', 'exited', { exitCode: 0 }),
        instance('main', 'running'),
      ]);
      assert.deepEqual(actions.initContainersToStart, ['side'], restartPolicy);
      assert.deepEqual(actions.containersToStart, []);
    }
  });

  test('restarted when its instance vanished after initialisation', () => {
    const actions = planFor(withSidecar(), [
      instance('b', 'exited', { exitCode: 0 }),
      instance('main', 'running'),
    ]);
    assert.deepEqual(actions.initContainersToStart, ['side']);
  });

  test('restarted on a spec change and on a liveness failure', () => {
    const changed = planFor(withSidecar(spec('side', { restartPolicy: 'Always', image: 'x:2' })), [
      instance('side', 'running'),
      instance('main', 'running'),
    ]);
    assert.deepEqual(
      changed.containersToKill.map((k) => k.reason),
      ['spec changed'],
    );
    assert.deepEqual(changed.initContainersToStart, ['side']);
    const side = spec('side', { restartPolicy: 'Always', livenessProbe: {} });
    const dead = planFor(
      withSidecar(side),
      [instance('side', 'running', { from: side }), instance('main', 'running')],
      { probes: fakeProbes({ 'side-0': { liveness: 'failure' } }) },
    );
    assert.deepEqual(
      dead.containersToKill.map((k) => k.reason),
      ['liveness'],
    );
    assert.deepEqual(dead.initContainersToStart, ['side']);
  });

  test('an unknown sidecar is killed and restarted even with Never', () => {
    const actions = planFor({ ...withSidecar(), restartPolicy: 'Never' }, [
      instance('side', 'unknown'),
    ]);
    assert.equal(actions.initFailed, undefined);
    assert.deepEqual(
      actions.containersToKill.map((k) => k.reason),
      ['unknown state'],
    );
    assert.deepEqual(actions.initContainersToStart, ['side']);
  });

  test('stopped with the pod once the app containers are done', () => {
    const actions = planFor({ ...withSidecar(), restartPolicy: 'OnFailure' }, [
      instance('side', 'exited', { exitCode: 1 }),
      instance('b', 'exited', { exitCode: 0 }),
      instance('main', 'exited', { exitCode: 0 }),
    ]);
    assert.equal(actions.killPod, true);
    assert.deepEqual(actions.initContainersToStart, []);
    assert.deepEqual(actions.containersToStart, []);
  });

  test('a sidecar in back-off does not hold back the next init container', () => {
    const sidecars = {
      initContainers: [
        spec('s1', { restartPolicy: 'Always' }),
        spec('s2', { restartPolicy: 'Always' }),
        'b',
      ],
    };
    const actions = computePodActions({
      pod: testPod(sidecars),
      status: runtimeStatus(
        [sandbox()],
        [instance('s1', 'exited', { exitCode: 1 }), instance('s2', 'running')],
      ),
      now: NOW,
      backoff: fakeBackoff({
        [`${TEST_POD_UID}_s1_registry.test/s1:1`]: { remaining: 1_000, current: 10_000 },
      }),
    });
    assert.deepEqual(actions.initContainersToStart, ['b']);
    assert.equal(actions.waiting['s1']?.reason, 'CrashLoopBackOff');
  });
});
