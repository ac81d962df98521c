import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Pod, ResourceRequirements } from 'kubernetes-types/core/v1.js';
import { podResources } from '../cm/pod-cgroups.ts';
import { containerConfig } from './runtime-config.ts';
import { isPodLevelResourcesSet } from '../container/pod-level.ts';
import { podRequests } from '../container/pod-requests.ts';
import { qosClassOf } from '../container/qos.ts';

/** A pod as the API server stores it with pod-level resources (requests defaulted). */
function pod(podLevel: ResourceRequirements | undefined, containers: Partial<Container>[]): Pod {
  return {
    metadata: { name: 'plr', namespace: 'ns', uid: 'u1' },
    spec: {
      containers: containers.map((c, i) => ({ name: `c${i}`, image: 'x', ...c })),
      ...(podLevel !== undefined && { resources: podLevel }),
    },
  };
}

const guaranteedAtPodLevel = {
  requests: { cpu: '80m', memory: '95Mi' },
  limits: { cpu: '80m', memory: '95Mi' },
};

describe('pod-level resources (spec.resources)', () => {
  test('only cpu and memory at pod level count as set', () => {
    assert.equal(isPodLevelResourcesSet(pod(undefined, [{}])), false);
    assert.equal(isPodLevelResourcesSet(pod({}, [{}])), false);
    assert.equal(isPodLevelResourcesSet(pod({ limits: { 'example.com/x': '1' } }, [{}])), false);
    assert.equal(isPodLevelResourcesSet(pod({ limits: { memory: '1Gi' } }, [{}])), true);
  });

  test('the QoS class comes from the pod level alone, the containers ignored', () => {
    // Containers without resources would make the pod BestEffort.
    assert.equal(qosClassOf(pod(guaranteedAtPodLevel, [{}, {}])), 'Guaranteed');
    assert.equal(
      qosClassOf(pod({ requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '80m' } }, [{}])),
      'Burstable',
    );
    // Guaranteed containers do not make a pod with a burstable pod level Guaranteed.
    const full = { resources: { limits: { cpu: '1', memory: '1Gi' } } };
    assert.equal(qosClassOf(pod({ requests: { cpu: '1' } }, [full])), 'Burstable');
    assert.equal(qosClassOf(pod(undefined, [full])), 'Guaranteed');
  });

  test("the pod's requests are the pod-level ones for cpu and memory, plus overhead", () => {
    const p = pod({ requests: { cpu: '300m' } }, [
      { resources: { requests: { cpu: '100m', memory: '10Mi', 'ephemeral-storage': '1Gi' } } },
    ]);
    assert.deepEqual(podRequests(p), { cpu: 300, memory: 10 * 2 ** 20, ephemeral: 2 ** 30 });
    (p.spec as { overhead?: Record<string, string> }).overhead = { cpu: '10m' };
    assert.equal(podRequests(p).cpu, 310);
  });

  test('the pod cgroup is limited by the pod-level limits, even where containers set none', () => {
    const r = podResources(pod(guaranteedAtPodLevel, [{}, {}]), 0);
    assert.equal(r.cpuQuota, 8000);
    assert.equal(r.memoryLimit, 95 * 2 ** 20);
    assert.equal(r.cpuShares, Math.floor((80 * 1024) / 1000));
    // Without a pod-level cpu limit the containers' rule holds: one lacks a limit, so none.
    const noCpu = podResources(
      pod({ requests: { cpu: '100m', memory: '64Mi' }, limits: { memory: '64Mi' } }, [{}]),
      0,
    );
    assert.equal(noCpu.cpuQuota, -1);
    assert.equal(noCpu.memoryLimit, 64 * 2 ** 20);
  });

  test('a container limit left unset is the pod-level limit; one the container sets stays', () => {
    const p = pod(guaranteedAtPodLevel, [
      {},
      { resources: { requests: { cpu: '20m' }, limits: { cpu: '40m', memory: '50Mi' } } },
    ]);
    const [first, second] = p.spec?.containers ?? [];
    assert.ok(first !== undefined && second !== undefined);
    const a = containerConfig(p, first, 0, 'img', [], []).linux?.resources;
    assert.equal(a?.cpuQuota, 8000n);
    assert.equal(a?.cpuPeriod, 100_000n);
    assert.equal(a?.memoryLimitInBytes, BigInt(95 * 2 ** 20));
    assert.equal(a?.cpuShares, 2n, 'shares follow the container request, which it has none of');
    const b = containerConfig(p, second, 0, 'img', [], []).linux?.resources;
    assert.equal(b?.cpuQuota, 4000n);
    assert.equal(b?.memoryLimitInBytes, BigInt(50 * 2 ** 20));
    assert.equal(b?.cpuShares, 20n);
    // Without pod-level resources nothing changes: no limit, no quota.
    const plain = pod(undefined, [{}]);
    const [c] = plain.spec?.containers ?? [];
    assert.ok(c !== undefined);
    const none = containerConfig(plain, c, 0, 'img', [], []).linux?.resources;
    assert.equal(none?.cpuQuota, 0n);
    assert.equal(none?.memoryLimitInBytes, 0n);
  });
});
