/**
 * computePodActions for app containers: the full matrix of restart policy x container
 * state x earlier crash x back-off x spec change x sandbox state, checked against an
 * oracle written from the lifecycle rules (kubelet-facts.md), then the cases the matrix
 * does not reach (probes, deletion, container-level policies).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { formatGoDuration } from '../config/duration.ts';
import { computePodActions, type PodActions } from './plan.ts';
import type { RuntimeContainer, SandboxStatus } from '../container/pod-status.ts';
import {
  instance,
  runtimeStatus,
  sandbox,
  spec,
  testPod,
  TEST_POD_UID,
} from '../container/testing.ts';
import { fakeBackoff, fakeProbes } from './testing.ts';

// 5 s after the fixtures' containers exited (at 2.5 s): a 20 s back-off has 15 s left.
const NOW = 7_500;
const KEY = `${TEST_POD_UID}_main_registry.test/main:1`;

type Policy = 'Always' | 'OnFailure' | 'Never';
type Current = 'none' | 'created' | 'running' | 'exited0' | 'exited1' | 'unknown';
type SandboxCase = 'ready' | 'notready' | 'none';

interface Case {
  readonly policy: Policy;
  readonly current: Current;
  readonly previousCrash: boolean;
  readonly backoff: boolean;
  readonly hashChanged: boolean;
  readonly sandbox: SandboxCase;
}

interface Expected {
  readonly killPod: boolean;
  readonly createSandbox: boolean;
  readonly start: boolean;
  readonly waiting: boolean;
  readonly kills: readonly string[];
}

function restartsAfterExit(policy: Policy, exitCode: number): boolean {
  return policy === 'Always' || (policy === 'OnFailure' && exitCode !== 0);
}

function instancesFor(c: Case): RuntimeContainer[] {
  const result: RuntimeContainer[] = [];
  const attempt = c.previousCrash ? 1 : 0;
  if (c.current !== 'none') {
    const from = c.hashChanged ? spec('main', { image: 'registry.test/main:0' }) : spec('main');
    const state = c.current === 'exited0' || c.current === 'exited1' ? 'exited' : c.current;
    const exitCode = c.current === 'exited1' ? 1 : c.current === 'exited0' ? 0 : undefined;
    result.push(
      instance('main', state, { attempt, from, ...(exitCode === undefined ? {} : { exitCode }) }),
    );
  }
  if (c.previousCrash) result.push(instance('main', 'exited', { attempt: 0, exitCode: 1 }));
  return result;
}

/** What the lifecycle rules say should happen, written independently of plan.ts. */
function oracle(c: Case): Expected {
  const instances = instancesFor(c);
  let start = false;
  let killPod = false;
  let createSandbox = false;
  const kills: string[] = [];
  if (c.sandbox === 'ready') {
    let keep = false;
    switch (c.current) {
      case 'running':
        if (c.hashChanged) {
          kills.push('spec changed');
          start = true;
        } else {
          keep = true;
        }
        break;
      case 'none':
      case 'created':
        start = true;
        break;
      case 'unknown':
        kills.push('unknown state');
        start = true;
        break;
      case 'exited0':
        start = restartsAfterExit(c.policy, 0);
        break;
      case 'exited1':
        start = restartsAfterExit(c.policy, 1);
        break;
    }
    killPod = !keep && !start;
  } else {
    const attempt = c.sandbox === 'notready' ? 1 : 0;
    killPod = c.sandbox === 'notready' || instances.length > 0;
    const exitCode = c.current === 'exited0' ? 0 : c.current === 'exited1' ? 1 : undefined;
    if (c.policy === 'Never' && attempt !== 0 && instances.length > 0) {
      createSandbox = false;
    } else if (exitCode !== undefined && !restartsAfterExit(c.policy, exitCode)) {
      // The only app container has finished for good: no sandbox for nothing.
      createSandbox = false;
    } else {
      createSandbox = true;
      start = true;
    }
  }
  // The newest exited instance must have run the current spec to count as a crash loop.
  const newestExited = c.current === 'exited0' || c.current === 'exited1' ? c.current : undefined;
  const crashedWithCurrentSpec =
    newestExited !== undefined ? !c.hashChanged : instances.some((i) => i.state === 'exited');
  const waiting = start && crashedWithCurrentSpec && c.backoff;
  return { killPod, createSandbox, start: start && !waiting, waiting, kills };
}

function sandboxesFor(c: SandboxCase): SandboxStatus[] {
  if (c === 'none') return [];
  return [sandbox({ state: c === 'ready' ? 'ready' : 'notready' })];
}

