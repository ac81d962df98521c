/**
 * The host's own numbers for the node part of the summary, read from procfs and statfs
 * (berth has no cAdvisor). Linux only. `procRoot` and `sysRoot` are injectable so tests
 * read prepared files instead of the machine's.
 */
import { readdir, readFile, statfs } from 'node:fs/promises';
import path from 'node:path';

/** USER_HZ: /proc/stat counts in clock ticks of 1/100 s on every Linux architecture. */
const TICK_NS = 10_000_000;

export interface HostCpuSample {
  /** Busy time (user+nice+system+irq+softirq+steal) of all CPUs, core-nanoseconds. */
  readonly usageCoreNanoSeconds: number;
}

export interface HostMemory {
  readonly totalBytes: number;
  readonly usageBytes: number;
  readonly workingSetBytes: number;
  readonly availableBytes: number;
  readonly rssBytes: number;
  readonly pageFaults: number;
  readonly majorPageFaults: number;
}

export interface FsUsage {
  readonly capacityBytes: number;
  readonly availableBytes: number;
  readonly usedBytes: number;
  readonly inodes: number;
  readonly inodesFree: number;
  readonly inodesUsed: number;
}

export interface HostInterface {
  readonly name: string;
  readonly rxBytes: number;
  readonly rxErrors: number;
  readonly txBytes: number;
  readonly txErrors: number;
}

/** What the summary needs from the host; the Linux implementation is ProcHostStats. */
export interface HostStats {
  bootTimeMs(): Promise<number>;
  cpu(): Promise<HostCpuSample>;
  memory(): Promise<HostMemory>;
  /** Physical interfaces (no loopback, no virtual devices such as veths and bridges). */
  network(): Promise<readonly HostInterface[]>;
  fs(dir: string): Promise<FsUsage>;
  /** pid_max and the number of tasks (threads) now, as upstream's rlimit stats. */
  rlimit(): Promise<{ maxpid: number; curproc: number }>;
}

export interface ProcHostStatsOptions {
  readonly procRoot?: string;
  readonly sysRoot?: string;
}

/** Parses `key: value kB` lines of /proc/meminfo into bytes. */
export function parseMeminfo(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([^:]+):\s+(\d+)(\s+kB)?/.exec(line);
    if (m?.[1] !== undefined && m[2] !== undefined)
      out.set(m[1], Number(m[2]) * (m[3] === undefined ? 1 : 1024));
  }
  return out;
}

/** The aggregate `cpu` line of /proc/stat as busy core-nanoseconds (idle and iowait excluded). */
export function parseProcStatCpu(text: string): number {
  const line = text.split('\n').find((l) => l.startsWith('cpu '));
  if (line === undefined) throw new Error('Cannot read CPU usage: /proc/stat has no "cpu" line');
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest is already in user).
  const busy = [0, 1, 2, 5, 6, 7].reduce((sum, i) => sum + (f[i] ?? 0), 0);
  return busy * TICK_NS;
}

/** Per-interface counters from /proc/net/dev. */
export function parseNetDev(text: string): HostInterface[] {
  const out: HostInterface[] = [];
  for (const line of text.split('\n').slice(2)) {
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim();
    const f = line
      .slice(colon + 1)
      .trim()
      .split(/\s+/)
      .map(Number);
    out.push({
      name,
      rxBytes: f[0] ?? 0,
      rxErrors: f[2] ?? 0,
      txBytes: f[8] ?? 0,
      txErrors: f[10] ?? 0,
    });
  }
  return out;
}

/** HostStats from /proc and /sys. */
export class ProcHostStats implements HostStats {
  readonly #proc: string;
  readonly #sys: string;
  #bootTimeMs: number | undefined;

  constructor(options: ProcHostStatsOptions = {}) {
    this.#proc = options.procRoot ?? '/proc';
    this.#sys = options.sysRoot ?? '/sys';
  }

  #read(file: string): Promise<string> {
    return readFile(path.join(this.#proc, file), 'utf8');
  }

  async bootTimeMs(): Promise<number> {
    if (this.#bootTimeMs === undefined) {
      const m = /^btime\s+(\d+)/m.exec(await this.#read('stat'));
      if (m?.[1] === undefined)
        throw new Error('Cannot read the boot time: /proc/stat has no btime');
      this.#bootTimeMs = Number(m[1]) * 1000;
    }
    return this.#bootTimeMs;
  }

  async cpu(): Promise<HostCpuSample> {
    return { usageCoreNanoSeconds: parseProcStatCpu(await this.#read('stat')) };
  }

  async memory(): Promise<HostMemory> {
    const [meminfo, vmstat] = await Promise.all([
      this.#read('meminfo').then(parseMeminfo),
      this.#read('vmstat').catch(() => ''),
    ]);
    const get = (k: string): number => meminfo.get(k) ?? 0;
    const total = get('MemTotal');
    const usage = total - get('MemFree');
    // cAdvisor's working set for the root cgroup: usage minus inactive file pages.
    const workingSet = Math.max(0, usage - get('Inactive(file)'));
    const vm = new Map(
      vmstat
        .split('\n')
        .map((l) => l.split(' '))
        .map(([k, v]) => [k ?? '', Number(v ?? 0)] as const),
    );
    return {
      totalBytes: total,
      usageBytes: usage,
      workingSetBytes: workingSet,
      availableBytes: Math.max(0, total - workingSet),
      rssBytes: get('AnonPages'),
      pageFaults: vm.get('pgfault') ?? 0,
      majorPageFaults: vm.get('pgmajfault') ?? 0,
    };
  }

  async network(): Promise<readonly HostInterface[]> {
    const [dev, virtual] = await Promise.all([
      this.#read('net/dev'),
      readdir(path.join(this.#sys, 'devices/virtual/net')).catch(() => [] as string[]),
    ]);
    const skip = new Set(['lo', ...virtual]);
    return parseNetDev(dev).filter((i) => !skip.has(i.name));
  }

  async fs(dir: string): Promise<FsUsage> {
    const s = await statfs(dir);
    return {
      capacityBytes: s.blocks * s.bsize,
      availableBytes: s.bavail * s.bsize,
      usedBytes: (s.blocks - s.bfree) * s.bsize,
      inodes: s.files,
      inodesFree: s.ffree,
      inodesUsed: s.files - s.ffree,
    };
  }

  async rlimit(): Promise<{ maxpid: number; curproc: number }> {
    const [pidMax, loadavg] = await Promise.all([
      this.#read('sys/kernel/pid_max'),
      this.#read('loadavg'),
    ]);
    // The fourth field of /proc/loadavg is "runnable/total" scheduling entities.
    const total = /\d+\/(\d+)/.exec(loadavg)?.[1];
    return { maxpid: Number(pidMax.trim()), curproc: Number(total ?? 0) };
  }
}
