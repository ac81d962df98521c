/**
 * Which pod goes first (upstream's rankMemoryPressure, rankPIDPressure,
 * rankDiskPressureFunc) and what its eviction message says (evictionMessage).
 *
 * Memory: pods using more than they requested first, then lower priority, then the
 * larger use above the request. PIDs: lower priority, then more processes. Disk: over
 * the ephemeral-storage request first, then priority, then use above the request, use
 * measured on the filesystem the signal is about.
 */
import type { Container, Pod, Volume } from 'kubernetes-types/core/v1.js';
import { podRequests } from '../container/pod-requests.ts';
import type { FsStats, PodStats } from '../stats/types.ts';
import { parseQuantity } from '../util/quantity.ts';
import { formatQuantity } from './quantity.ts';
import { SIGNAL_RESOURCE, thresholdQuantity } from './signals.ts';
import type { Observations, QuantityFormat, Signal, StarvedResource, Threshold } from './types.ts';

/** The parts of a pod's storage a disk signal counts (upstream's fsStatsType). */
export type FsStatsType = 'root' | 'logs' | 'localVolumeSource';

export type StatsOf = (pod: Pod) => PodStats | undefined;
type Cmp = (a: Pod, b: Pod) => number;

/** Upstream's cmpBool: the pod for which the condition holds sorts first. */
function cmpBool(a: boolean, b: boolean): number {
  if (a === b) return 0;
  return b ? 1 : -1;
}

function ordered(pods: Pod[], cmps: readonly Cmp[]): void {
  pods.sort((a, b) => {
    for (const c of cmps) {
      const r = c(a, b);
      if (r !== 0) return r;
    }
    return 0;
  });
}

/** Lower priority first. */
function priority(a: Pod, b: Pod): number {
  const pa = a.spec?.priority ?? 0;
  const pb = b.spec?.priority ?? 0;
  return pa === pb ? 0 : pa > pb ? 1 : -1;
}

/** A pod without stats sorts first, as upstream's comparators put it. */
function withStats(stats: StatsOf, f: (sa: PodStats, sb: PodStats, a: Pod, b: Pod) => number): Cmp {
  return (a, b) => {
    const sa = stats(a);
    const sb = stats(b);
    if (sa === undefined || sb === undefined) return cmpBool(sa === undefined, sb === undefined);
    return f(sa, sb, a, b);
  };
}

const memoryUsage = (s: PodStats): number => s.memory?.workingSetBytes ?? 0;
const memoryRequest = (p: Pod): number => podRequests(p).memory;

export function rankMemoryPressure(pods: Pod[], stats: StatsOf): void {
  ordered(pods, [
    withStats(stats, (sa, sb, a, b) =>
      cmpBool(memoryUsage(sa) > memoryRequest(a), memoryUsage(sb) > memoryRequest(b)),
    ),
    priority,
    withStats(stats, (sa, sb, a, b) => {
      const ua = memoryUsage(sa) - memoryRequest(a);
      const ub = memoryUsage(sb) - memoryRequest(b);
      return ua === ub ? 0 : ub > ua ? 1 : -1;
    }),
  ]);
}

export function rankPIDPressure(pods: Pod[], stats: StatsOf): void {
  ordered(pods, [
    priority,
    withStats(stats, (sa, sb) => {
      const pa = sa.process_stats?.process_count ?? 0;
      const pb = sb.process_stats?.process_count ?? 0;
      return pb - pa;
    }),
  ]);
}

/** Upstream's IsLocalEphemeralVolume plus hostPath (localVolumeNames). */
function isLocalVolume(v: Volume): boolean {
  return (
    v.hostPath !== undefined ||
    v.gitRepo !== undefined ||
    v.configMap !== undefined ||
    (v.emptyDir !== undefined && (v.emptyDir.medium ?? '') === '')
  );
}

const fsUsed = (f: FsStats | undefined, inodes: boolean): number =>
  (inodes ? f?.inodesUsed : f?.usedBytes) ?? 0;

/** Upstream's podDiskUsage: the pod's use of one disk resource over the chosen parts. */
export function podDiskUsage(
  s: PodStats,
  pod: Pod,
  types: readonly FsStatsType[],
  inodes: boolean,
): number {
  let total = 0;
  for (const c of s.containers) {
    if (types.includes('root')) total += fsUsed(c.rootfs, inodes);
    if (types.includes('logs')) total += fsUsed(c.logs, inodes);
  }
  if (types.includes('localVolumeSource')) {
    const names = new Set((pod.spec?.volumes ?? []).filter(isLocalVolume).map((v) => v.name));
    for (const v of s.volume ?? []) if (names.has(v.name)) total += fsUsed(v, inodes);
  }
  return total;
}

