/**
 * A pod's `status.allocatedResources` (InPlacePodLevelResourcesVerticalScaling, beta and
 * on by default since v1.36): upstream's resourcehelper.PodRequests of the allocated pod,
 * over every resource name the containers request. App containers and sidecars add up;
 * an init container counts with the sidecars started before it, and the larger of the
 * two wins; pod-level requests (cpu, memory, hugepages) replace the containers' sum; the
 * RuntimeClass overhead is added.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import { podLevelResources } from '../container/pod-level.ts';
import { containerRequestAmounts } from '../container/pod-requests.ts';
import { milliCpu, parseQuantity } from '../util/quantity.ts';
import { formatBytes, formatMilliCpu } from './resources.ts';

function amount(name: string, q: string): number {
  return name === 'cpu' ? milliCpu(q) : Math.ceil(parseQuantity(q));
}

function supportedAtPodLevel(name: string): boolean {
  return name === 'cpu' || name === 'memory' || name.startsWith('hugepages-');
}

/** `status.allocatedResources` of `pod` (undefined when it requests nothing). */
export function podAllocatedResources(pod: Pod): Record<string, string> | undefined {
  const total = containerRequestAmounts(pod);
  // Pod-level quantities are reported as written; sums as Go prints a new quantity.
  const written = new Map<string, string>();
  for (const [name, q] of Object.entries(podLevelResources(pod)?.requests ?? {})) {
    if (!supportedAtPodLevel(name)) continue;
    total.set(name, amount(name, q));
    written.set(name, q);
  }
  for (const [name, q] of Object.entries(pod.spec?.overhead ?? {})) {
    total.set(name, (total.get(name) ?? 0) + amount(name, q));
    written.delete(name);
  }
  if (total.size === 0) return undefined;
  const out: Record<string, string> = {};
  for (const [name, v] of [...total].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    out[name] =
      written.get(name) ??
      (name === 'cpu'
        ? formatMilliCpu(v)
        : name === 'memory' || isBytes(name)
          ? formatBytes(v)
          : String(v));
  }
  return out;
}

function isBytes(name: string): boolean {
  return name === 'ephemeral-storage' || name.startsWith('hugepages-');
}
