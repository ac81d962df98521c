import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { evictionAdmitHandler } from '../admission/eviction.ts';
import { formatQuantity } from './quantity.ts';
import {
  EvictionConfigError,
  parseThresholdConfig,
  withContainerFsThresholds,
} from './thresholds.ts';
import type { PressureCondition } from './types.ts';

const base = {
  evictionHard: {},
  evictionSoft: {},
  evictionSoftGracePeriodMs: {},
  evictionMinimumReclaim: {},
  enforceNodeAllocatable: ['pods'],
};

describe('parseThresholdConfig (upstream ParseThresholdConfig)', () => {
  test('hard, soft with grace, minimum reclaim and the allocatable copy', () => {
    const t = parseThresholdConfig({
      ...base,
      evictionHard: {
        'memory.available': '100Mi',
        'nodefs.available': '10%',
        'imagefs.available': '0%',
      },
      evictionSoft: { 'memory.available': '1.5Gi' },
      evictionSoftGracePeriodMs: { 'memory.available': 90_000 },
      evictionMinimumReclaim: { 'memory.available': '50Mi' },
    });
    assert.deepEqual(
      t.map((x) => [x.signal, x.value, x.gracePeriodMs, x.minReclaim]),
      [
        [
          'memory.available',
          { quantity: 100 * 2 ** 20, format: 'BinarySI' },
          0,
          { quantity: 50 * 2 ** 20, format: 'BinarySI' },
        ],
        ['nodefs.available', { percentage: Math.fround(0.1) }, 0, undefined],
        [
          'memory.available',
          { quantity: 1.5 * 2 ** 30, format: 'BinarySI' },
          90_000,
          { quantity: 50 * 2 ** 20, format: 'BinarySI' },
        ],
        [
          'allocatableMemory.available',
          { quantity: 100 * 2 ** 20, format: 'BinarySI' },
          0,
          { quantity: 50 * 2 ** 20, format: 'BinarySI' },
        ],
      ],
    );
  });

  for (const [name, config, field, message] of [
    [
      'unknown signal',
      { evictionHard: { 'memory.free': '1Gi' } },
      'evictionHard[memory.free]',
      'unsupported eviction signal memory.free',
    ],
    [
      'negative',
      { evictionHard: { 'memory.available': '-1Gi' } },
      'evictionHard[memory.available]',
      'eviction threshold memory.available must be positive: -1Gi',
    ],
    [
      'over 100 %',
      { evictionHard: { 'nodefs.available': '150%' } },
      'evictionHard[nodefs.available]',
      'eviction percentage threshold nodefs.available must be <= 100%: 150%',
    ],
    [
      'soft without grace',
      { evictionSoft: { 'memory.available': '1Gi' } },
      'evictionSoft[memory.available]',
      'grace period must be specified for the soft eviction threshold memory.available',
    ],
    [
      'negative reclaim',
      { evictionMinimumReclaim: { 'memory.available': '-1Mi' } },
      'evictionMinimumReclaim[memory.available]',
      'negative eviction minimum reclaim specified for memory.available',
    ],
  ] as const) {
    test(`refuses ${name}, naming the field`, () => {
      assert.throws(
        () => parseThresholdConfig({ ...base, ...config }),
        (err: unknown) =>
          err instanceof EvictionConfigError &&
          err.code === 'BERTH_EVICTION_CONFIG_INVALID' &&
          err.field === field &&
          err.message === `Cannot use ${field}: ${message}`,
      );
    });
  }

  test('containerfs follows nodefs, or imagefs when images have their own filesystem', () => {
    const t = parseThresholdConfig({
      ...base,
      evictionHard: { 'nodefs.available': '10%', 'imagefs.available': '15%' },
    });
    const shared = withContainerFsThresholds(t, false).find(
      (x) => x.signal === 'containerfs.available',
    );
    assert.deepEqual(shared?.value, { percentage: Math.fround(0.1) });
    const dedicated = withContainerFsThresholds(t, true).find(
      (x) => x.signal === 'containerfs.available',
    );
    assert.deepEqual(dedicated?.value, { percentage: Math.fround(0.15) });
  });
});

describe('formatQuantity (Go resource.Quantity.String)', () => {
  test('binary and decimal canonical forms', () => {
    assert.equal(formatQuantity(100 * 2 ** 20, 'BinarySI'), '100Mi');
    assert.equal(formatQuantity(2 ** 31, 'BinarySI'), '2Gi');
    assert.equal(formatQuantity(1536 * 2 ** 20, 'BinarySI'), '1536Mi');
    assert.equal(formatQuantity(123456789, 'BinarySI'), '123456789');
    assert.equal(formatQuantity(1000, 'BinarySI'), '1k');
    assert.equal(formatQuantity(0, 'BinarySI'), '0');
    assert.equal(formatQuantity(12000, 'DecimalSI'), '12k');
    assert.equal(formatQuantity(32100, 'DecimalSI'), '32100');
  });
});

describe('eviction admit handler (upstream managerImpl.Admit)', () => {
  const handler = (c: PressureCondition[]) => evictionAdmitHandler({ conditions: () => c });
  const bestEffort = { metadata: { name: 'b', uid: 'b' }, spec: { containers: [{ name: 'c' }] } };
  const burstable = {
    metadata: { name: 'u', uid: 'u' },
    spec: { containers: [{ name: 'c', resources: { requests: { memory: '1Mi' } } }] },
  };

  test('memory pressure refuses BestEffort pods only, unless they tolerate the taint', () => {
    const h = handler(['MemoryPressure']);
    assert.deepEqual(h.admit(bestEffort), {
      admit: false,
      reason: 'Evicted',
      message: 'The node had condition: [MemoryPressure]. ',
    });
    assert.deepEqual(h.admit(burstable), { admit: true });
    const tolerating = {
      ...bestEffort,
      spec: {
        ...bestEffort.spec,
        tolerations: [{ key: 'node.kubernetes.io/memory-pressure', operator: 'Exists' }],
      },
    };
    assert.deepEqual(h.admit(tolerating), { admit: true });
  });

  test('disk pressure refuses every pod but critical ones', () => {
    const h = handler(['DiskPressure']);
    assert.equal(h.admit(burstable).admit, false);
    const critical = { ...burstable, spec: { ...burstable.spec, priority: 2_000_001_000 } };
    assert.deepEqual(h.admit(critical), { admit: true });
    assert.deepEqual(handler([]).admit(bestEffort), { admit: true });
  });
});
