import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Pod, PodStatus, ResourceRequirements } from 'kubernetes-types/core/v1.js';
import { podResourcesStatus } from './pod-resources.ts';

function pod(phase: string, containers: Container[], resources?: ResourceRequirements): Pod {
  return {
    metadata: { uid: 'u', name: 'p', namespace: 'default' },
    spec: { containers, ...(resources !== undefined && { resources }) },
    status: { phase },
  };
}

const c = (name: string, resources: ResourceRequirements): Container => ({
  name,
  image: 'busybox',
  resources,
});

describe('podResourcesStatus', () => {
  test('before the pod runs: the pod-level requests and limits as written', () => {
    const r = { requests: { cpu: '800m', memory: '128Mi' }, limits: { cpu: '1', memory: '256Mi' } };
    const p = pod('Pending', [c('a', { requests: { cpu: '100m' } })], r);
    assert.deepEqual(podResourcesStatus(p, undefined, undefined), r);
  });

  test("before the pod runs, without pod-level resources: the containers' requests and limits summed", () => {
    const p = pod('Pending', [
      c('a', { requests: { cpu: '100m', memory: '32Mi' }, limits: { memory: '64Mi' } }),
      c('b', { requests: { cpu: '200m' }, limits: { cpu: '500m', memory: '64Mi' } }),
    ]);
    assert.deepEqual(podResourcesStatus(p, undefined, undefined), {
      // A limit without a request is the request too (as API defaulting makes it).
      requests: { cpu: '300m', memory: '96Mi' },
      limits: { cpu: '500m', memory: '128Mi' },
    });
  });

  test('running: cpu and memory limits read back from the pod cgroup after a pod-level resize', () => {
    const p = pod('Running', [c('a', { requests: { cpu: '100m' } })], {
      requests: { cpu: '800m', memory: '128Mi' },
      limits: { cpu: '900m', memory: '256Mi' },
    });
    // The cgroup still has the old cpu limit: the status says what the pod has.
    const got = podResourcesStatus(p, undefined, {
      cpuShares: 819,
      cpuQuota: 80000,
      cpuPeriod: 100000,
      memoryLimit: 256 * 1024 * 1024,
    });
    assert.deepEqual(got, {
      requests: { cpu: '800m', memory: '128Mi' },
      limits: { cpu: '800m', memory: '256Mi' },
    });
  });

  test('running without pod-level resources: cpu request from cpu.shares, memory request from the containers', () => {
    const p = pod('Running', [c('a', { requests: { cpu: '100m', memory: '32Mi' } })]);
    const got = podResourcesStatus(p, undefined, {
      cpuShares: 102,
      cpuQuota: -1,
      cpuPeriod: 100000,
    });
    assert.deepEqual(got, { requests: { cpu: '100m', memory: '32Mi' } });
  });

  test('running with nothing read back: the previous running status keeps its values', () => {
    const p = pod('Running', [c('a', {})]);
    const resources = { requests: { cpu: '250m' }, limits: { cpu: '500m', memory: '64Mi' } };
    const previous = { phase: 'Running', resources } as PodStatus;
    assert.deepEqual(podResourcesStatus(p, previous, undefined), resources);
    assert.deepEqual(podResourcesStatus(p, { ...previous, phase: 'Pending' }, undefined), {});
  });

  test('at the cgroup floors the allocated value stays (2 shares, a 10m quota)', () => {
    const p = pod('Running', [c('a', {})], {
      requests: { cpu: '1m' },
      limits: { cpu: '5m' },
    });
    const got = podResourcesStatus(p, undefined, {
      cpuShares: 2,
      cpuQuota: 1000,
      cpuPeriod: 100000,
    });
    assert.deepEqual(got, { requests: { cpu: '1m' }, limits: { cpu: '5m' } });
  });
});
