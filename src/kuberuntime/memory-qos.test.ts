import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { containerOomScoreAdjust, containerUnified } from './memory-qos.ts';

const GI = 1024 ** 3;
const MI = 1024 ** 2;

function container(
  name: string,
  requests?: string,
  limits?: string,
  restartPolicy?: string,
): Container {
  return {
    name,
    ...(restartPolicy !== undefined && { restartPolicy }),
    resources: {
      ...(requests !== undefined && { requests: { memory: requests } }),
      ...(limits !== undefined && { limits: { memory: limits } }),
    },
  };
}

const pod = (containers: Container[], extra: Partial<NonNullable<Pod['spec']>> = {}): Pod => ({
  metadata: { name: 'p', namespace: 'ns', uid: 'u' },
  spec: { containers, ...extra },
});

describe('containerOomScoreAdjust (upstream qos.GetContainerOOMScoreAdjust)', () => {
  test('Guaranteed -997, BestEffort 1000, node-critical -997 whatever its class', () => {
    const c = container('a', '1Gi', '1Gi');
    assert.equal(containerOomScoreAdjust(pod([c]), c, 'Guaranteed', 16 * GI), -997);
    const b = container('b');
    assert.equal(containerOomScoreAdjust(pod([b]), b, 'BestEffort', 16 * GI), 1000);
    const critical = pod([b], {
      priority: 2_000_001_000,
      priorityClassName: 'system-node-critical',
    });
    assert.equal(containerOomScoreAdjust(critical, b, 'BestEffort', 16 * GI), -997);
    // system-cluster-critical is critical but not node-critical: its class decides.
    const cluster = pod([b], {
      priority: 2_000_000_000,
      priorityClassName: 'system-cluster-critical',
    });
    assert.equal(containerOomScoreAdjust(cluster, b, 'BestEffort', 16 * GI), 1000);
  });

  test('Burstable: 1000 - 1000 * request / capacity, within 3..999', () => {
    const tenth = container('a', '1640Mi');
    assert.equal(containerOomScoreAdjust(pod([tenth]), tenth, 'Burstable', 16 * GI), 900);
    const none = container('a', undefined, '1Gi');
    assert.equal(containerOomScoreAdjust(pod([none]), none, 'Burstable', 16 * GI), 999);
    const all = container('a', '16Gi', '32Gi');
    assert.equal(containerOomScoreAdjust(pod([all]), all, 'Burstable', 16 * GI), 3);
    // Capacity not known yet: the least protected Burstable value.
    assert.equal(containerOomScoreAdjust(pod([tenth]), tenth, 'Burstable', undefined), 999);
  });

  test('a sidecar is never less protected than the regular containers', () => {
    const app = container('app', '4Gi');
    const side = container('side', '64Mi', undefined, 'Always');
    const p = pod([app], { initContainers: [side] });
    // app: 1000 - 1000*4/16 = 750; the sidecar alone would be 997, takes the app's 750.
    assert.equal(containerOomScoreAdjust(p, side, 'Burstable', 16 * GI), 750);
    assert.equal(containerOomScoreAdjust(p, app, 'Burstable', 16 * GI), 750);
  });
});

describe('containerUnified', () => {
  const v2 = { cgroupV2: true, singleProcessOOMKill: null } as const;
  const qos = { throttlingFactor: 0.9, allocatableMemoryBytes: 8 * GI };

  test('cgroup v1: nothing', () => {
    const c = container('a', '100Mi', '200Mi');
    assert.deepEqual(
      containerUnified(c, { cgroupV2: false, singleProcessOOMKill: null, memoryQos: qos }),
      {},
    );
  });

  test('v2: memory.oom.group unless singleProcessOOMKill; MemoryQoS off clears memory.high', () => {
    const c = container('a', '100Mi', '200Mi');
    assert.deepEqual(containerUnified(c, v2), { 'memory.oom.group': '1', 'memory.high': 'max' });
    assert.deepEqual(containerUnified(c, { ...v2, singleProcessOOMKill: true }), {
      'memory.high': 'max',
    });
  });

  test('MemoryQoS: memory.high = floor((request + factor * (limit - request)) / page) * page', () => {
    const c = container('a', '100Mi', '200Mi');
    const high = Math.floor((100 * MI + 0.9 * 100 * MI) / 4096) * 4096;
    assert.deepEqual(containerUnified(c, { ...v2, memoryQos: qos }), {
      'memory.oom.group': '1',
      'memory.min': '0',
      'memory.low': '0',
      'memory.high': String(high),
    });
  });

  test('MemoryQoS: no limit throttles against allocatable; equal request and limit sets none', () => {
    const burst = container('a', '1Gi');
    const high = Math.floor((GI + 0.9 * 7 * GI) / 4096) * 4096;
    assert.equal(containerUnified(burst, { ...v2, memoryQos: qos })['memory.high'], String(high));
    const best = container('b');
    assert.equal(
      containerUnified(best, { ...v2, memoryQos: qos })['memory.high'],
      String(Math.floor((0.9 * 8 * GI) / 4096) * 4096),
    );
    const guaranteed = container('g', '1Gi', '1Gi');
    assert.equal(containerUnified(guaranteed, { ...v2, memoryQos: qos })['memory.high'], undefined);
    // Allocatable not known yet: no memory.high rather than a wrong one.
    const unknown = { throttlingFactor: 0.9, allocatableMemoryBytes: undefined };
    assert.equal(containerUnified(burst, { ...v2, memoryQos: unknown })['memory.high'], undefined);
  });
});
