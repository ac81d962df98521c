/**
 * Observations and threshold arithmetic (upstream's makeSignalObservations,
 * thresholdsMet, thresholdsFirstObservedAt, nodeConditions...). Pure: the manager
 * keeps the state between passes and passes `nowMs` in.
 */
import type { PodStats, Summary } from '../stats/types.ts';
import type {
  Observation,
  Observations,
  PressureCondition,
  Signal,
  StarvedResource,
  Threshold,
  ThresholdValue,
} from './types.ts';

/** Upstream's signalToNodeCondition. */
export const SIGNAL_CONDITION: Readonly<Record<Signal, PressureCondition>> = {
  'memory.available': 'MemoryPressure',
  'allocatableMemory.available': 'MemoryPressure',
  'nodefs.available': 'DiskPressure',
  'nodefs.inodesFree': 'DiskPressure',
  'imagefs.available': 'DiskPressure',
  'imagefs.inodesFree': 'DiskPressure',
  'containerfs.available': 'DiskPressure',
  'containerfs.inodesFree': 'DiskPressure',
  'pid.available': 'PIDPressure',
};

/** Upstream's signalToResource. */
export const SIGNAL_RESOURCE: Readonly<Record<Signal, StarvedResource>> = {
  'memory.available': 'memory',
  'allocatableMemory.available': 'memory',
  'nodefs.available': 'ephemeral-storage',
  'nodefs.inodesFree': 'inodes',
  'imagefs.available': 'ephemeral-storage',
  'imagefs.inodesFree': 'inodes',
  'containerfs.available': 'ephemeral-storage',
  'containerfs.inodesFree': 'inodes',
  'pid.available': 'pids',
};

/** The order conditions are reported in (upstream's is a map's, i.e. none). */
export const CONDITION_ORDER: readonly PressureCondition[] = [
  'MemoryPressure',
  'DiskPressure',
  'PIDPressure',
];

const time = (t: string | undefined): number => (t === undefined ? 0 : Date.parse(t));

interface FsLike {
  readonly time: string;
  readonly availableBytes?: number;
  readonly capacityBytes?: number;
  readonly inodesFree?: number;
  readonly inodes?: number;
}

function fsObservations(
  out: Map<Signal, Observation>,
  fs: FsLike | undefined,
  bytes: Signal,
  inodes: Signal,
): void {
  if (fs === undefined) return;
  if (fs.availableBytes !== undefined && fs.capacityBytes !== undefined)
    out.set(bytes, {
      available: fs.availableBytes,
      capacity: fs.capacityBytes,
      timeMs: time(fs.time),
    });
  if (fs.inodesFree !== undefined && fs.inodes !== undefined)
    out.set(inodes, { available: fs.inodesFree, capacity: fs.inodes, timeMs: time(fs.time) });
}

/**
 * One observation per signal the summary can answer. allocatableMemory.available is
 * the pods' share: `podsMemoryBytes` (capacity minus kube/system reserved, the limit
 * upstream puts on the kubepods cgroup) less what the pods' working sets use; without
 * it the signal is not observed.
 */
export function observe(summary: Summary, podsMemoryBytes?: number): Observations {
  const out = new Map<Signal, Observation>();
  const node = summary.node;
  const mem = node.memory;
  if (mem?.availableBytes !== undefined && mem.workingSetBytes !== undefined)
    out.set('memory.available', {
      available: mem.availableBytes,
      capacity: mem.availableBytes + mem.workingSetBytes,
      timeMs: time(mem.time),
    });
  if (podsMemoryBytes !== undefined && mem !== undefined) {
    const used = summary.pods.reduce((sum, p) => sum + (p.memory?.workingSetBytes ?? 0), 0);
    out.set('allocatableMemory.available', {
      available: Math.max(0, podsMemoryBytes - used),
      capacity: podsMemoryBytes,
      timeMs: time(mem.time),
    });
  }
  fsObservations(out, node.fs, 'nodefs.available', 'nodefs.inodesFree');
  fsObservations(out, node.runtime?.imageFs, 'imagefs.available', 'imagefs.inodesFree');
  fsObservations(out, node.runtime?.containerFs, 'containerfs.available', 'containerfs.inodesFree');
  const rl = node.rlimit;
  if (rl?.maxpid !== undefined && rl.curproc !== undefined)
    out.set('pid.available', {
      available: rl.maxpid - rl.curproc,
      capacity: rl.maxpid,
      timeMs: time(rl.time),
    });
  return out;
}

