import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Node, Pod } from 'kubernetes-types/core/v1.js';
import { podRequests } from '../container/pod-requests.ts';
import { admitPod, type PodAdmitResult } from './predicates.ts';

function node(over: { allocatable?: Record<string, string>; taints?: Node['spec'] } = {}): Node {
  return {
    metadata: { name: 'n1', labels: { 'kubernetes.io/os': 'linux', zone: 'a', rank: '5' } },
    spec: over.taints ?? {},
    status: { allocatable: over.allocatable ?? { cpu: '2', memory: '1Gi', pods: '3' } },
  };
}

function pod(name: string, spec: Partial<Pod['spec']> = {}, containers?: Container[]): Pod {
  return {
    metadata: { name, namespace: 'default', uid: `uid-${name}` },
    spec: { nodeName: 'n1', containers: containers ?? [{ name: 'c', image: 'x' }], ...spec },
  };
}

function withRequests(name: string, cpu: string, memory?: string): Pod {
  return pod(name, {}, [
    {
      name: 'c',
      image: 'x',
      resources: { requests: { cpu, ...(memory !== undefined && { memory }) } },
    },
  ]);
}

function rejected(r: PodAdmitResult): { reason: string; message: string } {
  assert.equal(r.admit, false, 'expected a rejection');
  if (r.admit) throw new Error('unreachable');
  return { reason: r.reason, message: r.message };
}

describe('admitPod', () => {
  test('a pod that fits is admitted', () => {
    assert.deepEqual(admitPod({ pod: withRequests('a', '500m'), node: node(), active: [] }), {
      admit: true,
    });
  });

  test('cpu beyond allocatable minus what admitted pods request is OutOfcpu', () => {
    const r = rejected(
      admitPod({
        pod: withRequests('b', '1500m'),
        node: node(),
        active: [withRequests('a', '1')],
      }),
    );
    assert.equal(r.reason, 'OutOfcpu');
    assert.equal(
      r.message,
      "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000",
    );
  });

  test('memory is checked in bytes and gives OutOfmemory', () => {
    const r = rejected(admitPod({ pod: withRequests('b', '1m', '2Gi'), node: node(), active: [] }));
    assert.equal(r.reason, 'OutOfmemory');
    assert.match(r.message, /requested: 2147483648, used: 0, capacity: 1073741824/);
  });

  test('the pod count is checked first: OutOfpods', () => {
    const active = [pod('a'), pod('b'), pod('c')];
    const r = rejected(admitPod({ pod: withRequests('d', '100'), node: node(), active }));
    assert.equal(r.reason, 'OutOfpods');
    assert.match(r.message, /pods, requested: 1, used: 3, capacity: 3/);
  });

  test('a pod without requests fits a full node (BestEffort)', () => {
    const active = [withRequests('a', '2')];
    assert.equal(admitPod({ pod: pod('b'), node: node(), active }).admit, true);
  });

  test('nodeSelector and required node affinity must match the node labels', () => {
    assert.equal(
      rejected(
        admitPod({ pod: pod('a', { nodeSelector: { zone: 'b' } }), node: node(), active: [] }),
      ).reason,
      'NodeAffinity',
    );
    const affinity = (operator: string, values: string[], key = 'rank'): Pod =>
      pod('a', {
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [{ matchExpressions: [{ key, operator, values }] }],
            },
          },
        },
      });
    assert.equal(admitPod({ pod: affinity('Gt', ['4']), node: node(), active: [] }).admit, true);
    assert.equal(admitPod({ pod: affinity('Lt', ['4']), node: node(), active: [] }).admit, false);
    assert.equal(
      admitPod({ pod: affinity('In', ['a', 'b'], 'zone'), node: node(), active: [] }).admit,
      true,
    );
    assert.equal(
      admitPod({ pod: affinity('NotIn', ['a'], 'zone'), node: node(), active: [] }).admit,
      false,
    );
    const r = rejected(admitPod({ pod: affinity('Exists', [], 'gpu'), node: node(), active: [] }));
    assert.equal(
      r.message,
      "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
    );
  });

  test('a host port taken by an admitted pod is refused; another protocol or IP is not', () => {
    const withPort = (name: string, hostPort: number, protocol = 'TCP', hostIP?: string): Pod =>
      pod(name, {}, [
        {
          name: 'c',
          image: 'x',
          ports: [
            { containerPort: 80, hostPort, protocol, ...(hostIP !== undefined && { hostIP }) },
          ],
        },
      ]);
    const active = [withPort('a', 8080, 'TCP', '127.0.0.1')];
    assert.equal(
      rejected(admitPod({ pod: withPort('b', 8080), node: node(), active })).reason,
      'NodePorts',
    );
    assert.equal(admitPod({ pod: withPort('b', 8080, 'UDP'), node: node(), active }).admit, true);
    assert.equal(
      admitPod({ pod: withPort('b', 8080, 'TCP', '127.0.0.2'), node: node(), active }).admit,
      true,
    );
  });

  test('an untolerated NoExecute taint rejects; NoSchedule does not; static pods are exempt', () => {
    const tainted = node({ taints: { taints: [{ key: 'k', value: 'v', effect: 'NoExecute' }] } });
    assert.equal(
      rejected(admitPod({ pod: pod('a'), node: tainted, active: [] })).reason,
      'TaintToleration',
    );
    const tolerating = pod('a', { tolerations: [{ key: 'k', operator: 'Equal', value: 'v' }] });
    assert.equal(admitPod({ pod: tolerating, node: tainted, active: [] }).admit, true);
    const wrongValue = pod('a', { tolerations: [{ key: 'k', operator: 'Equal', value: 'w' }] });
    assert.equal(admitPod({ pod: wrongValue, node: tainted, active: [] }).admit, false);
    const everything = pod('a', { tolerations: [{ operator: 'Exists' }] });
    assert.equal(admitPod({ pod: everything, node: tainted, active: [] }).admit, true);
    const noSchedule = node({ taints: { taints: [{ key: 'k', effect: 'NoSchedule' }] } });
    assert.equal(admitPod({ pod: pod('a'), node: noSchedule, active: [] }).admit, true);
    const staticPod: Pod = {
      ...pod('s'),
      metadata: { name: 's', annotations: { 'kubernetes.io/config.source': 'file' } },
    };
    assert.equal(admitPod({ pod: staticPod, node: tainted, active: [] }).admit, true);
  });

  test('another OS is refused, by field and by the kubernetes.io/os selector', () => {
    assert.equal(
      rejected(admitPod({ pod: pod('w', { os: { name: 'windows' } }), node: node(), active: [] }))
        .reason,
      'PodOSNotSupported',
    );
    assert.equal(
      rejected(
        admitPod({
          pod: pod('w', { nodeSelector: { 'kubernetes.io/os': 'windows' } }),
          node: node(),
          active: [],
        }),
      ).reason,
      'PodOSSelectorNodeLabelDoesNotMatch',
    );
  });
});