export function rankDiskPressure(
  types: readonly FsStatsType[],
  resource: 'ephemeral-storage' | 'inodes',
): (pods: Pod[], stats: StatsOf) => void {
  const inodes = resource === 'inodes';
  // Upstream compares inode use with an "inodes" request no pod can make: zero.
  const request = (p: Pod): number => (inodes ? 0 : podRequests(p).ephemeral);
  return (pods, stats) => {
    ordered(pods, [
      withStats(stats, (sa, sb, a, b) =>
        cmpBool(
          podDiskUsage(sa, a, types, inodes) > request(a),
          podDiskUsage(sb, b, types, inodes) > request(b),
        ),
      ),
      priority,
      withStats(stats, (sa, sb, a, b) => {
        const ua = podDiskUsage(sa, a, types, inodes) - podRequests(a).ephemeral;
        const ub = podDiskUsage(sb, b, types, inodes) - podRequests(b).ephemeral;
        return ua === ub ? 0 : ub > ua ? 1 : -1;
      }),
    ]);
  };
}

/**
 * Upstream's buildSignalToRankFunc: which parts of a pod's storage count for each disk
 * signal depends on whether images (and containers) have their own filesystem.
 */
export function rankFor(
  signal: Signal,
  dedicatedImageFs: boolean,
): ((pods: Pod[], stats: StatsOf) => void) | undefined {
  switch (signal) {
    case 'memory.available':
    case 'allocatableMemory.available':
      return rankMemoryPressure;
    case 'pid.available':
      return rankPIDPressure;
    case 'nodefs.available':
    case 'nodefs.inodesFree':
    case 'imagefs.available':
    case 'imagefs.inodesFree':
    case 'containerfs.available':
    case 'containerfs.inodesFree': {
      const resource = signal.endsWith('inodesFree') ? 'inodes' : 'ephemeral-storage';
      if (!dedicatedImageFs)
        return rankDiskPressure(['root', 'logs', 'localVolumeSource'], resource);
      const onImageFs = !signal.startsWith('nodefs.');
      return rankDiskPressure(onImageFs ? ['root'] : ['logs', 'localVolumeSource'], resource);
    }
  }
}

/** How an observation of the resource prints (BinarySI bytes, DecimalSI counts). */
function formatFor(resource: StarvedResource): QuantityFormat {
  return resource === 'inodes' || resource === 'pids' ? 'DecimalSI' : 'BinarySI';
}

/** A request as the pod spec wrote it, printed as Go prints the parsed quantity. */
function requestText(text: string | undefined): string {
  if (text === undefined) return '0';
  return formatQuantity(parseQuantity(text), /[KMGTPE]i$/.test(text) ? 'BinarySI' : 'DecimalSI');
}

/**
 * Upstream's evictionMessage: the resource, the first met threshold for it and what is
 * available, then every container using more than its request of the resource.
 */
export function evictionMessage(
  resource: StarvedResource,
  pod: Pod,
  stats: PodStats | undefined,
  thresholds: readonly Threshold[],
  observations: Observations,
): string {
  let message = `The node was low on resource: ${resource}. `;
  const t = thresholds.find((x) => SIGNAL_RESOURCE[x.signal] === resource);
  const o = t === undefined ? undefined : observations.get(t.signal);
  if (t !== undefined && o !== undefined) {
    const q = thresholdQuantity(t.value, o.capacity);
    const qf = 'quantity' in t.value ? t.value.format : 'BinarySI';
    message += `Threshold quantity: ${formatQuantity(q, qf)}, available: ${formatQuantity(o.available, formatFor(resource))}. `;
  }
  if (stats === undefined) return message;
  // Pod-level resources (PodLevelResources) are newer than the generated types.
  const podLevel = (pod.spec as { resources?: { requests?: Record<string, string> } } | undefined)
    ?.resources;
  const podRequest = podLevel?.requests?.[resource];
  if (resource === 'memory' && podRequest !== undefined && stats.memory !== undefined) {
    message += `Pod ${pod.metadata?.name ?? ''} was using ${formatQuantity(memoryUsage(stats), 'BinarySI')}, request is ${requestText(podRequest)}, has larger consumption of ${resource}. `;
  }
  const containers: Container[] = [
    ...(pod.spec?.containers ?? []),
    ...(pod.spec?.initContainers ?? []),
  ];
  for (const cs of stats.containers) {
    const c = containers.find((x) => x.name === cs.name);
    if (c === undefined) continue;
    const request = c.resources?.requests?.[resource];
    let usage: number | undefined;
    if (resource === 'memory') usage = cs.memory?.workingSetBytes;
    else if (
      resource === 'ephemeral-storage' &&
      cs.rootfs?.usedBytes !== undefined &&
      cs.logs?.usedBytes !== undefined
    )
      usage = cs.rootfs.usedBytes + cs.logs.usedBytes;
    const requested = request === undefined ? 0 : parseQuantity(request);
    if (usage !== undefined && usage > requested)
      message += `Container ${c.name} was using ${formatQuantity(usage, 'BinarySI')}, request is ${requestText(request)}, has larger consumption of ${resource}. `;
  }
  return message;
}
