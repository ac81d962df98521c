/**
 * Status rules the upstream NodeConformance suite found berth getting wrong (issue #33):
 * init container readiness, PodInitializing, sidecar readiness in ContainersReady,
 * per-container restart policy in the phase, a terminated pod whose containers were
 * removed, and status resources.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Pod, PodStatus } from 'kubernetes-types/core/v1.js';
import type { RuntimeContainer } from '../container/pod-status.ts';
import { generateStatus, runtimeContainer as instance } from './testing.ts';
import type { StatusInput } from './generate.ts';

const NOW = new Date('2026-01-01T00:00:10Z');

function pod(
  containers: Container[],
  init: Container[] = [],
  restartPolicy: 'Always' | 'OnFailure' | 'Never' = 'Always',
  status: PodStatus = {},
): Pod {
  return {
    metadata: { uid: 'u1', name: 'p', namespace: 'ns' },
    spec: { restartPolicy, containers, ...(init.length > 0 && { initContainers: init }) },
    status: { conditions: [{ type: 'PodScheduled', status: 'True' }], ...status },
  };
}

const c = (name: string, extra: Partial<Container> = {}): Container => ({
  name,
  image: 'busybox:1',
  ...extra,
});

function status(
  p: Pod,
  containers: RuntimeContainer[],
  extra: Partial<StatusInput> = {},
): PodStatus {
  return generateStatus(p, containers, NOW, extra);
}

const cond = (s: PodStatus, type: string) => s.conditions?.find((x) => x.type === type);

describe('init containers', () => {
  test('a completed init container is ready; a running one is not', () => {
    const p = pod([c('app')], [c('init1'), c('init2')]);
    const s = status(p, [instance('init1', 'exited'), instance('init2', 'running')]);
    assert.equal(s.initContainerStatuses?.[0]?.ready, true);
    assert.equal(s.initContainerStatuses?.[1]?.ready, false);
    assert.equal(s.initContainerStatuses?.[1]?.started, true);
    assert.equal(s.phase, 'Pending');
  });

  test('a failed init container is not ready', () => {
    const p = pod([c('app')], [c('init1')], 'Never');
    const s = status(p, [instance('init1', 'exited', { exitCode: 1 })]);
    assert.equal(s.initContainerStatuses?.[0]?.ready, false);
    assert.equal(s.phase, 'Failed');
  });

  test('app containers wait in PodInitializing while init containers run or fail', () => {
    const p = pod([c('app')], [c('init1')]);
    const failing = status(p, [instance('init1', 'exited', { exitCode: 1 })], {
      waiting: new Map([['init1', { reason: 'CrashLoopBackOff', message: 'back-off' }]]),
    });
    assert.equal(failing.containerStatuses?.[0]?.state?.waiting?.reason, 'PodInitializing');
    assert.equal(failing.phase, 'Pending');
    const fresh = status(p, []);
    assert.equal(fresh.initContainerStatuses?.[0]?.state?.waiting?.reason, 'PodInitializing');
    assert.equal(fresh.containerStatuses?.[0]?.state?.waiting?.reason, 'PodInitializing');
  });

  test('without init containers the default waiting reason stays ContainerCreating', () => {
    const s = status(pod([c('app')]), []);
    assert.equal(s.containerStatuses?.[0]?.state?.waiting?.reason, 'ContainerCreating');
  });
});

describe('sidecars', () => {
  const withSidecar = () => pod([c('app')], [c('side', { restartPolicy: 'Always' })]);

  test('a sidecar failing its readiness probe keeps the pod from being Ready', () => {
    const s = status(withSidecar(), [instance('side', 'running'), instance('app', 'running')], {
      readiness: (name) => (name === 'side' ? false : undefined),
    });
    assert.equal(s.initContainerStatuses?.[0]?.ready, false);
    assert.equal(s.containerStatuses?.[0]?.ready, true);
    assert.equal(cond(s, 'ContainersReady')?.status, 'False');
    assert.equal(cond(s, 'ContainersReady')?.message, 'containers with unready status: [side]');
    assert.equal(cond(s, 'Ready')?.status, 'False');
    assert.equal(s.phase, 'Running');
  });

  test('a ready sidecar and app: Ready', () => {
    const s = status(withSidecar(), [instance('side', 'running'), instance('app', 'running')]);
    assert.equal(s.initContainerStatuses?.[0]?.ready, true);
    assert.equal(cond(s, 'Ready')?.status, 'True');
  });

  test('a sidecar not started yet: not ready, not initialized, Pending', () => {
    const s = status(withSidecar(), [instance('side', 'running')], {
      started: (name) => (name === 'side' ? false : undefined),
      readiness: (name) => (name === 'side' ? false : undefined),
    });
    assert.equal(s.initContainerStatuses?.[0]?.started, false);
    assert.equal(s.initContainerStatuses?.[0]?.ready, false);
    assert.equal(cond(s, 'Initialized')?.status, 'False');
    assert.equal(s.phase, 'Pending');
  });
});

describe('container restart policy', () => {
  test('restartPolicy Never on the container in an Always pod: exit 1 is Failed', () => {
    const p = pod([c('app', { restartPolicy: 'Never' })]);
    assert.equal(status(p, [instance('app', 'exited', { exitCode: 1 })]).phase, 'Failed');
    assert.equal(status(p, [instance('app', 'exited', { exitCode: 0 })]).phase, 'Succeeded');
  });

  test('one container that will restart keeps the pod Running', () => {
    const p = pod([c('a', { restartPolicy: 'Never' }), c('b')]);
    const s = status(p, [
      instance('a', 'exited', { exitCode: 1 }),
      instance('b', 'exited', { exitCode: 1 }),
    ]);
    assert.equal(s.phase, 'Running');
  });

  test('OnFailure on the container in a Never pod: a failure keeps it Running', () => {
    const p = pod([c('app', { restartPolicy: 'OnFailure' })], [], 'Never');
    assert.equal(status(p, [instance('app', 'exited', { exitCode: 2 })]).phase, 'Running');
  });
});

describe('terminated pods', () => {
  test('deleted Always pod: all stopped is terminal (Succeeded / Failed), not Running', () => {
    const deleted = (p: Pod): Pod => ({
      ...p,
      metadata: { ...p.metadata, deletionTimestamp: '2026-01-01T00:00:05Z' },
    });
    const p = deleted(pod([c('app')]));
    const ok = status(p, [instance('app', 'exited', { exitCode: 0 })], { terminal: true });
    assert.equal(ok.phase, 'Succeeded');
    const killed = status(p, [instance('app', 'exited', { exitCode: 137 })], { terminal: true });
    assert.equal(killed.phase, 'Failed');
    assert.equal(cond(killed, 'Ready')?.reason, 'PodCompleted');
  });

  test('containers removed after termination keep their terminated status and the phase', () => {
    const p = pod([c('app')]);
    const before = status(p, [instance('app', 'exited', { exitCode: 0, finishedAt: 4000 })], {
      terminal: true,
    });
    assert.equal(before.phase, 'Succeeded');
    const after = status(p, [], { previous: before, terminal: true });
    assert.equal(after.phase, 'Succeeded');
    const cs = after.containerStatuses?.[0];
    assert.equal(cs?.state?.waiting, undefined);
    assert.equal(cs?.state?.terminated?.finishedAt, '1970-01-01T00:00:04Z');
  });

  test('a running container gone from a terminal pod is ContainerStatusUnknown, phase Failed', () => {
    const p = pod([c('app')]);
    const running = status(p, [instance('app', 'running')]);
    const after = status(p, [], { previous: running, terminal: true });
    assert.equal(after.phase, 'Failed');
    const t = after.containerStatuses?.[0]?.state?.terminated;
    assert.equal(t?.reason, 'ContainerStatusUnknown');
    assert.equal(t?.exitCode, 137);
  });

  test('a terminal phase in the status manager is kept when the API still shows Running', () => {
    const p = pod([c('app')], [], 'Always', { phase: 'Running' });
    const s = status(p, [instance('app', 'running')], { previous: { phase: 'Failed' } });
    assert.equal(s.phase, 'Failed');
  });
});

describe('status details', () => {
  test('resources and allocatedResources of a container with an instance', () => {
    const resources = { requests: { cpu: '100m', memory: '64Mi' }, limits: { memory: '128Mi' } };
    const s = status(pod([c('app', { resources })]), [instance('app', 'running')]);
    const cs = s.containerStatuses?.[0];
    assert.deepEqual(cs?.resources, resources);
    assert.deepEqual(cs?.allocatedResources, resources.requests);
  });

  test('app container statuses are sorted by name, as upstream sorts them', () => {
    const s = status(pod([c('zeta'), c('alpha')]), []);
    assert.deepEqual(
      s.containerStatuses?.map((x) => x.name),
      ['alpha', 'zeta'],
    );
  });
});

describe('observedGeneration (GA in v1.35)', () => {
  test('the status and the kubelet conditions carry the pod generation', () => {
    const p = pod([c('app')]);
    const withGen: Pod = { ...p, metadata: { ...p.metadata, generation: 3 } };
    const s = status(withGen, [instance('app', 'running')]) as PodStatus & {
      observedGeneration?: number;
    };
    assert.equal(s.observedGeneration, 3);
    for (const type of ['Ready', 'ContainersReady', 'Initialized', 'PodReadyToStartContainers'])
      assert.equal((cond(s, type) as { observedGeneration?: number }).observedGeneration, 3, type);
    // The scheduler's condition is not the kubelet's to stamp.
    const scheduled = cond(s, 'PodScheduled') as { observedGeneration?: number };
    assert.equal(scheduled.observedGeneration, undefined);
  });

  test('never lower than a generation already reported', () => {
    const p = pod([c('app')]);
    const old: Pod = { ...p, metadata: { ...p.metadata, generation: 2 } };
    const s = status(old, [], {
      previous: { observedGeneration: 5 } as PodStatus,
    }) as PodStatus & { observedGeneration?: number };
    assert.equal(s.observedGeneration, 5);
  });

  test('a Succeeded pod is Initialized with reason PodCompleted; a failed init is not', () => {
    const ok = status(pod([c('app')], [c('i')], 'Never'), [
      instance('i', 'exited'),
      instance('app', 'exited'),
    ]);
    assert.equal(cond(ok, 'Initialized')?.reason, 'PodCompleted');
    const bad = status(pod([c('app')], [c('i')], 'Never'), [
      instance('i', 'exited', { exitCode: 1 }),
    ]);
    assert.equal(bad.phase, 'Failed');
    assert.equal(cond(bad, 'Initialized')?.status, 'False');
    assert.equal(cond(bad, 'Initialized')?.message, 'containers with incomplete status: [i]');
  });
});

describe('conditions of other controllers', () => {
  test("a readiness gate set in the API counts although the status manager's copy lacks it", () => {
    const p: Pod = {
      ...pod([c('app')], [], 'Always', {
        conditions: [
          { type: 'PodScheduled', status: 'True' },
          { type: 'example.com/gate', status: 'True' },
        ],
      }),
    };
    const gated: Pod = {
      ...p,
      spec: {
        ...p.spec,
        readinessGates: [{ conditionType: 'example.com/gate' }],
        containers: [c('app')],
      },
    };
    const s = status(gated, [instance('app', 'running')], {
      previous: { conditions: [{ type: 'PodScheduled', status: 'True' }] },
    });
    assert.equal(cond(s, 'Ready')?.status, 'True');
    assert.equal(cond(s, 'example.com/gate')?.status, 'True');
  });
});