describe('podRequests', () => {
  test('init containers count by their peak, sidecars add to the app containers', () => {
    const c = (name: string, cpu: string, restartPolicy?: string): Container => ({
      name,
      image: 'x',
      resources: { requests: { cpu } },
      ...(restartPolicy !== undefined && { restartPolicy }),
    });
    const p = pod('a', { initContainers: [c('init', '1500m'), c('side', '200m', 'Always')] }, [
      c('app', '500m'),
    ]);
    // max(app 500 + sidecar 200, init 1500) = 1500.
    assert.equal(podRequests(p).cpu, 1500);
    const p2 = pod('a', { initContainers: [c('side', '200m', 'Always'), c('init', '1500m')] }, [
      c('app', '500m'),
    ]);
    // The init container runs while the sidecar started before it runs: 1700.
    assert.equal(podRequests(p2).cpu, 1700);
  });

  test('a limit without a request counts as the request', () => {
    const p = pod('a', {}, [{ name: 'c', image: 'x', resources: { limits: { memory: '64Mi' } } }]);
    assert.equal(podRequests(p).memory, 64 * 1024 * 1024);
  });
});

describe('sysctls', () => {
  const withSysctls = (names: string[], spec: Partial<Pod['spec']> = {}): Pod =>
    pod('s', {
      securityContext: { sysctls: names.map((name) => ({ name, value: '1' })) },
      ...spec,
    });
  test('safe sysctls pass; others are SysctlForbidden unless allowed by name or prefix', () => {
    assert.equal(
      admitPod({
        pod: withSysctls(['net.ipv4.ip_unprivileged_port_start']),
        node: node(),
        active: [],
      }).admit,
      true,
    );
    const r = rejected(admitPod({ pod: withSysctls(['kernel.msgmax']), node: node(), active: [] }));
    assert.equal(r.reason, 'SysctlForbidden');
    assert.equal(r.message, 'forbidden sysctl: "kernel.msgmax" not allowlisted');
    assert.equal(
      admitPod({
        pod: withSysctls(['kernel.msgmax', 'net/core/somaxconn']),
        node: node(),
        active: [],
        allowedUnsafeSysctls: ['kernel.msg*', 'net.core.somaxconn'],
      }).admit,
      true,
    );
  });
  test('a net sysctl with hostNetwork is refused', () => {
    const r = rejected(
      admitPod({
        pod: withSysctls(['net.ipv4.tcp_syncookies'], { hostNetwork: true }),
        node: node(),
        active: [],
      }),
    );
    assert.equal(
      r.message,
      'forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host net enabled',
    );
  });
});
