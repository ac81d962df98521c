/**
 * Pod-level resources (`spec.resources`, PodLevelResources: beta and on by default since
 * v1.34): a pod may set cpu and memory requests and limits for the pod as a whole. Where
 * it does, upstream's helpers read them before the containers': the QoS class
 * (ComputePodQOS), the pod's requests and limits (resourcehelper.PodRequests/PodLimits),
 * the pod cgroup (ResourceConfigForPod), and a container limit the container leaves
 * unset (getCPULimit/getMemoryLimit in kuberuntime).
 */
import type { Pod, ResourceRequirements } from 'kubernetes-types/core/v1.js';
import { milliCpu, parseQuantity } from '../util/quantity.ts';

/** The resources a pod may set at pod level (upstream's IsSupportedPodLevelResource). */
export type PodLevelResource = 'cpu' | 'memory';

/** A pod spec with the pod-level `resources` field kubernetes-types does not know yet. */
interface PodLevelSpec {
  resources?: ResourceRequirements;
}

/** spec.resources as written, if the pod has it. */
export function podLevelResources(pod: Pod): ResourceRequirements | undefined {
  return (pod.spec as PodLevelSpec | undefined)?.resources;
}

/**
 * The pod-level quantity of `resource` in `kind`, when set and above zero: cpu in
 * millicores, memory in bytes (upstream skips zero quantities as unset).
 */
export function podLevelValue(
  pod: Pod,
  kind: 'requests' | 'limits',
  resource: PodLevelResource,
): number | undefined {
  const q = podLevelResources(pod)?.[kind]?.[resource];
  if (q === undefined) return undefined;
  const v = resource === 'cpu' ? milliCpu(q) : Math.ceil(parseQuantity(q));
  return v > 0 ? v : undefined;
}

/** Upstream's IsPodLevelResourcesSet: a cpu or memory request or limit at pod level. */
export function isPodLevelResourcesSet(pod: Pod): boolean {
  const r = podLevelResources(pod);
  return (['requests', 'limits'] as const).some((kind) =>
    (['cpu', 'memory'] as const).some((name) => r?.[kind]?.[name] !== undefined),
  );
}
