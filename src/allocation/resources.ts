/**
 * Resource comparisons and the pod <-> PodResourceInfo mapping (upstream's
 * ResourceInfoForPod and updatePodFromAllocation). Quantities are compared by value, as
 * apiequality.Semantic does: "1" and "1000m" are the same allocation.
 */
import type { Container, Pod, ResourceRequirements } from 'kubernetes-types/core/v1.js';
import { podLevelResources } from '../container/pod-level.ts';
import { isSidecar } from '../container/restart-policy.ts';
import { parseQuantity } from '../util/quantity.ts';
import type { PodResourceInfo } from './types.ts';

// The pod-level field is read in the container layer; allocation's callers keep its name here.
export { podLevelResources };

type List = Readonly<Record<string, string>> | undefined;

/** A pod spec with the pod-level `resources` field kubernetes-types does not know yet. */
interface PodLevel {
  resources?: ResourceRequirements;
}

function sameQuantity(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a === b || Math.abs(parseQuantity(a) - parseQuantity(b)) < 1e-9;
}

/** Two resource lists hold the same names with equal quantities (nil and {} are equal). */
export function sameList(a: List, b: List): boolean {
  const keys = new Set([...Object.keys(a ?? {}), ...Object.keys(b ?? {})]);
  for (const k of keys) if (!sameQuantity(a?.[k], b?.[k])) return false;
  return true;
}

export function sameRequirements(
  a: ResourceRequirements | undefined,
  b: ResourceRequirements | undefined,
): boolean {
  return sameList(a?.limits, b?.limits) && sameList(a?.requests, b?.requests);
}

/**
 * Whether cpu and memory requests and limits are equal (what a resize changes); a
 * missing value equals zero, as a missing key reads as a zero Quantity upstream (the
 * actuated state records "0" for a limit a container does not have).
 */
export function sameCpuMemory(
  a: ResourceRequirements | undefined,
  b: ResourceRequirements | undefined,
): boolean {
  for (const r of ['cpu', 'memory'])
    if (
      !sameQuantity(a?.requests?.[r] ?? '0', b?.requests?.[r] ?? '0') ||
      !sameQuantity(a?.limits?.[r] ?? '0', b?.limits?.[r] ?? '0')
    )
      return false;
  return true;
}

/** Millicores as resource.NewMilliQuantity(m, DecimalSI) prints them: "500m", "2". */
export function formatMilliCpu(milli: number): string {
  return milli % 1000 === 0 ? String(milli / 1000) : `${milli}m`;
}

/** Bytes as resource.NewQuantity(b, BinarySI) prints them: "128Mi", "1000". */
export function formatBytes(bytes: number): string {
  if (bytes === 0) return '0';
  const suffixes = ['Ei', 'Pi', 'Ti', 'Gi', 'Mi', 'Ki'];
  for (let i = 0; i < suffixes.length; i++) {
    const unit = 1024 ** (6 - i);
    if (bytes % unit === 0) return `${bytes / unit}${suffixes[i] ?? ''}`;
  }
  return String(bytes);
}

/**
 * Upstream's IsResizableContainer at v1.37: app containers and, with
 * InPlacePodVerticalScalingInitContainers (GA, locked on), every init container. Only a
 * running container is ever actuated, so a completed init container's allocation is
 * bookkeeping only.
 */
export function resizableContainers(pod: Pod): Container[] {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
}

/** Containers the runtime resizes in place (kuberuntime's isResizableContainer). */
export function actuatedContainers(pod: Pod): Container[] {
  return [...(pod.spec?.initContainers ?? []).filter(isSidecar), ...(pod.spec?.containers ?? [])];
}

/** Upstream's ResourceInfoForPod. */
export function resourceInfoForPod(pod: Pod): PodResourceInfo {
  const level = podLevelResources(pod);
  return {
    containerResources: Object.fromEntries(
      resizableContainers(pod).map((c) => [c.name, structuredClone(c.resources ?? {})]),
    ),
    ...(level !== undefined && { podLevelResources: structuredClone(level) }),
  };
}

/**
 * Upstream's updatePodFromAllocation: the pod with each container's (and the pod-level)
 * resources replaced by the allocation where they differ. The pod is copied only then.
 */
export function applyAllocation(pod: Pod, info: PodResourceInfo): { pod: Pod; updated: boolean } {
  const level = podLevelResources(pod);
  const levelDiffers =
    (level === undefined) !== (info.podLevelResources === undefined) ||
    !sameRequirements(level, info.podLevelResources);
  const differs = (c: Container): boolean => {
    const a = info.containerResources[c.name];
    return a !== undefined && !sameRequirements(c.resources, a);
  };
  const containersDiffer = resizableContainers(pod).some(differs);
  if (!levelDiffers && !containersDiffer) return { pod, updated: false };
  const swap = (c: Container): Container => {
    const a = info.containerResources[c.name];
    return a !== undefined && differs(c) ? { ...c, resources: structuredClone(a) } : c;
  };
  const spec = pod.spec ?? { containers: [] };
  const next: Pod = {
    ...pod,
    spec: {
      ...spec,
      containers: spec.containers.map(swap),
      ...(spec.initContainers !== undefined && { initContainers: spec.initContainers.map(swap) }),
    },
  };
  if (levelDiffers) {
    const s = next.spec as PodLevel;
    if (info.podLevelResources === undefined) delete s.resources;
    else s.resources = structuredClone(info.podLevelResources);
  }
  return { pod: next, updated: true };
}