function plan(c: Case): PodActions {
  return computePodActions({
    pod: testPod({ restartPolicy: c.policy }),
    status: runtimeStatus(sandboxesFor(c.sandbox), instancesFor(c)),
    now: NOW,
    backoff: fakeBackoff(c.backoff ? { [KEY]: { remaining: 15_000, current: 20_000 } } : {}),
  });
}

function* cases(): Generator<Case> {
  for (const policy of ['Always', 'OnFailure', 'Never'] as const) {
    for (const current of [
      'none',
      'created',
      'running',
      'exited0',
      'exited1',
      'unknown',
    ] as const) {
      for (const previousCrash of [false, true]) {
        // With no current instance the earlier crash would itself be the newest one.
        if (current === 'none' && previousCrash) continue;
        for (const backoff of [false, true]) {
          for (const hashChanged of [false, true]) {
            if (current === 'none' && hashChanged) continue;
            for (const sandboxCase of ['ready', 'notready', 'none'] as const) {
              yield { policy, current, previousCrash, backoff, hashChanged, sandbox: sandboxCase };
            }
          }
        }
      }
    }
  }
}

describe('computePodActions: app container matrix', () => {
  const all = [...cases()];
  test('covers every combination', () => {
    // 3 policies x (1 none x 2 backoff + 5 states x 2 crash x 2 backoff x 2 hash) x 3 sandboxes
    assert.equal(all.length, 3 * (2 + 5 * 2 * 2 * 2) * 3);
  });
  for (const c of all) {
    const name = `${c.policy} ${c.current}${c.previousCrash ? ' after crash' : ''}${c.backoff ? ' in back-off' : ''}${c.hashChanged ? ' spec changed' : ''} sandbox=${c.sandbox}`;
    test(name, () => {
      const want = oracle(c);
      const got = plan(c);
      assert.equal(got.killPod, want.killPod, 'killPod');
      assert.equal(got.createSandbox, want.createSandbox, 'createSandbox');
      assert.deepEqual(got.containersToStart, want.start ? ['main'] : [], 'containersToStart');
      assert.deepEqual(
        got.containersToKill.map((k) => k.reason),
        want.kills,
        'containersToKill',
      );
      assert.equal(got.waiting['main'] !== undefined, want.waiting, 'waiting');
      assert.deepEqual(got.initContainersToStart, []);
      assert.equal(got.attempt, c.sandbox === 'notready' ? 1 : 0, 'attempt');
      assert.equal(got.sandboxId, c.sandbox === 'none' ? undefined : 'sb1', 'sandboxId');
    });
  }
});

describe('computePodActions: back-off reporting', () => {
  test('reports CrashLoopBackOff with upstream wording and the retry time', () => {
    const actions = computePodActions({
      pod: testPod(),
      status: runtimeStatus([sandbox()], [instance('main', 'exited', { exitCode: 1 })]),
      now: NOW,
      backoff: fakeBackoff({ [KEY]: { remaining: 15_000, current: 20_000 } }),
    });
    assert.deepEqual(actions.waiting, {
      main: {
        reason: 'CrashLoopBackOff',
        message: 'back-off 20s restarting failed container=main pod=web_default(uid-1)',
        retryAt: NOW + 15_000,
      },
    });
    assert.deepEqual(actions.containersToStart, []);
    // Held back, not finished: the pod must not be killed for it.
    assert.equal(actions.killPod, false);
  });

  test('falls back to the remaining time when the reader has no current delay', () => {
    const actions = computePodActions({
      pod: testPod(),
      status: runtimeStatus([sandbox()], [instance('main', 'exited', { exitCode: 1 })]),
      now: NOW,
      backoff: { remaining: () => 80_000 },
    });
    assert.match(actions.waiting['main']?.message ?? '', /^back-off 1m20s restarting/);
  });

  test('a spec change after a crash is not held back', () => {
    const actions = computePodActions({
      pod: testPod({ containers: [spec('main', { image: 'registry.test/main:fixed' })] }),
      status: runtimeStatus([sandbox()], [instance('main', 'exited', { exitCode: 1 })]),
      now: NOW,
      backoff: fakeBackoff({ [KEY]: { remaining: 15_000, current: 20_000 } }),
    });
    assert.deepEqual(actions.containersToStart, ['main']);
    assert.deepEqual(actions.waiting, {});
  });

  test('uses the back-off key `${uid}_${name}_${image}` (upstream: a new image, a fresh back-off)', () => {
    const asked: string[] = [];
    computePodActions({
      pod: testPod(),
      status: runtimeStatus([sandbox()], [instance('main', 'exited', { exitCode: 1 })]),
      now: NOW,
      backoff: {
        remaining: (key) => {
          asked.push(key);
          return 0;
        },
      },
    });
    assert.deepEqual(asked, ['uid-1_main_registry.test/main:1']);
  });

  test('formats delays like Go durations', () => {
    const table: [number, string][] = [
      [0, '0s'],
      [500, '500ms'],
      [1_500, '1.5s'],
      [10_000, '10s'],
      [20_000, '20s'],
      [80_000, '1m20s'],
      [160_000, '2m40s'],
      [300_000, '5m0s'],
      [3_600_000, '1h0m0s'],
      [3_723_000, '1h2m3s'],
    ];
    for (const [ms, want] of table) assert.equal(formatGoDuration(ms), want, String(ms));
  });
});

