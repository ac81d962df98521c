import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { applyDefaults } from './defaults.ts';
import type { KubeletConfig } from './types.ts';
import { validateKubeletConfig } from './validation.ts';

const base = applyDefaults(null);

function problems(patch: Partial<KubeletConfig>): string[] {
  return validateKubeletConfig({ ...base, ...patch }).map(
    (i) => `${i.path.join('.')}: ${i.message}`,
  );
}

describe('validateKubeletConfig', () => {
  test('accepts the defaults', () => {
    assert.deepEqual(problems({}), []);
  });

  test('a locked feature gate cannot be set against its lock (ImageVolume, GA in v1.36)', () => {
    assert.deepEqual(problems({ featureGates: { ImageVolume: false } }), [
      'featureGates.ImageVolume: cannot set feature gate ImageVolume to false, feature is locked to true',
    ]);
    assert.deepEqual(problems({ featureGates: { ImageVolume: true, SomeGate: false } }), []);
    assert.deepEqual(
      problems({ featureGates: { UserNamespacesSupport: false, ProcMountType: false } }),
      [
        'featureGates.UserNamespacesSupport: cannot set feature gate UserNamespacesSupport to false, feature is locked to true',
        'featureGates.ProcMountType: cannot set feature gate ProcMountType to false, feature is locked to true',
      ],
    );
  });

  test('PodLevelResources cannot be turned off: berth reads spec.resources always', () => {
    assert.deepEqual(problems({ featureGates: { PodLevelResources: true } }), []);
    assert.deepEqual(problems({ featureGates: { PodLevelResources: false } }), [
      'featureGates.PodLevelResources: berth does not support feature gate PodLevelResources=false yet; leave it at its default (true)',
    ]);
  });

  test("userNamespaces.idsPerPod: upstream's checks", () => {
    const ids = (idsPerPod: number) => problems({ userNamespaces: { idsPerPod } });
    assert.deepEqual(ids(65536 * 2), []);
    assert.deepEqual(ids(4096), ['userNamespaces.idsPerPod: must not be less than 65536']);
    assert.deepEqual(ids(65536 + 1), ['userNamespaces.idsPerPod: must be a multiple of 65536']);
    assert.deepEqual(ids(2 ** 32), ['userNamespaces.idsPerPod: must not be more than 4294967295']);
  });

  const cases: readonly [string, Partial<KubeletConfig>, RegExp][] = [
    [
      'nodeLeaseDurationSeconds > 0',
      { nodeLeaseDurationSeconds: -1 },
      /^nodeLeaseDurationSeconds: must be greater than 0/,
    ],
    ['maxPods >= 0', { maxPods: -1 }, /^maxPods: must not be negative, got -1/],
    ['kubeAPIQPS >= 0', { kubeAPIQPS: -1 }, /^kubeAPIQPS: must not be negative/],
    ['port in 1..65535', { port: 70000 }, /^port: must be from 1 to 65535, got 70000/],
    [
      'readOnlyPort may be 0 but not negative',
      { readOnlyPort: -1 },
      /^readOnlyPort: must be from 0 to 65535/,
    ],
    [
      'image GC low < high',
      { imageGCLowThresholdPercent: 90 },
      /^imageGCLowThresholdPercent: must be less than imageGCHighThresholdPercent \(85\)/,
    ],
    [
      'image GC percent range',
      { imageGCHighThresholdPercent: 101 },
      /^imageGCHighThresholdPercent: must be from 0 to 100/,
    ],
    [
      'enforceNodeAllocatable values',
      { enforceNodeAllocatable: ['pods', 'nodes'] },
      /^enforceNodeAllocatable.1: unknown enforcement "nodes"/,
    ],
    [
      'none stands alone',
      { enforceNodeAllocatable: ['none', 'pods'] },
      /"none" must be the only enforcement/,
    ],
    [
      'system-reserved needs its cgroup',
      { enforceNodeAllocatable: ['pods', 'system-reserved'] },
      /requires systemReservedCgroup/,
    ],
    [
      'enforcement needs cgroupsPerQOS',
      { cgroupsPerQOS: false },
      /"pods" requires cgroupsPerQOS: true/,
    ],
    [
      'parallel pulls need serializeImagePulls false',
      { maxParallelImagePulls: 4 },
      /cannot be larger than 1 unless serializeImagePulls is false/,
    ],
    [
      'critical grace <= grace',
      { shutdownGracePeriodMs: 10_000, shutdownGracePeriodCriticalPodsMs: 20_000 },
      /must not be longer than shutdownGracePeriod/,
    ],
    [
      'grace is 0 or >= 1s',
      { shutdownGracePeriodMs: 500 },
      /^shutdownGracePeriod: must be 0 or at least 1s/,
    ],
    [
      'eviction signals',
      { evictionHard: { 'memory.free': '1Gi' } },
      /unknown eviction signal "memory.free"/,
    ],
    [
      'eviction thresholds',
      { evictionHard: { 'memory.available': 'lots' } },
      /invalid threshold "lots"/,
    ],
    [
      'soft thresholds need a grace period',
      { evictionSoft: { 'memory.available': '1Gi' } },
      /a grace period must be set/,
    ],
    [
      'reserved quantities',
      { systemReserved: { memory: '1 GB' } },
      /^systemReserved.memory: invalid quantity "1 GB"/,
    ],
    [
      'taints',
      { registerWithTaints: [{ key: 'a b', value: '', effect: 'NoSchedule' }] },
      /invalid taint key "a b"/,
    ],
    [
      'cluster DNS addresses',
      { clusterDNS: ['10.0.0.300'] },
      /^clusterDNS.0: "10.0.0.300" is not an IP address/,
    ],
    [
      'a unix runtime endpoint',
      { containerRuntimeEndpoint: 'tcp://1.2.3.4:1' },
      /must be a unix socket/,
    ],
    ['positive periods', { syncFrequencyMs: 0 }, /^syncFrequency: must be a positive duration/],
    ['absolute podLogsDir', { podLogsDir: 'logs' }, /must be an absolute path/],
    ['containerLogMaxFiles > 1', { containerLogMaxFiles: 1 }, /must be greater than 1/],
    [
      'systemCgroups needs cgroupRoot',
      { systemCgroups: '/system' },
      /^systemCgroups: requires cgroupRoot/,
    ],
    ['oomScoreAdj range', { oomScoreAdj: -1001 }, /must be from -1000 to 1000/],
    ['no run-once mode', { runOnce: true }, /^runOnce:/],
  ];
  for (const [name, patch, expected] of cases) {
    test(name, () => {
      const found = problems(patch);
      assert.ok(
        found.some((p) => expected.test(p)),
        `expected ${String(expected)} in ${JSON.stringify(found)}`,
      );
    });
  }

  test('accepts the documented alternatives', () => {
    assert.deepEqual(
      problems({
        readOnlyPort: 10255,
        healthzPort: 0,
        enforceNodeAllocatable: ['none'],
        maxParallelImagePulls: 4,
        serializeImagePulls: false,
        shutdownGracePeriodMs: 30_000,
        shutdownGracePeriodCriticalPodsMs: 10_000,
        evictionSoft: { 'memory.available': '500Mi' },
        evictionSoftGracePeriodMs: { 'memory.available': 90_000 },
        clusterDNS: ['10.96.0.10', 'fd00::a'],
        containerRuntimeEndpoint: '/run/containerd/containerd.sock',
      }),
      [],
    );
  });
});
