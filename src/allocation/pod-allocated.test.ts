import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Pod, ResourceRequirements } from 'kubernetes-types/core/v1.js';
import { statusPatch } from '../status/manager.ts';
import { podAllocatedResources } from './pod-allocated.ts';

function pod(
  containers: Partial<Container>[],
  extra: {
    resources?: ResourceRequirements;
    init?: Partial<Container>[];
    overhead?: Record<string, string>;
  } = {},
): Pod {
  const named = (cs: Partial<Container>[], p: string) =>
    cs.map((c, i) => ({ name: `${p}${i}`, image: 'x', ...c }));
  return {
    metadata: { name: 'p', namespace: 'ns', uid: 'u' },
    spec: {
      containers: named(containers, 'c'),
      ...(extra.init !== undefined && { initContainers: named(extra.init, 'i') }),
      ...(extra.overhead !== undefined && { overhead: extra.overhead }),
      ...(extra.resources !== undefined && { resources: extra.resources }),
    },
  };
}

describe("status.allocatedResources (upstream's PodRequests of the allocated pod)", () => {
  test('nothing requested: no field', () => {
    assert.equal(podAllocatedResources(pod([{}, {}])), undefined);
  });

  test('app containers add up, every resource name, printed as Go prints a new quantity', () => {
    const got = podAllocatedResources(
      pod([
        { resources: { requests: { cpu: '250m', memory: '64Mi', 'example.com/dongle': '1' } } },
        { resources: { requests: { cpu: '750m', memory: '64Mi', 'ephemeral-storage': '1Gi' } } },
      ]),
    );
    assert.deepEqual(got, {
      cpu: '1',
      'ephemeral-storage': '1Gi',
      'example.com/dongle': '1',
      memory: '128Mi',
    });
  });

  test('init containers: the largest with the sidecars before it, against apps plus sidecars', () => {
    const got = podAllocatedResources(
      pod([{ resources: { requests: { cpu: '100m' } } }], {
        init: [
          { restartPolicy: 'Always', resources: { requests: { cpu: '200m' } } },
          { resources: { requests: { cpu: '500m' } } },
        ],
      }),
    );
    assert.deepEqual(got, { cpu: '700m' });
  });

  test('pod-level requests replace the sum as written; overhead is added', () => {
    const p = pod([{ resources: { requests: { cpu: '100m', memory: '10Mi' } } }], {
      resources: { requests: { cpu: '0.5', memory: '95Mi' }, limits: { cpu: '1' } },
    });
    assert.deepEqual(podAllocatedResources(p), { cpu: '0.5', memory: '95Mi' });
    const withOverhead = pod([{}], {
      resources: { requests: { memory: '95Mi' } },
      overhead: { memory: '1Mi' },
    });
    assert.deepEqual(podAllocatedResources(withOverhead), { memory: '96Mi' });
  });

  test('the status patch sends the map, and null for a resource a resize dropped', () => {
    const now = { phase: 'Running', allocatedResources: { cpu: '1' } } as never;
    assert.deepEqual(statusPatch(now)['allocatedResources'], { cpu: '1' });
    const before = { allocatedResources: { cpu: '2', memory: '1Gi' } } as never;
    assert.deepEqual(statusPatch(now, before)['allocatedResources'], { cpu: '1', memory: null });
    assert.equal(statusPatch({ phase: 'Running' })['allocatedResources'], undefined);
  });
});
