/**
 * /metrics/cadvisor: the container metrics Prometheus set-ups scrape from the kubelet,
 * under cAdvisor's names, computed from the same CRI and host stats as the summary
 * API (berth embeds no cAdvisor). It is the subset those stats can back: CPU time,
 * memory (working set, usage, RSS), writable-layer usage and start time per container,
 * the same per pod as cAdvisor reports the pod cgroup (container=""), and the machine's
 * cores and memory. Labels: container, namespace, pod; cAdvisor's id, image and name
 * labels are left out rather than filled with guesses.
 */
import { family, renderFamily, sample, type Family } from './resource-metrics.ts';
import type { CPUStats, MemoryStats, Summary } from './types.ts';

export interface Machine {
  readonly cpuCores: number;
  readonly memoryBytes: number;
}

interface Families {
  readonly cpu: Family;
  readonly workingSet: Family;
  readonly usage: Family;
  readonly rss: Family;
}

function record(
  f: Families,
  labels: Readonly<Record<string, string>>,
  cpu: CPUStats | undefined,
  memory: MemoryStats | undefined,
): void {
  if (cpu?.usageCoreNanoSeconds !== undefined)
    sample(f.cpu, labels, cpu.usageCoreNanoSeconds / 1e9, cpu.time);
  if (memory === undefined) return;
  if (memory.workingSetBytes !== undefined)
    sample(f.workingSet, labels, memory.workingSetBytes, memory.time);
  if (memory.usageBytes !== undefined) sample(f.usage, labels, memory.usageBytes, memory.time);
  if (memory.rssBytes !== undefined) sample(f.rss, labels, memory.rssBytes, memory.time);
}

/** Renders the summary's containers and pods and the machine, families in name order. */
export function renderCadvisorMetrics(summary: Summary, machine: Machine): string {
  const f: Families = {
    cpu: family(
      'container_cpu_usage_seconds_total',
      'counter',
      'Cumulative cpu time consumed in seconds.',
    ),
    workingSet: family(
      'container_memory_working_set_bytes',
      'gauge',
      'Current working set in bytes.',
    ),
    usage: family(
      'container_memory_usage_bytes',
      'gauge',
      'Current memory usage in bytes, including all memory regardless of when it was accessed',
    ),
    rss: family('container_memory_rss', 'gauge', 'Size of RSS in bytes.'),
  };
  const fsUsage = family(
    'container_fs_usage_bytes',
    'gauge',
    'Number of bytes that are consumed by the container on this filesystem.',
  );
  const start = family(
    'container_start_time_seconds',
    'gauge',
    'Start time of the container since unix epoch in seconds.',
  );
  const cores = family('machine_cpu_cores', 'gauge', 'Number of logical CPU cores.');
  const memory = family(
    'machine_memory_bytes',
    'gauge',
    'Amount of memory installed on the machine.',
  );
  cores.samples.push(`machine_cpu_cores ${machine.cpuCores}`);
  memory.samples.push(`machine_memory_bytes ${machine.memoryBytes}`);
  for (const p of summary.pods) {
    const pod = { namespace: p.podRef.namespace, pod: p.podRef.name };
    record(f, { container: '', ...pod }, p.cpu, p.memory);
    for (const c of p.containers) {
      const labels = { container: c.name, ...pod };
      record(f, labels, c.cpu, c.memory);
      if (c.rootfs?.usedBytes !== undefined)
        sample(fsUsage, labels, c.rootfs.usedBytes, c.rootfs.time);
      const started = Date.parse(c.startTime);
      if (!Number.isNaN(started)) sample(start, labels, started / 1000, c.startTime);
    }
  }
  return [f.cpu, fsUsage, f.rss, f.usage, f.workingSet, start, cores, memory]
    .filter((x) => x.samples.length > 0)
    .map(renderFamily)
    .join('');
}
