/**
 * /metrics/resource: the CPU and memory metrics metrics-server scrapes, in the Prometheus
 * text format with a timestamp (ms) on every sample, as upstream's resource metrics
 * collector writes them. metrics-server computes CPU rates from the timestamps, so they
 * must be the samples' own times, not the scrape's. Written by hand because prom-client
 * no longer emits sample timestamps.
 */
import type { CPUStats, MemoryStats, Summary } from './types.ts';

export interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge';
  readonly samples: string[];
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function labels(l: Readonly<Record<string, string>>): string {
  const parts = Object.entries(l).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

export function sample(
  f: Family,
  l: Readonly<Record<string, string>>,
  value: number,
  timeIso: string,
): void {
  const ms = Date.parse(timeIso);
  f.samples.push(`${f.name}${labels(l)} ${String(value)}${Number.isNaN(ms) ? '' : ` ${ms}`}`);
}

export function family(name: string, type: Family['type'], help: string): Family {
  return { name, help, type, samples: [] };
}

function cpuSeconds(cpu: CPUStats | undefined): number | undefined {
  return cpu?.usageCoreNanoSeconds === undefined ? undefined : cpu.usageCoreNanoSeconds / 1e9;
}

function workingSet(m: MemoryStats | undefined): number | undefined {
  return m?.workingSetBytes;
}

/** Renders the summary (or, when it could not be built, only the error gauges). */
export function renderResourceMetrics(summary: Summary | undefined): string {
  const nodeCpu = family(
    'node_cpu_usage_seconds_total',
    'counter',
    'Cumulative cpu time consumed by the node in core-seconds',
  );
  const nodeMem = family(
    'node_memory_working_set_bytes',
    'gauge',
    'Current working set of the node in bytes',
  );
  const ctrCpu = family(
    'container_cpu_usage_seconds_total',
    'counter',
    'Cumulative cpu time consumed by the container in core-seconds',
  );
  const ctrMem = family(
    'container_memory_working_set_bytes',
    'gauge',
    'Current working set of the container in bytes',
  );
  const ctrStart = family(
    'container_start_time_seconds',
    'gauge',
    'Start time of the container since unix epoch in seconds',
  );
  const podCpu = family(
    'pod_cpu_usage_seconds_total',
    'counter',
    'Cumulative cpu time consumed by the pod in core-seconds',
  );
  const podMem = family(
    'pod_memory_working_set_bytes',
    'gauge',
    'Current working set of the pod in bytes',
  );
  const scrapeError = family(
    'scrape_error',
    'gauge',
    '1 if there was an error while getting container metrics, 0 otherwise',
  );
  const resourceScrapeError = family(
    'resource_scrape_error',
    'gauge',
    '1 if there was an error while getting container metrics, 0 otherwise',
  );
  const failed = summary === undefined ? 1 : 0;
  scrapeError.samples.push(`scrape_error ${failed}`);
  resourceScrapeError.samples.push(`resource_scrape_error ${failed}`);
  if (summary !== undefined) {
    const n = summary.node;
    const nc = cpuSeconds(n.cpu);
    if (nc !== undefined && n.cpu !== undefined) sample(nodeCpu, {}, nc, n.cpu.time);
    const nm = workingSet(n.memory);
    if (nm !== undefined && n.memory !== undefined) sample(nodeMem, {}, nm, n.memory.time);
    for (const p of summary.pods) {
      const pl = { namespace: p.podRef.namespace, pod: p.podRef.name };
      for (const c of p.containers) {
        const cl = { container: c.name, ...pl };
        const cc = cpuSeconds(c.cpu);
        if (cc !== undefined && c.cpu !== undefined) sample(ctrCpu, cl, cc, c.cpu.time);
        const cm = workingSet(c.memory);
        if (cm !== undefined && c.memory !== undefined) sample(ctrMem, cl, cm, c.memory.time);
        const started = Date.parse(c.startTime);
        if (!Number.isNaN(started))
          sample(ctrStart, cl, started / 1000, c.cpu?.time ?? c.startTime);
      }
      const pc = cpuSeconds(p.cpu);
      if (pc !== undefined && p.cpu !== undefined) sample(podCpu, pl, pc, p.cpu.time);
      const pm = workingSet(p.memory);
      if (pm !== undefined && p.memory !== undefined) sample(podMem, pl, pm, p.memory.time);
    }
  }
  // Families in name order, as the Go registry gathers them.
  return [
    ctrCpu,
    ctrMem,
    ctrStart,
    nodeCpu,
    nodeMem,
    podCpu,
    podMem,
    resourceScrapeError,
    scrapeError,
  ]
    .filter((f) => f.samples.length > 0)
    .map(renderFamily)
    .join('');
}

/** One family in the Prometheus text format: HELP, TYPE, then its samples. */
export function renderFamily(f: Family): string {
  return `# HELP ${f.name} ${f.help}\n# TYPE ${f.name} ${f.type}\n${f.samples.join('\n')}\n`;
}
