import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  alignment,
  coresPerInterval,
  jitter,
  parseProbeLog,
  quantile,
  summarizeSeries,
  within,
} from './probe-stats.ts';

describe('parseProbeLog', () => {
  it('reads busybox ts %.s lines as epoch ms, ascending, skipping torn lines', () => {
    const text = '1796237290.716906 \n1796237289.000500 \n17962\n\ngarbage\n';
    const times = parseProbeLog(text);
    assert.equal(times.length, 2);
    assert.ok(Math.abs((times[0] ?? 0) - 1796237289000.5) < 1e-3);
    assert.ok(Math.abs((times[1] ?? 0) - 1796237290716.906) < 1e-3);
  });
});

describe('within', () => {
  it('keeps only the window, edges included', () => {
    assert.deepEqual(within([1, 2, 3, 4, 5], 2, 4), [2, 3, 4]);
  });
});

describe('jitter', () => {
  it('measures |interval - period| per timeline, never across timelines', () => {
    // Pod a: 1000, 1100 (late) then 900 (early); pod b starts 5 s later: no cross interval.
    const a = [0, 1000, 2100, 3000];
    const b = [5000, 6000];
    const j = jitter([a, b]);
    assert.ok(j !== null);
    assert.equal(j.intervals, 4);
    assert.equal(j.p50Ms, 0);
    assert.equal(j.maxMs, 100);
    assert.equal(j.missedShare, 0);
  });

  it('counts intervals over 1.5 periods as missed ticks', () => {
    const j = jitter([[0, 1000, 3000, 4000]]);
    assert.ok(j !== null);
    assert.equal(j.missedShare, 0.333);
    assert.equal(j.maxMs, 1000);
  });

  it('is null without intervals', () => {
    assert.equal(jitter([[5], []]), null);
  });
});

describe('alignment', () => {
  it('reports 1/buckets for perfectly staggered probes', () => {
    // 10 pods, pod i fires at i*100 ms into every second, for 5 s.
    const timelines = Array.from({ length: 10 }, (_, i) =>
      Array.from({ length: 5 }, (_, s) => s * 1000 + i * 100 + 50),
    );
    const a = alignment(timelines);
    assert.equal(a.probes, 50);
    assert.equal(a.phaseMaxBucketShare, 0.1);
    assert.equal(a.perPeriodMaxBucketShareP50, 0.1);
    assert.deepEqual(a.phaseBuckets, new Array<number>(10).fill(5));
  });

  it('sees probes that fire together even when their phase drifts', () => {
    // 10 pods together every 1.1 s: the phase over the window spreads out, each second does not.
    const timelines = Array.from({ length: 10 }, (_, i) =>
      Array.from({ length: 10 }, (_, s) => s * 1100 + i),
    );
    const a = alignment(timelines);
    assert.ok(a.phaseMaxBucketShare <= 0.2, `phase share ${a.phaseMaxBucketShare}`);
    assert.equal(a.perPeriodMaxBucketShareP50, 1);
  });
});

describe('coresPerInterval and summarizeSeries', () => {
  it('turns cumulative CPU seconds into cores per interval', () => {
    const cores = coresPerInterval([
      { atMs: 0, cpuSeconds: 10 },
      { atMs: 1000, cpuSeconds: 10.5 },
      { atMs: 3000, cpuSeconds: 11.5 },
    ]);
    assert.deepEqual(cores, [0.5, 0.5]);
  });

  it('summarizes with nearest-rank percentiles', () => {
    const values = Array.from({ length: 100 }, (_, i) => i + 1);
    assert.equal(quantile(values, 95), 95);
    assert.deepEqual(summarizeSeries(values), { n: 100, p50: 50, p95: 95, max: 100, mean: 50.5 });
    assert.equal(summarizeSeries([]), null);
  });
});
