/**
 * Numbers for the benchmark: latency summaries (nearest-rank percentiles) and what a
 * process used, read from /proc: CPU time (utime + stime, all threads) and resident
 * memory (VmRSS now, VmHWM since the last peak reset).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { run } from '../test/harness/exec.ts';

export interface Summary {
  readonly n: number;
  readonly minMs: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly meanMs: number;
}

/** Nearest-rank percentile (p in 0..100) of ascending `sorted`; with 30 samples p99 is the max. */
function percentile(sorted: readonly number[], p: number): number {
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  const value = sorted[rank - 1];
  if (value === undefined) throw new Error('Cannot take a percentile of no samples');
  return value;
}

const round = (ms: number): number => Math.round(ms * 10) / 10;

export function summarize(samplesMs: readonly number[]): Summary {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const sum = sorted.reduce((a, b) => a + b, 0);
  return {
    n: sorted.length,
    minMs: round(percentile(sorted, 0)),
    p50Ms: round(percentile(sorted, 50)),
    p90Ms: round(percentile(sorted, 90)),
    p99Ms: round(percentile(sorted, 99)),
    maxMs: round(percentile(sorted, 100)),
    meanMs: round(sum / sorted.length),
  };
}

let clockTicks: number | undefined;

async function ticksPerSecond(): Promise<number> {
  clockTicks ??= Number((await run('getconf', ['CLK_TCK'])).stdout.trim());
  return clockTicks;
}

/** CPU seconds `pid` has used so far (user + system, every thread). */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command (which may contain spaces): state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return (utime + stime) / (await ticksPerSecond());
}

/** VmRSS and VmHWM of `pid`, in MiB. */
export async function memory(pid: number): Promise<{ rssMiB: number; peakMiB: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string): number =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rssMiB: round(kib('VmRSS') / 1024), peakMiB: round(kib('VmHWM') / 1024) };
}

/** Resets VmHWM of `pid` to its current RSS (clear_refs 5); false where unsupported. */
export async function resetPeakMemory(pid: number): Promise<boolean> {
  return writeFile(`/proc/${pid}/clear_refs`, '5').then(
    () => true,
    () => false,
  );
}

/** Samples VmRSS every `intervalMs` until stopped; the fallback when a peak reset fails. */
export function sampleRss(pid: number, intervalMs = 100): { stop(): number } {
  let max = 0;
  const timer = setInterval(() => {
    memory(pid).then(
      (m) => {
        max = Math.max(max, m.rssMiB);
      },
      () => undefined,
    );
  }, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      return max;
    },
  };
}
