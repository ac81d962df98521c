import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Node, Pod } from 'kubernetes-types/core/v1.js';
import { MemoryEventRecorder } from '../events/types.ts';
import { ResizeConditions } from '../status/resize-conditions.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { admitResize } from './admit.ts';
import { PodAllocationManager, RETRY_DELAY_MS } from './manager.ts';
import { MemoryResourceState } from './state.ts';

const node: Node = {
  metadata: { name: 'n1' },
  status: { allocatable: { cpu: '2', memory: '4Gi', pods: '110' } },
};

function pod(uid: string, cpu: string, extra: { generation?: number; memory?: string } = {}): Pod {
  const memory = extra.memory ?? '64Mi';
  return {
    metadata: { uid, name: uid, namespace: 'default', generation: extra.generation ?? 1 },
    spec: {
      nodeName: 'n1',
      containers: [
        {
          name: 'c',
          image: 'busybox',
          resources: { requests: { cpu, memory }, limits: { cpu, memory } },
        },
      ],
    },
  };
}

function setup(options: { cpuManagerPolicy?: string; podLevelResize?: boolean } = {}) {
  const pods = new Map<string, Pod>();
  const conditions = new ResizeConditions(new FakeClock());
  const recorder = new MemoryEventRecorder();
  const synced: string[] = [];
  const clock = new FakeClock();
  const state = new MemoryResourceState();
  const manager = new PodAllocationManager({
    state,
    conditions,
    admit: (desired, allocated, others) =>
      admitResize(desired, allocated, others, {
        node: () => node,
        cpuManagerPolicy: options.cpuManagerPolicy ?? 'none',
        memoryManagerPolicy: 'None',
        ...(options.podLevelResize !== undefined && { podLevelResize: options.podLevelResize }),
      }),
    activePods: () =>
      [...pods.values()].filter((p) => !['Succeeded', 'Failed'].includes(p.status?.phase ?? '')),
    podByUid: (uid) => pods.get(uid),
    sourcesReady: () => true,
    triggerSync: (p) => synced.push(p.metadata?.uid ?? ''),
    recorder,
    clock,
    logger: new MemoryLogger(),
  });
  const add = async (p: Pod): Promise<void> => {
    pods.set(p.metadata?.uid ?? '', p);
    await manager.addPod(p);
  };
  const update = async (p: Pod): Promise<void> => {
    pods.set(p.metadata?.uid ?? '', p);
    await manager.podUpdated(p);
  };
  return { pods, conditions, recorder, synced, clock, state, manager, add, update };
}