describe('computePodActions: probes', () => {
  const probed = spec('main', { livenessProbe: {}, startupProbe: {} });
  const run = (
    policy: Policy,
    result: { liveness?: 'success' | 'failure'; startup?: 'success' | 'failure' },
  ): PodActions =>
    computePodActions({
      pod: testPod({ restartPolicy: policy, containers: [probed] }),
      status: runtimeStatus([sandbox()], [instance('main', 'running', { from: probed })]),
      now: NOW,
      backoff: fakeBackoff(),
      probes: fakeProbes({ 'main-0': result }),
    });

  for (const policy of ['Always', 'OnFailure'] as const) {
    test(`${policy}: liveness failure kills and restarts`, () => {
      const actions = run(policy, { liveness: 'failure', startup: 'success' });
      assert.deepEqual(actions.containersToKill, [
        {
          id: 'main-0',
          name: 'main',
          reason: 'liveness',
          message: 'Container main failed liveness probe, will be restarted',
        },
      ]);
      assert.deepEqual(actions.containersToStart, ['main']);
      assert.equal(actions.killPod, false);
    });
    test(`${policy}: startup failure kills and restarts`, () => {
      const actions = run(policy, { startup: 'failure' });
      assert.deepEqual(
        actions.containersToKill.map((k) => k.reason),
        ['startup'],
      );
      assert.deepEqual(actions.containersToStart, ['main']);
    });
  }

  test('Never: a liveness failure kills without restart, and the pod is done', () => {
    const actions = run('Never', { liveness: 'failure' });
    assert.deepEqual(actions.containersToKill[0]?.message, 'Container main failed liveness probe');
    assert.deepEqual(actions.containersToStart, []);
    assert.equal(actions.killPod, true);
  });

  test('probes that passed or have not run keep the container', () => {
    for (const result of [{ liveness: 'success', startup: 'success' } as const, {}]) {
      const actions = run('Always', result);
      assert.deepEqual(actions.containersToKill, []);
      assert.deepEqual(actions.containersToStart, []);
      assert.equal(actions.killPod, false);
    }
  });

  test('a spec change wins over a probe failure and restarts even with Never', () => {
    const actions = computePodActions({
      pod: testPod({
        restartPolicy: 'Never',
        containers: [{ ...probed, image: 'registry.test/main:2' }],
      }),
      status: runtimeStatus([sandbox()], [instance('main', 'running', { from: probed })]),
      now: NOW,
      backoff: fakeBackoff(),
      probes: fakeProbes({ 'main-0': { liveness: 'failure' } }),
    });
    assert.deepEqual(
      actions.containersToKill.map((k) => [k.reason, k.message]),
      [['spec changed', 'Container main definition changed, will be restarted']],
    );
    assert.deepEqual(actions.containersToStart, ['main']);
  });
});

