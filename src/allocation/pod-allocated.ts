/**
 * A pod's requests and limits as resource lists (upstream's resourcehelper.PodRequests
 * and PodLimits), for `status.allocatedResources` and `status.resources`
 * (InPlacePodLevelResourcesVerticalScaling, beta and on by default since v1.36): over
 * every resource name the containers set, app containers and sidecars add up; an init
 * container counts with the sidecars started before it, and the larger of the two wins;
 * pod-level quantities (cpu, memory, hugepages) replace the containers'; the RuntimeClass
 * overhead is added (to limits only where one is set).
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import { podLevelResources } from '../container/pod-level.ts';
import { containerLimitAmounts, containerRequestAmounts } from '../container/pod-requests.ts';
import { milliCpu, parseQuantity } from '../util/quantity.ts';
import { formatBytes, formatMilliCpu } from './resources.ts';

function amount(name: string, q: string): number {
  return name === 'cpu' ? milliCpu(q) : Math.ceil(parseQuantity(q));
}

function supportedAtPodLevel(name: string): boolean {
  return name === 'cpu' || name === 'memory' || name.startsWith('hugepages-');
}

function isBytes(name: string): boolean {
  return name === 'memory' || name === 'ephemeral-storage' || name.startsWith('hugepages-');
}

/** A quantity as Go prints a new one of that resource. */
function formatAmount(name: string, v: number): string {
  if (name === 'cpu') return formatMilliCpu(v);
  return isBytes(name) ? formatBytes(v) : String(v);
}

/** The pod's requests or limits; undefined when there are none. */
export function podResourceList(
  pod: Pod,
  kind: 'requests' | 'limits',
): Record<string, string> | undefined {
  const total = kind === 'requests' ? containerRequestAmounts(pod) : containerLimitAmounts(pod);
  // Pod-level quantities are reported as written; sums as Go prints a new quantity.
  const written = new Map<string, string>();
  for (const [name, q] of Object.entries(podLevelResources(pod)?.[kind] ?? {})) {
    if (!supportedAtPodLevel(name)) continue;
    total.set(name, amount(name, q));
    written.set(name, q);
  }
  for (const [name, q] of Object.entries(pod.spec?.overhead ?? {})) {
    const have = total.get(name);
    if (kind === 'limits' && (have === undefined || have === 0)) continue;
    total.set(name, (have ?? 0) + amount(name, q));
    written.delete(name);
  }
  if (total.size === 0) return undefined;
  const out: Record<string, string> = {};
  for (const [name, v] of [...total].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    out[name] = written.get(name) ?? formatAmount(name, v);
  return out;
}

/** `status.allocatedResources` of `pod` (undefined when it requests nothing). */
export function podAllocatedResources(pod: Pod): Record<string, string> | undefined {
  return podResourceList(pod, 'requests');
}
