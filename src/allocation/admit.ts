/**
 * Admission of a resize (upstream's podResizesAdmitHandler followed by the kubelet's
 * other admit handlers, with operation "resize"): the desired pod is checked against
 * the node's allocatable and the *allocated* resources of the other active pods.
 *
 * - Infeasible (never fits as asked): a memory change of a container that may use swap,
 *   a resize of a memory-backed emptyDir (InPlacePodVerticalScalingMemoryBackedVolumes
 *   is alpha, off), a Guaranteed pod's cpu with cpuManagerPolicy static or its memory
 *   with memoryManagerPolicy Static (the Exclusive* gates are alpha, off).
 * - Pod-level resources (spec.resources): resized like the containers' when
 *   InPlacePodLevelResourcesVerticalScaling is on (beta, on by default since v1.36); with
 *   the gate off, Infeasible with upstream's message.
 * - Any other refusal (OutOfcpu, OutOfmemory, ...) becomes Deferred: it may fit once
 *   other pods leave. At v1.37 a request beyond the node's allocatable never reaches the
 *   kubelet: the API server's PodResizeValidator refuses it (403, NodeCapacity); should
 *   one arrive anyway, upstream defers it too, and so does berth.
 */
import type { Node, Pod } from 'kubernetes-types/core/v1.js';
import { admitPod, type PodAdmitResult } from '../admission/predicates.ts';
import { qosClassOf } from '../container/qos.ts';
import { podLevelResources, resizableContainers, sameList, sameRequirements } from './resources.ts';

export interface ResizeAdmitOptions {
  readonly node: () => Node | undefined;
  readonly cpuManagerPolicy: string;
  readonly memoryManagerPolicy: string;
  /** Whether a container of the pod may use swap (LimitedSwap, Burstable, swap on). */
  readonly usesSwap?: (pod: Pod, containerName: string) => boolean;
  readonly allowedUnsafeSysctls?: readonly string[];
  /** InPlacePodLevelResourcesVerticalScaling (default on). */
  readonly podLevelResize?: boolean;
  readonly appArmorEnabled?: () => boolean;
}

const INFEASIBLE = 'Infeasible';

function infeasible(message: string): PodAdmitResult {
  return { admit: false, reason: INFEASIBLE, message };
}

function memoryPolicyRestarts(pod: Pod, name: string): boolean {
  const c = resizableContainers(pod).find((x) => x.name === name);
  const policy = c?.resizePolicy?.find((p) => p.resourceName === 'memory');
  return policy?.restartPolicy === 'RestartContainer';
}

/** Upstream's disallowResizeForSwappableContainers. */
function swapRefusal(
  desired: Pod,
  allocated: Pod,
  o: ResizeAdmitOptions,
): PodAdmitResult | undefined {
  if (o.usesSwap === undefined) return undefined;
  const before = new Map(resizableContainers(allocated).map((c) => [c.name, c]));
  for (const c of resizableContainers(desired)) {
    const a = before.get(c.name);
    if (a === undefined) continue;
    const changed = !sameList(
      { memory: c.resources?.requests?.['memory'] ?? '0' },
      { memory: a.resources?.requests?.['memory'] ?? '0' },
    );
    if (changed && !memoryPolicyRestarts(allocated, c.name)) {
      if (o.usesSwap(desired, c.name) || o.usesSwap(allocated, c.name))
        return infeasible('In-place resize of containers with swap is not supported.');
    }
  }
  return undefined;
}

/** Upstream's IsMemoryBackedVolumeResizeRequested. */
function memoryVolumeResized(desired: Pod, allocated: Pod): boolean {
  const a = allocated.spec?.volumes ?? [];
  const d = desired.spec?.volumes ?? [];
  if (a.length !== d.length) return false;
  return a.some((vol, i) => {
    const limit = vol.emptyDir?.sizeLimit;
    if (vol.emptyDir?.medium !== 'Memory' || limit === undefined) return false;
    return !sameList({ s: limit }, { s: d[i]?.emptyDir?.sizeLimit ?? '' });
  });
}

/** Whether a resizable container's `resource` request changes. */
function requestChanges(desired: Pod, allocated: Pod, resource: string): boolean {
  const before = new Map(resizableContainers(allocated).map((c) => [c.name, c]));
  return resizableContainers(desired).some(
    (c) =>
      !sameList(
        { r: c.resources?.requests?.[resource] ?? '0' },
        { r: before.get(c.name)?.resources?.requests?.[resource] ?? '0' },
      ),
  );
}

/**
 * Decides whether `desired` (the pod as the resize asks) can be allocated now, given
 * `allocated` (the pod as admitted) and the other active pods at their allocations.
 */
export function admitResize(
  desired: Pod,
  allocated: Pod,
  others: readonly Pod[],
  o: ResizeAdmitOptions,
): PodAdmitResult {
  const swap = swapRefusal(desired, allocated, o);
  if (swap !== undefined) return swap;
  if (
    o.podLevelResize === false &&
    !sameRequirements(podLevelResources(desired), podLevelResources(allocated))
  )
    return infeasible('InPlacePodLevelResourcesVerticalScaling is disabled');
  if (memoryVolumeResized(desired, allocated))
    return infeasible('Memory-backed emptyDir volume resize is disabled');
  if (qosClassOf(desired) === 'Guaranteed') {
    if (o.cpuManagerPolicy === 'static' && requestChanges(desired, allocated, 'cpu'))
      return infeasible(
        'Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"',
      );
    if (o.memoryManagerPolicy === 'Static' && requestChanges(desired, allocated, 'memory'))
      return infeasible(
        'Resize is infeasible for Guaranteed Pods alongside Memory Manager policy "Static"',
      );
  }
  const node = o.node();
  if (node === undefined)
    return { admit: false, reason: 'InvalidNodeInfo', message: 'Kubelet cannot get node info.' };
  const uid = desired.metadata?.uid;
  return admitPod({
    pod: desired,
    node,
    active: others.filter((p) => p.metadata?.uid !== uid),
    allowedUnsafeSysctls: o.allowedUnsafeSysctls ?? [],
    appArmorEnabled: o.appArmorEnabled?.() ?? false,
  });
}
