import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  buildNodeStatus,
  declaredFeatures,
  nodeImages,
  nodeReserved,
  type NodeStatusInput,
} from './build.ts';

const GI = 1024 ** 3;

function input(extra: Partial<NodeStatusInput> = {}): NodeStatusInput {
  return {
    nodeName: 'node-a',
    capacity: {
      cpu: 2,
      memoryBytes: 8 * GI,
      ephemeralStorageBytes: 100 * GI,
      hugepages: { '2Mi': 64 * 1024 ** 2 },
    },
    systemInfo: {
      machineID: 'm',
      systemUUID: 'u',
      bootID: 'b',
      kernelVersion: '6.1',
      osImage: 'Debian',
      operatingSystem: 'linux',
      architecture: 'amd64',
    },
    maxPods: 110,
    containerRuntimeVersion: 'containerd://2.4.2',
    nodeIPs: ['127.0.0.1'],
    kubeletPort: 10250,
    evictionMemoryBytes: 100 * 1024 ** 2,
    evictionNodefsFraction: 0.1,
    notReadyReason: undefined,
    now: new Date('2026-01-01T00:00:00Z'),
    ...extra,
  };
}

describe('node allocatable', () => {
  test('capacity minus the hard eviction thresholds and huge pages, with nothing reserved', () => {
    const { allocatable } = buildNodeStatus(undefined, input());
    assert.equal(allocatable?.['cpu'], '2');
    assert.equal(
      allocatable?.['memory'],
      `${(8 * GI - 100 * 1024 ** 2 - 64 * 1024 ** 2) / 1024}Ki`,
    );
    assert.equal(allocatable?.['ephemeral-storage'], String(Math.floor(100 * GI * 0.9)));
    assert.equal(allocatable?.['hugepages-2Mi'], String(64 * 1024 ** 2));
  });

  test('kubeReserved and systemReserved are held back too', () => {
    const reserved = nodeReserved(
      { cpu: '100m', memory: '256Mi', 'ephemeral-storage': '1Gi', pid: '100' },
      { cpu: '0.5', memory: '1Gi' },
    );
    assert.deepEqual(reserved, {
      cpuMilli: 600,
      memoryBytes: 1280 * 1024 ** 2,
      ephemeralStorageBytes: GI,
    });
    const { allocatable, capacity } = buildNodeStatus(undefined, input({ reserved }));
    assert.equal(capacity?.['cpu'], '2');
    assert.equal(allocatable?.['cpu'], '1400m');
    assert.equal(
      allocatable?.['memory'],
      `${(8 * GI - 1280 * 1024 ** 2 - 100 * 1024 ** 2 - 64 * 1024 ** 2) / 1024}Ki`,
    );
    assert.equal(allocatable?.['ephemeral-storage'], String(Math.floor(100 * GI * 0.9 - GI)));
  });

  test('never below zero', () => {
    const reserved = nodeReserved({ cpu: '3', memory: '9Gi', 'ephemeral-storage': '200Gi' });
    const { allocatable } = buildNodeStatus(undefined, input({ reserved }));
    assert.equal(allocatable?.['cpu'], '0');
    assert.equal(allocatable?.['memory'], '0Ki');
    assert.equal(allocatable?.['ephemeral-storage'], '0');
  });
});

describe('status.images', () => {
  const image = (id: string, sizeBytes: number, tags: string[], digests: string[] = []) => ({
    id,
    sizeBytes,
    repoTags: tags,
    repoDigests: digests,
  });

  test('largest first, equal sizes by descending ID, digests before tags, at most 5 names', () => {
    const names = Array.from({ length: 7 }, (_, i) => `r/x:${String(i)}`);
    const out = nodeImages(
      [
        image('sha256:a', 10, ['r/small:1']),
        image('sha256:b', 30, names.slice(0, 4), ['r/x@sha256:1', 'r/x@sha256:2']),
        image('sha256:c', 10, ['r/also-small:1']),
      ],
      50,
    );
    assert.deepEqual(out, [
      { names: ['r/x@sha256:1', 'r/x@sha256:2', 'r/x:0', 'r/x:1', 'r/x:2'], sizeBytes: 30 },
      { names: ['r/also-small:1'], sizeBytes: 10 },
      { names: ['r/small:1'], sizeBytes: 10 },
    ]);
  });

  test('nodeStatusMaxImages caps the list; -1 lists every image', () => {
    const all = [image('a', 1, ['a']), image('b', 2, ['b']), image('c', 3, ['c'])];
    assert.deepEqual(
      nodeImages(all, 2).map((i) => i.sizeBytes),
      [3, 2],
    );
    assert.equal(nodeImages(all, -1).length, 3);
  });
});

describe('pressure conditions (upstream MemoryPressure/DiskPressure/PIDPressure setters)', () => {
  const of = (pressure: string[]): Record<string, (string | undefined)[]> =>
    Object.fromEntries(
      (buildNodeStatus(undefined, input({ pressure })).conditions ?? []).map((c) => [
        c.type,
        [c.status, c.reason, c.message],
      ]),
    );

  test('False with the sufficient wording when the eviction manager reports none', () => {
    const c = of([]);
    assert.deepEqual(c['MemoryPressure'], [
      'False',
      'KubeletHasSufficientMemory',
      'kubelet has sufficient memory available',
    ]);
    assert.deepEqual(c['DiskPressure'], [
      'False',
      'KubeletHasNoDiskPressure',
      'kubelet has no disk pressure',
    ]);
    assert.deepEqual(c['PIDPressure'], [
      'False',
      'KubeletHasSufficientPID',
      'kubelet has sufficient PID available',
    ]);
  });

  test('True with upstream reasons and messages for each reported condition', () => {
    const c = of(['MemoryPressure', 'DiskPressure', 'PIDPressure']);
    assert.deepEqual(c['MemoryPressure'], [
      'True',
      'KubeletHasInsufficientMemory',
      'kubelet has insufficient memory available',
    ]);
    assert.deepEqual(c['DiskPressure'], [
      'True',
      'KubeletHasDiskPressure',
      'kubelet has disk pressure',
    ]);
    assert.deepEqual(c['PIDPressure'], [
      'True',
      'KubeletHasInsufficientPID',
      'kubelet has insufficient PID available',
    ]);
  });
});

describe('status.volumesInUse', () => {
  test('sorted, and sent as an empty list once the last volume is gone', () => {
    const status = buildNodeStatus(
      undefined,
      input({ volumesInUse: ['kubernetes.io/csi/b^2', 'kubernetes.io/csi/a^1'] }),
    );
    assert.deepEqual(status.volumesInUse, ['kubernetes.io/csi/a^1', 'kubernetes.io/csi/b^2']);
    assert.deepEqual(buildNodeStatus(status, input({ volumesInUse: [] })).volumesInUse, []);
    assert.equal(buildNodeStatus(undefined, input()).volumesInUse, undefined);
  });
});

describe('declaredFeatures', () => {
  test('pod-level resize is declared with its gate at its default, not with it off', () => {
    assert.deepEqual(declaredFeatures(), [
      'ExtendWebSocketsToKubelet',
      'InPlacePodLevelResourcesVerticalScaling',
      'InPlacePodVerticalScalingInitContainers',
      'RestartAllContainersOnContainerExits',
    ]);
    assert.deepEqual(declaredFeatures({ InPlacePodLevelResourcesVerticalScaling: false }), [
      'ExtendWebSocketsToKubelet',
      'InPlacePodVerticalScalingInitContainers',
      'RestartAllContainersOnContainerExits',
    ]);
  });
});
