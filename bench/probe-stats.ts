/**
 * Numbers for the probe benchmark, computed from what the pods saw: each probe request
 * appends the wall-clock time it reached the container (microseconds) to a log, one
 * log per pod and probe. From those: the interval jitter against the probe period,
 * the share of missed ticks, how bunched the probes of different pods are, and the
 * agent's CPU per second from cumulative CPU-time samples. Pure functions, so they are
 * unit-tested without a cluster.
 */

/** Nearest-rank percentile (p in 0..100) of ascending `sorted`. */
export function quantile(sorted: readonly number[], p: number): number {
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  const value = sorted[rank - 1];
  if (value === undefined) throw new Error('Cannot take a percentile of no samples');
  return value;
}

const round1 = (v: number): number => Math.round(v * 10) / 10;
const round3 = (v: number): number => Math.round(v * 1000) / 1000;

/**
 * Parses a probe log: one line per request, starting with `<seconds>.<micros>` (busybox
 * `ts %.s`). Returns epoch milliseconds, ascending; lines that do not parse are skipped
 * (a line cut short by the container's end).
 */
export function parseProbeLog(text: string): number[] {
  const times: number[] = [];
  for (const line of text.split('\n')) {
    const match = /^\s*(\d+)\.(\d{1,9})/.exec(line);
    if (match === null) continue;
    const [, sec, frac] = match;
    if (sec === undefined || frac === undefined) continue;
    times.push(Number(sec) * 1000 + Number(`0.${frac}`) * 1000);
  }
  return times.sort((a, b) => a - b);
}

/** Only the times within [startMs, endMs]: the measurement window. */
export function within(times: readonly number[], startMs: number, endMs: number): number[] {
  return times.filter((t) => t >= startMs && t <= endMs);
}

export interface JitterSummary {
  /** Intervals between successive probes of one pod, over all pods. */
  readonly intervals: number;
  /** |interval - period|, nearest rank. */
  readonly p50Ms: number;
  readonly p95Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Share of intervals longer than 1.5 periods: a tick was skipped or ran very late. */
  readonly missedShare: number;
}

/** Jitter of the probe intervals of each timeline (one per pod); null with no interval. */
export function jitter(
  timelines: readonly (readonly number[])[],
  periodMs = 1000,
): JitterSummary | null {
  const deviations: number[] = [];
  let missed = 0;
  for (const times of timelines) {
    for (let i = 1; i < times.length; i++) {
      const interval = (times[i] ?? 0) - (times[i - 1] ?? 0);
      deviations.push(Math.abs(interval - periodMs));
      if (interval > 1.5 * periodMs) missed++;
    }
  }
  if (deviations.length === 0) return null;
  deviations.sort((a, b) => a - b);
  return {
    intervals: deviations.length,
    p50Ms: round1(quantile(deviations, 50)),
    p95Ms: round1(quantile(deviations, 95)),
    p99Ms: round1(quantile(deviations, 99)),
    maxMs: round1(quantile(deviations, 100)),
    missedShare: round3(missed / deviations.length),
  };
}

export interface Alignment {
  readonly probes: number;
  /** Probes per bucket of the period (time modulo the period), over the whole window. */
  readonly phaseBuckets: readonly number[];
  /** Largest bucket's share of `phaseBuckets`; 1/buckets when perfectly staggered. */
  readonly phaseMaxBucketShare: number;
  /**
   * Median over the window's periods of the largest bucket's share within that period.
   * Unlike the phase over the whole window it still shows probes that fire together
   * but drift together (a period slightly longer than nominal spreads their phase).
   */
  readonly perPeriodMaxBucketShareP50: number;
  /** Periods that held at least `buckets` probes (the others are skipped as too sparse). */
  readonly periods: number;
}

/** How aligned the probes of different timelines are, in `buckets` slices of the period. */
export function alignment(
  timelines: readonly (readonly number[])[],
  periodMs = 1000,
  buckets = 10,
): Alignment {
  const phase = new Array<number>(buckets).fill(0);
  const perPeriod = new Map<number, number[]>();
  let probes = 0;
  for (const times of timelines) {
    for (const t of times) {
      const index = Math.min(buckets - 1, Math.floor(((t % periodMs) / periodMs) * buckets));
      phase[index] = (phase[index] ?? 0) + 1;
      const period = Math.floor(t / periodMs);
      let counts = perPeriod.get(period);
      if (counts === undefined) {
        counts = new Array<number>(buckets).fill(0);
        perPeriod.set(period, counts);
      }
      counts[index] = (counts[index] ?? 0) + 1;
      probes++;
    }
  }
  const shares: number[] = [];
  for (const counts of perPeriod.values()) {
    const total = counts.reduce((a, b) => a + b, 0);
    if (total >= buckets) shares.push(Math.max(...counts) / total);
  }
  shares.sort((a, b) => a - b);
  return {
    probes,
    phaseBuckets: phase,
    phaseMaxBucketShare: probes === 0 ? 0 : round3(Math.max(...phase) / probes),
    perPeriodMaxBucketShareP50: shares.length === 0 ? 0 : round3(quantile(shares, 50)),
    periods: shares.length,
  };
}

export interface CpuSample {
  /** Monotonic time of the sample (performance.now()). */
  readonly atMs: number;
  /** Cumulative CPU seconds of the process at that time. */
  readonly cpuSeconds: number;
}

/** CPU cores used between successive samples (CPU seconds per wall second). */
export function coresPerInterval(samples: readonly CpuSample[]): number[] {
  const cores: number[] = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1];
    const b = samples[i];
    if (a === undefined || b === undefined || b.atMs <= a.atMs) continue;
    cores.push((b.cpuSeconds - a.cpuSeconds) / ((b.atMs - a.atMs) / 1000));
  }
  return cores;
}

export interface SeriesSummary {
  readonly n: number;
  readonly p50: number;
  readonly p95: number;
  readonly max: number;
  readonly mean: number;
}

/** p50/p95/max/mean of a series, rounded to 3 decimals; null with no samples. */
export function summarizeSeries(values: readonly number[]): SeriesSummary | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return {
    n: sorted.length,
    p50: round3(quantile(sorted, 50)),
    p95: round3(quantile(sorted, 95)),
    max: round3(quantile(sorted, 100)),
    mean: round3(sorted.reduce((a, b) => a + b, 0) / sorted.length),
  };
}
