import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { shutdownPeriods } from './config.ts';
import {
  groupByPriority,
  killPods,
  migrateConfig,
  periodRequestedSeconds,
  shutdownStatus,
} from './pod-manager.ts';

function pod(name: string, priority?: number, grace?: number): Pod {
  return {
    metadata: { name, namespace: 'default', uid: `uid-${name}` },
    spec: {
      containers: [{ name: 'c', image: 'x' }],
      ...(priority !== undefined && { priority }),
      ...(grace !== undefined && { terminationGracePeriodSeconds: grace }),
    },
  };
}

const names = (pods: readonly Pod[]): string[] => pods.map((p) => p.metadata?.name ?? '');

describe('shutdown periods (upstream migrateConfig, newPodManager)', () => {
  test('shutdownGracePeriod and its critical part become two groups', () => {
    assert.deepEqual(migrateConfig(30_000, 10_000), [
      { priority: 0, shutdownGracePeriodSeconds: 20 },
      { priority: 2_000_000_000, shutdownGracePeriodSeconds: 10 },
    ]);
    assert.deepEqual(migrateConfig(0, 0), []);
    assert.deepEqual(migrateConfig(10_000, 20_000), []);
  });

  test('by-priority periods win and are sorted; the gates turn them or everything off', () => {
    const base = {
      shutdownGracePeriodMs: 0,
      shutdownGracePeriodCriticalPodsMs: 0,
      shutdownGracePeriodByPodPriority: [
        { priority: 100_000, shutdownGracePeriodSeconds: 4 },
        { priority: 0, shutdownGracePeriodSeconds: 6 },
      ],
      featureGates: {},
    };
    assert.deepEqual(
      shutdownPeriods(base).map((p) => p.priority),
      [0, 100_000],
    );
    assert.deepEqual(
      shutdownPeriods({ ...base, featureGates: { GracefulNodeShutdown: false } }),
      [],
    );
    assert.deepEqual(
      shutdownPeriods({
        ...base,
        shutdownGracePeriodMs: 20_000,
        featureGates: { GracefulNodeShutdownBasedOnPodPriority: false },
      }).map((p) => p.shutdownGracePeriodSeconds),
      [20, 0],
    );
    assert.deepEqual(shutdownPeriods({ ...base, shutdownGracePeriodByPodPriority: [] }), []);
    assert.equal(periodRequestedSeconds(shutdownPeriods(base)), 10);
  });
});

describe('groupByPriority', () => {
  const periods = [
    { priority: 1, shutdownGracePeriodSeconds: 10 },
    { priority: 2, shutdownGracePeriodSeconds: 20 },
    { priority: 3, shutdownGracePeriodSeconds: 30 },
  ];
  test('a pod joins the highest group at or below its priority; the ends absorb the rest', () => {
    const groups = groupByPriority(periods, [
      pod('below', 0),
      pod('one', 1),
      pod('between', 2),
      pod('two-and-half', 2),
      pod('three', 3),
      pod('above', 10),
      pod('none'),
    ]);
    assert.deepEqual(
      groups.map((g) => names(g.pods)),
      [
        ['below', 'one', 'none'],
        ['between', 'two-and-half'],
        ['three', 'above'],
      ],
    );
  });
});

describe('killPods', () => {
  const periods = [
    { priority: 0, shutdownGracePeriodSeconds: 10 },
    { priority: 1000, shutdownGracePeriodSeconds: 5 },
  ];

  test('groups go low to high; the next starts once the last one has stopped', async () => {
    const clock = new FakeClock();
    const killed: { name: string; grace: number; at: number }[] = [];
    const done = killPods(
      {
        periods,
        clock,
        logger: new MemoryLogger(),
        killPod: async (p, grace) => {
          killed.push({ name: p.metadata?.name ?? '', grace, at: clock.now() });
          await clock.sleep(2000);
        },
      },
      [pod('critical', 5000), pod('ordinary', 0), pod('short', 0, 3)],
      new AbortController().signal,
    );
    await clock.advance(0);
    assert.deepEqual(
      killed.map((k) => [k.name, k.grace]),
      [
        ['ordinary', 10],
        ['short', 3],
      ],
    );
    await clock.advance(2000);
    assert.deepEqual(killed[2], { name: 'critical', grace: 5, at: (killed[0]?.at ?? 0) + 2000 });
    await clock.advance(2000);
    await done;
  });

  test('a group that outlasts its share is left behind when the share ends', async () => {
    const clock = new FakeClock();
    const started: string[] = [];
    const done = killPods(
      {
        periods,
        clock,
        logger: new MemoryLogger(),
        killPod: async (p, _grace, _amend, signal) => {
          started.push(p.metadata?.name ?? '');
          await clock.sleep(3_600_000, signal).catch(() => undefined);
        },
      },
      [pod('slow', 0), pod('critical', 5000)],
      new AbortController().signal,
    );
    await clock.advance(9_999);
    assert.deepEqual(started, ['slow']);
    await clock.advance(1);
    await clock.advance(0);
    assert.deepEqual(started, ['slow', 'critical']);
    await clock.advance(5000);
    await done;
  });

  test("the status function: Failed, upstream's reason and message, DisruptionTarget", () => {
    const now = '2026-01-01T00:00:00.000Z';
    const s = shutdownStatus(
      { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
      now,
      3,
    );
    assert.equal(s.phase, 'Failed');
    assert.equal(s.reason, 'Terminated');
    assert.equal(s.message, 'Pod was terminated in response to imminent node shutdown.');
    assert.deepEqual(s.conditions?.[1], {
      type: 'DisruptionTarget',
      status: 'True',
      reason: 'TerminationByKubelet',
      message: 'Pod was terminated in response to imminent node shutdown.',
      lastTransitionTime: now,
      observedGeneration: 3,
    });
    assert.equal(shutdownStatus({ phase: 'Succeeded' }, now).phase, 'Succeeded');
    // Applied again (every later status), the transition time stays.
    const again = shutdownStatus(s, '2026-01-01T00:01:00.000Z', 3);
    assert.equal(again.conditions?.filter((c) => c.type === 'DisruptionTarget').length, 1);
    assert.equal(again.conditions?.[1]?.lastTransitionTime, now);
  });
});
