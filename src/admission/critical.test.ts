import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Node, Pod } from 'kubernetes-types/core/v1.js';
import { admitPod, isCriticalPod } from './predicates.ts';

const full: Node = {
  metadata: { name: 'n1', labels: { 'kubernetes.io/os': 'linux' } },
  spec: { taints: [{ key: 'k', effect: 'NoExecute' }] },
  status: { allocatable: { cpu: '1', memory: '1Gi', pods: '1' } },
};

function pod(
  name: string,
  extra: { annotations?: Record<string, string>; priority?: number } = {},
): Pod {
  return {
    metadata: {
      name,
      namespace: 'kube-system',
      uid: `uid-${name}`,
      ...(extra.annotations !== undefined && { annotations: extra.annotations }),
    },
    spec: {
      nodeName: 'n1',
      ...(extra.priority !== undefined && { priority: extra.priority }),
      tolerations: [{ operator: 'Exists' }],
      containers: [{ name: 'c', image: 'x', resources: { requests: { cpu: '2' } } }],
    },
  };
}

describe('critical pods (upstream kubetypes.IsCriticalPod)', () => {
  test('static, mirror and system-critical priority pods are critical; others are not', () => {
    assert.equal(
      isCriticalPod(pod('s', { annotations: { 'kubernetes.io/config.source': 'file' } })),
      true,
    );
    assert.equal(
      isCriticalPod(pod('m', { annotations: { 'kubernetes.io/config.mirror': 'h' } })),
      true,
    );
    assert.equal(isCriticalPod(pod('p', { priority: 2_000_001_000 })), true);
    assert.equal(isCriticalPod(pod('c', { priority: 2_000_000_000 })), true);
    assert.equal(isCriticalPod(pod('n', { priority: 1_999_999_999 })), false);
    assert.equal(
      isCriticalPod(pod('api', { annotations: { 'kubernetes.io/config.source': 'api' } })),
      false,
    );
  });

  test('a critical pod is admitted on a full node; an ordinary one is not', () => {
    const active = [pod('running')];
    const critical = pod('etcd', { annotations: { 'kubernetes.io/config.source': 'file' } });
    assert.deepEqual(admitPod({ pod: critical, node: full, active }), { admit: true });
    const ordinary = admitPod({ pod: pod('web'), node: full, active });
    assert.equal(ordinary.admit, false);
  });
});