describe('PodAllocationManager', () => {
  test('a resize that fits is allocated: checkpoint, PodResizeInProgress, ResizeStarted, sync', async () => {
    const t = setup();
    await t.add(pod('a', '500m'));
    await t.update(pod('a', '1', { generation: 2 }));
    assert.equal(t.state.get('a')?.containerResources['c']?.limits?.['cpu'], '1');
    const [inProgress] = t.conditions.get('a');
    assert.equal(inProgress?.type, 'PodResizeInProgress');
    assert.equal(inProgress?.observedGeneration, 2);
    assert.deepEqual(t.recorder.reasons(), ['ResizeStarted']);
    assert.match(
      t.recorder.events[0]?.message ?? '',
      /^Pod resize started: \{"containers":\[\{"name":"c","resources":\{"limits":\{"cpu":"1","memory":"64Mi"\},"requests":\{"cpu":"1","memory":"64Mi"\}\}\}\],"generation":2\}$/,
    );
    assert.deepEqual(t.synced, ['a']);
    assert.equal(t.manager.podFromAllocation(pod('a', '1')).updated, false);
  });

  test('a resize that does not fit beside the others is Deferred, and applied once one leaves', async () => {
    const t = setup();
    await t.add(pod('big', '1500m'));
    await t.add(pod('b', '250m'));
    await t.update(pod('b', '750m', { generation: 2 }));
    const [pending] = t.conditions.get('b');
    assert.equal(pending?.type, 'PodResizePending');
    assert.equal(pending?.reason, 'Deferred');
    assert.equal(
      pending?.message,
      "Node didn't have enough resource: cpu, requested: 750, used: 1500, capacity: 2000",
    );
    assert.deepEqual(t.recorder.reasons(), ['ResizeDeferred']);
    assert.match(t.recorder.events[0]?.message ?? '', /^Pod resize OutOfcpu: \{/);
    // Still allocated at its old size: the other pods are judged against that.
    assert.equal(
      t.manager.podFromAllocation(pod('b', '750m')).pod.spec?.containers[0]?.resources?.limits?.[
        'cpu'
      ],
      '250m',
    );
    assert.equal(t.manager.hasPendingResizes(), true);
    t.pods.delete('big');
    await t.manager.removePod('big');
    assert.equal(t.state.get('b')?.containerResources['c']?.limits?.['cpu'], '750m');
    assert.deepEqual(
      t.conditions.get('b').map((c) => c.type),
      ['PodResizeInProgress'],
    );
    assert.equal(t.manager.hasPendingResizes(), false);
  });

  test('a deferred resize is retried when another pod ends (terminal phase)', async () => {
    const t = setup();
    await t.add(pod('big', '1500m'));
    await t.add(pod('b', '250m'));
    await t.update(pod('b', '750m', { generation: 2 }));
    assert.equal(t.conditions.get('b')[0]?.reason, 'Deferred');
    const ended: Pod = { ...pod('big', '1500m'), status: { phase: 'Succeeded' } };
    t.pods.set('big', ended);
    await t.manager.podUpdated(ended);
    assert.equal(t.state.get('b')?.containerResources['c']?.limits?.['cpu'], '750m');
    assert.deepEqual(t.recorder.reasons(), ['ResizeDeferred', 'ResizeStarted']);
  });

  test('a deferred resize is retried periodically (3 minutes after a retry)', async () => {
    const t = setup();
    await t.add(pod('big', '1500m'));
    await t.add(pod('b', '250m'));
    await t.update(pod('b', '750m', { generation: 2 }));
    const ac = new AbortController();
    const run = t.manager.run(ac.signal);
    // Shrinking the other pod's allocation (its own resize) makes room.
    await t.state.set('big', {
      containerResources: { c: { requests: { cpu: '1' }, limits: { cpu: '1' } } },
    });
    await t.clock.advance(RETRY_DELAY_MS);
    assert.equal(t.state.get('b')?.containerResources['c']?.limits?.['cpu'], '750m');
    ac.abort();
    await run;
  });

  test('Infeasible: Guaranteed cpu resize with the static CPU manager policy; it leaves the queue', async () => {
    const t = setup({ cpuManagerPolicy: 'static' });
    await t.add(pod('a', '500m'));
    await t.update(pod('a', '1', { generation: 2 }));
    const [pending] = t.conditions.get('a');
    assert.equal(pending?.reason, 'Infeasible');
    assert.equal(
      pending?.message,
      'Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"',
    );
    assert.deepEqual(t.recorder.reasons(), ['ResizeInfeasible']);
    assert.equal(t.manager.hasPendingResizes(), false);
  });

  const withLevel = (cpu: string, generation: number): Pod => {
    const p = pod('a', '500m', { generation });
    return {
      ...p,
      spec: { ...p.spec, resources: { limits: { cpu } } } as NonNullable<Pod['spec']>,
    };
  };

  test('a resize of pod-level resources is allocated (InPlacePodLevelResourcesVerticalScaling on)', async () => {
    const t = setup();
    await t.add(withLevel('1', 1));
    await t.update(withLevel('1500m', 2));
    assert.deepEqual(t.state.get('a')?.podLevelResources, { limits: { cpu: '1500m' } });
    assert.equal(t.conditions.get('a')[0]?.type, 'PodResizeInProgress');
    assert.deepEqual(t.synced, ['a']);
  });

  test('a pod-level resize that does not fit is Deferred like a container one', async () => {
    const t = setup();
    await t.add(pod('big', '1500m'));
    const p = pod('a', '100m');
    const level = (cpu: string, generation: number): Pod => ({
      ...p,
      metadata: { ...p.metadata, generation },
      spec: { ...p.spec, resources: { requests: { cpu }, limits: { cpu } } } as NonNullable<
        Pod['spec']
      >,
    });
    await t.add(level('200m', 1));
    await t.update(level('900m', 2));
    assert.equal(t.conditions.get('a')[0]?.reason, 'Deferred');
  });

  test("Infeasible: a resize of pod-level resources with the gate off, in upstream's words", async () => {
    const t = setup({ podLevelResize: false });
    await t.add(withLevel('1', 1));
    await t.update(withLevel('2', 2));
    assert.equal(t.conditions.get('a')[0]?.reason, 'Infeasible');
    assert.equal(
      t.conditions.get('a')[0]?.message,
      'InPlacePodLevelResourcesVerticalScaling is disabled',
    );
  });

  test('a reverted resize clears PodResizePending', async () => {
    const t = setup();
    await t.add(pod('big', '1500m'));
    await t.add(pod('b', '250m'));
    await t.update(pod('b', '750m', { generation: 2 }));
    await t.update(pod('b', '250m', { generation: 3 }));
    assert.deepEqual(t.conditions.get('b'), []);
  });

  test('after a restart the checkpoint wins: a spec that differs is a pending resize', async () => {
    const t = setup();
    await t.state.set('a', {
      containerResources: {
        c: { requests: { cpu: '500m', memory: '64Mi' }, limits: { cpu: '500m', memory: '64Mi' } },
      },
    });
    await t.add(pod('a', '1', { generation: 2 }));
    assert.equal(t.state.get('a')?.containerResources['c']?.limits?.['cpu'], '1');
    assert.deepEqual(t.recorder.reasons(), ['ResizeStarted']);
  });
});