describe('computePodActions: other rules', () => {
  test('a pod being deleted restarts nothing', () => {
    const actions = computePodActions({
      pod: testPod({ deleting: true }),
      status: runtimeStatus([sandbox()], [instance('main', 'exited', { exitCode: 1 })]),
      now: NOW,
      backoff: fakeBackoff(),
    });
    assert.deepEqual(actions.containersToStart, []);
    assert.equal(actions.killPod, true);
  });

  test('a container-level Never overrides the pod policy Always', () => {
    const actions = computePodActions({
      pod: testPod({ containers: [spec('main', { restartPolicy: 'Never' }), 'other'] }),
      status: runtimeStatus(
        [sandbox()],
        [instance('main', 'exited', { exitCode: 1 }), instance('other', 'running')],
      ),
      now: NOW,
      backoff: fakeBackoff(),
    });
    assert.deepEqual(actions.containersToStart, []);
    assert.equal(actions.killPod, false);
  });

  test('a container-level OnFailure overrides the pod policy Never', () => {
    const pod = testPod({
      restartPolicy: 'Never',
      containers: [spec('main', { restartPolicy: 'OnFailure' })],
    });
    const start = (exitCode: number): readonly string[] =>
      computePodActions({
        pod,
        status: runtimeStatus([sandbox()], [instance('main', 'exited', { exitCode })]),
        now: NOW,
        backoff: fakeBackoff(),
      }).containersToStart;
    assert.deepEqual(start(1), ['main']);
    assert.deepEqual(start(0), []);
  });

  test('restart rules decide by exit code before the container policy', () => {
    const container = {
      ...spec('main', { restartPolicy: 'Never' }),
      restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [42] } }],
    };
    const start = (exitCode: number): readonly string[] =>
      computePodActions({
        pod: testPod({ containers: [container] }),
        status: runtimeStatus([sandbox()], [instance('main', 'exited', { exitCode })]),
        now: NOW,
        backoff: fakeBackoff(),
      }).containersToStart;
    assert.deepEqual(start(42), ['main']);
    assert.deepEqual(start(1), []);
  });

  test('only containers that may run again are started in a new sandbox (OnFailure)', () => {
    const actions = computePodActions({
      pod: testPod({ restartPolicy: 'OnFailure', containers: ['done', 'failed', 'fresh'] }),
      status: runtimeStatus(
        [sandbox({ state: 'notready' })],
        [
          instance('done', 'exited', { exitCode: 0 }),
          instance('failed', 'exited', { exitCode: 2 }),
        ],
      ),
      now: NOW,
      backoff: fakeBackoff(),
    });
    assert.equal(actions.createSandbox, true);
    assert.equal(actions.killPod, true);
    assert.equal(actions.attempt, 1);
    assert.equal(actions.sandboxChangeReason, 'sandbox not ready');
    assert.deepEqual(actions.containersToStart, ['failed', 'fresh']);
  });

  test('Never: a first sandbox that failed before any container ran is retried', () => {
    const actions = computePodActions({
      pod: testPod({ restartPolicy: 'Never' }),
      status: runtimeStatus([sandbox({ state: 'notready' })], []),
      now: NOW,
      backoff: fakeBackoff(),
    });
    assert.equal(actions.createSandbox, true);
    assert.deepEqual(actions.containersToStart, ['main']);
  });

  test('a new pod gets a sandbox and nothing to kill', () => {
    const actions = computePodActions({
      pod: testPod({ containers: ['a', 'b'] }),
      status: runtimeStatus([], []),
      now: NOW,
      backoff: fakeBackoff(),
    });
    assert.deepEqual(actions, {
      killPod: false,
      createSandbox: true,
      sandboxChangeReason: 'no sandbox',
      attempt: 0,
      initContainersToStart: [],
      containersToStart: ['a', 'b'],
      ephemeralContainersToStart: [],
      containersToKill: [],
      waiting: {},
      containersToReset: [],
    });
  });

  test('a steady pod needs nothing', () => {
    const actions = computePodActions({
      pod: testPod({ containers: ['a', 'b'] }),
      status: runtimeStatus([sandbox()], [instance('a', 'running'), instance('b', 'running')]),
      now: NOW,
      backoff: fakeBackoff(),
    });
    assert.deepEqual(actions, {
      killPod: false,
      createSandbox: false,
      sandboxId: 'sb1',
      attempt: 0,
      initContainersToStart: [],
      containersToStart: [],
      ephemeralContainersToStart: [],
      containersToKill: [],
      waiting: {},
      containersToReset: [],
    });
  });

  test('the newest instance decides, whatever order the runtime listed them in', () => {
    const actions = computePodActions({
      pod: testPod({ restartPolicy: 'OnFailure' }),
      status: runtimeStatus(
        [sandbox()],
        [
          instance('main', 'exited', { exitCode: 1, attempt: 0 }),
          instance('main', 'exited', { exitCode: 0, attempt: 1 }),
        ],
      ),
      now: NOW,
      backoff: fakeBackoff(),
    });
    assert.deepEqual(actions.containersToStart, []);
    assert.equal(actions.killPod, true);
  });

  test('ephemeral containers start once and are never restarted', () => {
    const pod = testPod({ ephemeralContainers: ['debug'] });
    const first = computePodActions({
      pod,
      status: runtimeStatus([sandbox()], [instance('main', 'running')]),
      now: NOW,
      backoff: fakeBackoff(),
    });
    assert.deepEqual(first.ephemeralContainersToStart, ['debug']);
    const after = computePodActions({
      pod,
      status: runtimeStatus(
        [sandbox()],
        [instance('main', 'running'), instance('debug', 'exited', { exitCode: 1 })],
      ),
      now: NOW,
      backoff: fakeBackoff(),
    });
    assert.deepEqual(after.ephemeralContainersToStart, []);
    assert.deepEqual(after.containersToStart, []);
  });
});
