/**
 * How busy the (shared, 2-core) machine was while a phase ran: its CPU busy share, the
 * CPU seconds spent by processes that are not part of the benchmark's cluster, and
 * the 1-minute load average. A phase measured while other work took a core is not
 * comparable with one measured on a quiet machine; the report shows which was which.
 */
import { readdir, readFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { run } from '../test/harness/exec.ts';

export interface Contention {
  /** Share of all cores' time that was busy (user, nice, system, irq, softirq, steal). */
  readonly machineBusyPercent: number;
  /**
   * CPU seconds of processes outside the cluster (neither the benchmark itself nor
   * anything whose command line names the cluster root). Processes that both started
   * and exited inside the phase are missed.
   */
  readonly otherCpuSeconds: number;
  /** 1-minute load average at the start and at the end (the phase's own pods count). */
  readonly load1m: readonly [number, number];
}

let ticks: number | undefined;

async function ticksPerSecond(): Promise<number> {
  ticks ??= Number((await run('getconf', ['CLK_TCK'])).stdout.trim());
  return ticks;
}

async function machineJiffies(): Promise<{ busy: number; total: number }> {
  const line = (await readFile('/proc/stat', 'utf8')).split('\n')[0] ?? '';
  // cpu user nice system idle iowait irq softirq steal guest guest_nice
  const [user, nice, system, idle, iowait, irq, softirq, steal] = line
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const busy = [user, nice, system, irq, softirq, steal].reduce<number>((a, b) => a + (b ?? 0), 0);
  return { busy, total: busy + (idle ?? 0) + (iowait ?? 0) };
}

/** CPU ticks per process outside the cluster, by pid. */
async function otherProcesses(clusterRoot: string): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    const [cmdline, stat] = await Promise.all([
      readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => ''),
      readFile(`/proc/${entry}/stat`, 'utf8').catch(() => ''),
    ]);
    if (stat === '' || cmdline.includes(clusterRoot)) continue;
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    out.set(pid, Number(fields[11]) + Number(fields[12]));
  }
  return out;
}

/** Starts observing; the returned function ends the observation and reports it. */
export async function observeContention(clusterRoot: string): Promise<() => Promise<Contention>> {
  const load0 = loadavg()[0] ?? 0;
  const jiffies0 = await machineJiffies();
  const others0 = await otherProcesses(clusterRoot);
  const t0 = performance.now();
  return async () => {
    const jiffies1 = await machineJiffies();
    const others1 = await otherProcesses(clusterRoot);
    let otherTicks = 0;
    for (const [pid, cpu] of others1) otherTicks += cpu - (others0.get(pid) ?? 0);
    const seconds = (performance.now() - t0) / 1000;
    const busyTicks = jiffies1.busy - jiffies0.busy;
    const perSecond = await ticksPerSecond();
    const busyPercent = seconds > 0 ? (100 * busyTicks) / perSecond / (seconds * cpus().length) : 0;
    return {
      machineBusyPercent: Math.round(Math.min(100, busyPercent)),
      otherCpuSeconds: Math.round((otherTicks / perSecond) * 10) / 10,
      load1m: [Math.round(load0 * 100) / 100, Math.round((loadavg()[0] ?? 0) * 100) / 100],
    };
  };
}