/** The pods' stats by UID (upstream's cachedStatsFunc). */
export function podStatsByUID(summary: Summary): ReadonlyMap<string, PodStats> {
  return new Map(summary.pods.map((p) => [p.podRef.uid, p]));
}

/** Upstream's GetThresholdQuantity: the quantity, or the percentage of capacity (float32). */
export function thresholdQuantity(value: ThresholdValue, capacity: number): number {
  if ('quantity' in value) return value.quantity;
  return Math.trunc(capacity * value.percentage);
}

/**
 * The thresholds whose signal is below them; with `enforceMinReclaim`, below threshold
 * plus the minimum reclaim (how a met threshold is held until enough was reclaimed).
 */
export function thresholdsMet(
  thresholds: readonly Threshold[],
  observations: Observations,
  enforceMinReclaim: boolean,
): Threshold[] {
  return thresholds.filter((t) => {
    const o = observations.get(t.signal);
    if (o === undefined) return false;
    let q = thresholdQuantity(t.value, o.capacity);
    if (enforceMinReclaim && t.minReclaim !== undefined)
      q += thresholdQuantity(t.minReclaim, o.capacity);
    return q > o.available;
  });
}

/** Adds the thresholds of `b` not already in `a` (they are the same objects or not at all). */
export function mergeThresholds(a: readonly Threshold[], b: readonly Threshold[]): Threshold[] {
  return [...a, ...b.filter((t) => !a.includes(t))];
}

/** When each met threshold was first seen met; a threshold no longer met is dropped. */
export function firstObservedAt(
  met: readonly Threshold[],
  previous: ReadonlyMap<Threshold, number>,
  nowMs: number,
): Map<Threshold, number> {
  return new Map(met.map((t) => [t, previous.get(t) ?? nowMs]));
}

/** The thresholds met for at least their grace period. */
export function thresholdsMetGracePeriod(
  observedAt: ReadonlyMap<Threshold, number>,
  nowMs: number,
): Threshold[] {
  return [...observedAt].filter(([t, at]) => nowMs - at >= t.gracePeriodMs).map(([t]) => t);
}

/** The conditions the thresholds set, each once. */
export function nodeConditions(thresholds: readonly Threshold[]): PressureCondition[] {
  const set = new Set(thresholds.map((t) => SIGNAL_CONDITION[t.signal]));
  return CONDITION_ORDER.filter((c) => set.has(c));
}

/** Remembers when each condition was last seen; older entries are kept. */
export function conditionsLastObservedAt(
  conditions: readonly PressureCondition[],
  previous: ReadonlyMap<PressureCondition, number>,
  nowMs: number,
): Map<PressureCondition, number> {
  const out = new Map(previous);
  for (const c of conditions) out.set(c, nowMs);
  return out;
}

/** The conditions seen within the transition period: they stay True. */
export function conditionsObservedSince(
  lastObservedAt: ReadonlyMap<PressureCondition, number>,
  periodMs: number,
  nowMs: number,
): PressureCondition[] {
  return CONDITION_ORDER.filter((c) => {
    const at = lastObservedAt.get(c);
    return at !== undefined && nowMs - at < periodMs;
  });
}

/** Only thresholds whose signal has new stats since the last pass drive an eviction. */
export function thresholdsUpdatedStats(
  thresholds: readonly Threshold[],
  observations: Observations,
  last: Observations,
): Threshold[] {
  return thresholds.filter((t) => {
    const o = observations.get(t.signal);
    if (o === undefined) return false;
    const l = last.get(t.signal);
    return l === undefined || o.timeMs === 0 || o.timeMs > l.timeMs;
  });
}

/**
 * Upstream's byEvictionPriority: memory signals first, then the signals with a
 * resource to reclaim. A stable sort, like Go's sort.Sort on these inputs in practice.
 */
export function byEvictionPriority(thresholds: readonly Threshold[]): Threshold[] {
  const rank = (t: Threshold): number =>
    t.signal === 'memory.available' || t.signal === 'allocatableMemory.available' ? 0 : 1;
  return [...thresholds].sort((a, b) => rank(a) - rank(b));
}

export function isHard(t: Threshold): boolean {
  return t.gracePeriodMs === 0;
}
