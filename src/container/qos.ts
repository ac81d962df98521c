/**
 * A pod's QoS class (upstream's rules): BestEffort without any cpu/memory request or
 * limit, Guaranteed when every container limits cpu and memory with requests equal to
 * the limits, Burstable otherwise. Drives the pod's cgroup tier, OOM scores and the
 * status field. A pod with pod-level resources (spec.resources) is classed by those
 * alone, as upstream's ComputePodQOS does with PodLevelResources on.
 */
import type { Pod, ResourceRequirements } from 'kubernetes-types/core/v1.js';
import { parseQuantity } from '../util/quantity.ts';
import { isPodLevelResourcesSet, podLevelResources } from './pod-level.ts';

export type QosClass = 'Guaranteed' | 'Burstable' | 'BestEffort';

export function qosClassOf(pod: Pod): QosClass {
  const podLevel = podLevelResources(pod);
  const containers: { resources?: ResourceRequirements }[] =
    podLevel !== undefined && isPodLevelResourcesSet(pod)
      ? [{ resources: podLevel }]
      : [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])];
  let any = false;
  let guaranteed = true;
  for (const c of containers) {
    const req = c.resources?.requests ?? {};
    const lim = c.resources?.limits ?? {};
    for (const r of ['cpu', 'memory']) {
      const request = req[r];
      const limit = lim[r];
      if (request !== undefined || limit !== undefined) any = true;
      if (
        limit === undefined ||
        (request !== undefined && parseQuantity(request) !== parseQuantity(limit))
      )
        guaranteed = false;
    }
  }
  if (!any) return 'BestEffort';
  return guaranteed ? 'Guaranteed' : 'Burstable';
}
