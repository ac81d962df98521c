import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod, PodStatus } from 'kubernetes-types/core/v1.js';
import { FakeClock } from '../util/clock.ts';
import { generatePodStatus } from './generate.ts';
import { statusPatch } from './manager.ts';
import { ResizeConditions } from './resize-conditions.ts';
import { runtimeContainer, runtimeStatus } from './testing.ts';

const NOW = new Date('2026-01-01T00:00:10Z');
const r = (cpu: string, memory: string) => ({
  requests: { cpu, memory },
  limits: { cpu, memory },
});

function pod(cpu: string): Pod {
  return {
    metadata: { uid: 'u1', name: 'p', namespace: 'ns', generation: 3 },
    spec: { containers: [{ name: 'c', image: 'busybox:1', resources: r(cpu, '64Mi') }] },
  };
}

describe('resize in the pod status', () => {
  test('resources come from the runtime while running; allocatedResources from the allocation', () => {
    const s = generatePodStatus({
      pod: pod('800m'),
      allocatedPod: pod('400m'),
      runtime: runtimeStatus([
        runtimeContainer('c', 'running', {
          // The runtime still runs the old size (quota 20000/100000, shares 204).
          resources: { cpuLimit: 200, cpuRequest: 200, memoryLimit: 64 * 1024 * 1024 },
        }),
      ]),
      actuated: () => r('200m', '64Mi'),
      waiting: new Map(),
      runtimeName: 'containerd',
      hostIPs: [],
      now: NOW,
    });
    const c = s.containerStatuses?.[0];
    assert.deepEqual(c?.resources, r('200m', '64Mi'));
    assert.deepEqual(c?.allocatedResources, { cpu: '400m', memory: '64Mi' });
  });

  test('a stopped container reports its allocation', () => {
    const s = generatePodStatus({
      pod: pod('800m'),
      allocatedPod: pod('400m'),
      runtime: runtimeStatus([runtimeContainer('c', 'exited')]),
      waiting: new Map(),
      runtimeName: 'containerd',
      hostIPs: [],
      now: NOW,
    });
    assert.deepEqual(s.containerStatuses?.[0]?.resources, r('400m', '64Mi'));
  });

  test('the resize conditions are reported with their own generation, dropped once terminal', () => {
    const conditions = new ResizeConditions(new FakeClock(NOW.getTime()));
    assert.equal(conditions.setPending('u1', 'OutOfcpu', 'no room', 2), true);
    assert.equal(conditions.setPending('u1', 'OutOfmemory', 'no room', 2), false);
    assert.equal(conditions.get('u1')[0]?.reason, 'Deferred');
    const s = generatePodStatus({
      pod: pod('400m'),
      runtime: runtimeStatus([runtimeContainer('c', 'running')]),
      resizeConditions: conditions.get('u1'),
      waiting: new Map(),
      runtimeName: 'containerd',
      hostIPs: [],
      now: NOW,
    });
    const pending = s.conditions?.find((c) => c.type === 'PodResizePending') as
      { observedGeneration?: number; reason?: string } | undefined;
    assert.equal(pending?.reason, 'Deferred');
    assert.equal(pending?.observedGeneration, 2);
    const done = generatePodStatus({
      pod: pod('400m'),
      runtime: runtimeStatus([runtimeContainer('c', 'exited', { exitCode: 1 })]),
      resizeConditions: conditions.get('u1'),
      terminal: true,
      waiting: new Map(),
      runtimeName: 'containerd',
      hostIPs: [],
      now: NOW,
    });
    assert.equal(
      done.conditions?.some((c) => c.type === 'PodResizePending'),
      false,
    );
  });

  test('PodResizeInProgress keeps its generation and reason until cleared', () => {
    const conditions = new ResizeConditions(new FakeClock());
    conditions.setInProgress('u1', '', '', 2);
    const error = conditions.setInProgress('u1', 'Error', 'boom', 5);
    assert.deepEqual(error, { generation: 2, changed: true });
    assert.deepEqual(conditions.setInProgress('u1', '', '', 7), { generation: 2, changed: false });
    assert.equal(conditions.get('u1')[0]?.message, 'boom');
    assert.equal(conditions.clearInProgress('u1'), 2);
    assert.deepEqual(conditions.get('u1'), []);
  });

  test('the status patch deletes a resize condition the API has and the status dropped', () => {
    const before: PodStatus = {
      conditions: [
        { type: 'Ready', status: 'True' },
        { type: 'PodResizeInProgress', status: 'True' },
      ],
    };
    const patch = statusPatch({ conditions: [{ type: 'Ready', status: 'True' }] }, before);
    assert.deepEqual(patch['conditions'], [
      { type: 'Ready', status: 'True' },
      { type: 'PodResizeInProgress', $patch: 'delete' },
    ]);
  });

  test('the status patch drops a pod-level resource the status no longer has (null in the merge)', () => {
    const before = {
      resources: { requests: { cpu: '800m', memory: '64Mi' }, limits: { cpu: '1' } },
    } as PodStatus;
    const now = { resources: { requests: { cpu: '900m' } } } as PodStatus;
    assert.deepEqual(statusPatch(now, before)['resources'], {
      requests: { memory: null, cpu: '900m' },
      limits: { cpu: null },
    });
  });
});
