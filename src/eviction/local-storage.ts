/**
 * Local ephemeral storage limits (upstream's localStorageEviction): whatever the node's
 * pressure, a pod whose containers together use more than the sum of their
 * ephemeral-storage limits, or a container over its own limit, is evicted at once with
 * upstream's message. Usage is the container's logs, plus its writable layer when that
 * lives on the node filesystem (no dedicated image filesystem). An emptyDir over its
 * sizeLimit is checked first, from the volume usage the summary carries (measured every
 * volumeStatsAggPeriod, so that is how late it can be seen).
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import type { PodStats } from '../stats/types.ts';
import { parseQuantity } from '../util/quantity.ts';
import { formatQuantity } from './quantity.ts';

/** Upstream's signals for these evictions (kubelet_evictions labels). */
export type LocalStorageSignal =
  'emptydirfs.limit' | 'ephemeralcontainerfs.limit' | 'ephemeralpodfs.limit';

export interface LocalStorageViolation {
  readonly signal: LocalStorageSignal;
  readonly message: string;
}

/** A limit as the spec wrote it, printed as Go prints the parsed quantity. */
function quantityText(text: string): string {
  return formatQuantity(parseQuantity(text), /[KMGTPE]i$/.test(text) ? 'BinarySI' : 'DecimalSI');
}

const limitOf = (c: Container): string | undefined => c.resources?.limits?.['ephemeral-storage'];

/** Containers whose limits count: app containers and restartable (sidecar) init containers. */
function limitedContainers(pod: Pod): Container[] {
  return [
    ...(pod.spec?.containers ?? []),
    ...(pod.spec?.initContainers ?? []).filter((c) => c.restartPolicy === 'Always'),
  ];
}

/**
 * Upstream's PodLimits for ephemeral-storage: the sum over the containers that set one,
 * printed in the first one's format (Go's Quantity.Add keeps the receiver's).
 */
function podLimit(pod: Pod): { bytes: number; text: string } | undefined {
  const limits = limitedContainers(pod)
    .map(limitOf)
    .filter((l): l is string => l !== undefined);
  const first = limits[0];
  if (first === undefined) return undefined;
  const bytes = limits.reduce((sum, l) => sum + parseQuantity(l), 0);
  return {
    bytes,
    text: formatQuantity(bytes, /[KMGTPE]i$/.test(first) ? 'BinarySI' : 'DecimalSI'),
  };
}

/**
 * Upstream's emptyDirLimitEviction: the first emptyDir (in spec order) whose measured
 * usage is over a positive sizeLimit. Memory-backed ones count too: upstream skips them
 * only behind an alpha feature gate that is off by default.
 */
function emptyDirViolation(pod: Pod, stats: PodStats): LocalStorageViolation | undefined {
  const used = new Map((stats.volume ?? []).map((v) => [v.name, v.usedBytes ?? 0]));
  for (const v of pod.spec?.volumes ?? []) {
    const size = v.emptyDir?.sizeLimit;
    const usage = used.get(v.name);
    if (size === undefined || usage === undefined) continue;
    const limit = parseQuantity(size);
    if (limit > 0 && usage > limit)
      return {
        signal: 'emptydirfs.limit',
        message: `Usage of EmptyDir volume "${v.name}" exceeds the limit "${quantityText(size)}". `,
      };
  }
  return undefined;
}

/** The first local-storage limit the pod is over, in upstream's order; undefined: none. */
export function localStorageViolation(
  pod: Pod,
  stats: PodStats,
  dedicatedImageFs: boolean,
): LocalStorageViolation | undefined {
  const emptyDir = emptyDirViolation(pod, stats);
  if (emptyDir !== undefined) return emptyDir;
  const total = podLimit(pod);
  const used = stats['ephemeral-storage']?.usedBytes ?? 0;
  if (total !== undefined && used > total.bytes)
    return {
      signal: 'ephemeralpodfs.limit',
      message: `Pod ephemeral local storage usage exceeds the total limit of containers ${total.text}. `,
    };
  const limits = new Map<string, string>();
  for (const c of limitedContainers(pod)) {
    const l = limitOf(c);
    if (l !== undefined && parseQuantity(l) !== 0) limits.set(c.name, l);
  }
  for (const cs of stats.containers) {
    const limit = limits.get(cs.name);
    if (limit === undefined) continue;
    const usage = (cs.logs?.usedBytes ?? 0) + (dedicatedImageFs ? 0 : (cs.rootfs?.usedBytes ?? 0));
    if (usage > parseQuantity(limit))
      return {
        signal: 'ephemeralcontainerfs.limit',
        message: `Container ${cs.name} exceeded its local ephemeral storage limit "${quantityText(limit)}". `,
      };
  }
  return undefined;
}
