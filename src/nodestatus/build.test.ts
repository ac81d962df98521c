import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { buildNodeStatus, nodeReserved, type NodeStatusInput } from './build.ts';

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
