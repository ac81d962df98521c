import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FakeCriClient } from '../cri/fake/index.ts';
import { KubeletMetrics } from '../metrics/registry.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { RelistPleg } from './generic.ts';

describe('RelistPleg metrics', () => {
  test('relist duration, interval and last seen', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const cri = new FakeCriClient({ clock });
    const metrics = new KubeletMetrics();
    const pleg = new RelistPleg({
      runtime: cri.runtime,
      clock,
      logger: new MemoryLogger(),
      onEvents: () => undefined,
      metrics,
    });
    await pleg.relist();
    await clock.advance(1500);
    await pleg.relist();
    const text = await metrics.registry.metrics();
    assert.match(text, /^kubelet_pleg_relist_duration_seconds_count 2$/m);
    // One interval: between the two relists' starts.
    assert.match(text, /^kubelet_pleg_relist_interval_seconds_count 1$/m);
    assert.match(text, /^kubelet_pleg_relist_interval_seconds_sum 1\.5$/m);
    assert.match(
      text,
      new RegExp(
        `^kubelet_pleg_last_seen_seconds ${String(Date.UTC(2026, 0, 1) / 1000 + 1)}$`,
        'm',
      ),
    );
  });

  test('a failed relist is still timed', async () => {
    const clock = new FakeClock();
    const cri = new FakeCriClient({ clock });
    const metrics = new KubeletMetrics();
    const pleg = new RelistPleg({
      runtime: cri.runtime,
      clock,
      logger: new MemoryLogger(),
      onEvents: () => undefined,
      metrics,
    });
    cri.failNext('RuntimeService/ListContainers', new Error('boom'));
    await assert.rejects(pleg.relist(), /boom/);
    const text = await metrics.registry.metrics();
    assert.match(text, /^kubelet_pleg_relist_duration_seconds_count 1$/m);
  });
});
