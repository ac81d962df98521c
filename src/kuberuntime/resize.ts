/**
 * The pure half of an in-place resize (upstream's computePodResizeAction and
 * IsPodResizeInProgress): which running containers need new resources, in what order,
 * and which must restart instead, from the *allocated* pod (its spec already at the
 * allocation manager's resources), the runtime's view and the *actuated* resources
 * (what the runtime was last told, checkpointed in actuated_pods_state).
 *
 * Per resource (memory, cpu) the updates are ordered decreases first, then increases,
 * so the containers' sum never goes past the pod cgroup's limit in between. A
 * container whose resizePolicy for a changed resource says RestartContainer is killed
 * and started again with its allocation instead ("Container <name> resize requires
 * restart"); a resource without a policy is resized in place (NotRequired).
 * Resizable: app containers and every init container; only running ones: a container
 * that is not running gets its allocation when it (re)starts.
 */
import type { Container, Pod, ResourceRequirements } from 'kubernetes-types/core/v1.js';
import {
  actuatedContainers,
  podLevelResources,
  resizableContainers,
  sameCpuMemory,
} from '../allocation/resources.ts';
import { milliCpu, parseQuantity } from '../util/quantity.ts';
import { latestContainer, type RuntimePodStatus } from '../container/pod-status.ts';

/** Upstream's resourceRequirements: millicores and bytes; 0 = not set. */
export interface ResourceValues {
  readonly cpuRequest: number;
  readonly cpuLimit: number;
  readonly memoryRequest: number;
  readonly memoryLimit: number;
}

export type ResizeResource = 'cpu' | 'memory';

/** One container's in-place update. */
export interface ContainerResizeUpdate {
  readonly name: string;
  readonly containerId: string;
  readonly desired: ResourceValues;
  /** What the runtime has: the actuated resources, advanced as updates succeed. */
  readonly current: ResourceValues;
}

/** What a sync must do to actuate the pod's allocation. */
export interface ResizeActions {
  /** In-place updates per resource, decreases before increases. */
  readonly updates: Readonly<Record<ResizeResource, readonly ContainerResizeUpdate[]>>;
  /** Containers to restart for their resizePolicy, with the Killing event's message. */
  readonly restarts: ReadonlyMap<string, string>;
  /** The pod cgroup follows (a restart for resize changes the pod's totals too). */
  readonly updatePodResources: boolean;
  /**
   * The pod-level resources (`spec.resources`) differ from the actuated ones (upstream's
   * computePodLevelResourcesResizeAction): the pod cgroup is resized even when no
   * container changes, and the actuated pod-level resources are recorded after.
   */
  readonly updatePodLevelResources: boolean;
}

/** The actuated resources of a pod's containers (actuated_pods_state). */
export interface ActuatedReader {
  container(uid: string, name: string): ResourceRequirements | undefined;
  /** The actuated pod-level resources; undefined when none were recorded. */
  podLevel(uid: string): ResourceRequirements | undefined;
}

function cpuOf(list: Readonly<Record<string, string>> | undefined): number {
  const q = list?.['cpu'];
  return q === undefined ? 0 : milliCpu(q);
}

function memoryOf(list: Readonly<Record<string, string>> | undefined): number {
  const q = list?.['memory'];
  return q === undefined ? 0 : Math.floor(parseQuantity(q));
}

/**
 * A container's effective limits (upstream's GetLimits with pod-level resources): a
 * limit the container does not set is the pod's, when the pod sets one.
 */
export function effectiveRequirements(
  podLevel: ResourceRequirements | undefined,
  container: ResourceRequirements | undefined,
): ResourceRequirements {
  const limits = { ...container?.limits };
  for (const r of ['cpu', 'memory']) {
    const pod = podLevel?.limits?.[r];
    if (limits[r] === undefined && pod !== undefined) limits[r] = pod;
  }
  return {
    ...(Object.keys(limits).length > 0 && { limits }),
    ...(container?.requests !== undefined && { requests: { ...container.requests } }),
  };
}

/** Upstream's containerResourcesFromRequirements. */
export function resourceValues(r: ResourceRequirements | undefined): ResourceValues {
  return {
    cpuRequest: cpuOf(r?.requests),
    cpuLimit: cpuOf(r?.limits),
    memoryRequest: memoryOf(r?.requests),
    memoryLimit: memoryOf(r?.limits),
  };
}

function sameValues(a: ResourceValues, b: ResourceValues): boolean {
  return (
    a.cpuRequest === b.cpuRequest &&
    a.cpuLimit === b.cpuLimit &&
    a.memoryRequest === b.memoryRequest &&
    a.memoryLimit === b.memoryLimit
  );
}

function restartsFor(container: Container, resource: ResizeResource): boolean {
  const policy = container.resizePolicy?.find((p) => p.resourceName === resource);
  return policy?.restartPolicy === 'RestartContainer';
}

/** Decides the resize work for `pod` (the allocated pod); pure. */
export function computeResizeActions(
  pod: Pod,
  status: RuntimePodStatus,
  actuated: ActuatedReader,
): ResizeActions {
  const uid = pod.metadata?.uid ?? '';
  const podLevel = podLevelResources(pod);
  const memory: ContainerResizeUpdate[] = [];
  const cpu: ContainerResizeUpdate[] = [];
  const restarts = new Map<string, string>();
  const place = (
    list: ContainerResizeUpdate[],
    update: ContainerResizeUpdate,
    desired: number,
    current: number,
  ): void => {
    if (desired > current) list.push(update);
    else if (desired < current) list.unshift(update);
  };
  // A running regular init container is resized too (upstream's computeInitContainerActions
  // with InPlacePodVerticalScalingInitContainers), though it never holds a resize in progress.
  for (const container of resizableContainers(pod)) {
    const running = latestContainer(status, container.name);
    if (running?.state !== 'running') continue;
    const desired = resourceValues(effectiveRequirements(podLevel, container.resources));
    const current = resourceValues(actuated.container(uid, container.name));
    if (sameValues(desired, current)) continue;
    const memoryChanges =
      desired.memoryLimit !== current.memoryLimit ||
      desired.memoryRequest !== current.memoryRequest;
    const cpuChanges =
      desired.cpuLimit !== current.cpuLimit || desired.cpuRequest !== current.cpuRequest;
    if (
      (memoryChanges && restartsFor(container, 'memory')) ||
      (cpuChanges && restartsFor(container, 'cpu'))
    ) {
      restarts.set(container.name, `Container ${container.name} resize requires restart`);
      continue;
    }
    const update: ContainerResizeUpdate = {
      name: container.name,
      containerId: running.id,
      desired,
      current: { ...current },
    };
    if (desired.memoryLimit !== current.memoryLimit)
      place(memory, update, desired.memoryLimit, current.memoryLimit);
    else if (desired.memoryRequest !== current.memoryRequest)
      place(memory, update, desired.memoryRequest, current.memoryRequest);
    if (desired.cpuLimit !== current.cpuLimit)
      place(cpu, update, desired.cpuLimit, current.cpuLimit);
    else if (desired.cpuRequest !== current.cpuRequest)
      place(cpu, update, desired.cpuRequest, current.cpuRequest);
  }
  return {
    updates: { memory, cpu },
    restarts,
    updatePodResources: restarts.size > 0,
    // Upstream compares values, so an absent pod-level record equals no pod-level resources.
    updatePodLevelResources: !sameCpuMemory(podLevel, actuated.podLevel(uid)),
  };
}

/** Whether the plan has any resize work. */
export function hasResizeWork(actions: ResizeActions): boolean {
  return (
    actions.updates.memory.length > 0 ||
    actions.updates.cpu.length > 0 ||
    actions.updatePodResources ||
    actions.updatePodLevelResources
  );
}

/**
 * Upstream's IsPodResizeInProgress: a running resizable container whose allocated cpu
 * or memory differs from what was actuated, or pod-level resources that differ from the
 * actuated ones (only once some were recorded, as upstream).
 */
export function isResizeInProgress(
  pod: Pod,
  status: RuntimePodStatus,
  actuated: ActuatedReader,
): boolean {
  const uid = pod.metadata?.uid ?? '';
  const podLevel = podLevelResources(pod);
  const actuatedPodLevel = actuated.podLevel(uid);
  if (
    podLevel !== undefined &&
    actuatedPodLevel !== undefined &&
    !sameCpuMemory(podLevel, actuatedPodLevel)
  )
    return true;
  return actuatedContainers(pod).some((c) => {
    if (latestContainer(status, c.name)?.state !== 'running') return false;
    return !sameCpuMemory(
      effectiveRequirements(podLevel, c.resources),
      actuated.container(uid, c.name),
    );
  });
}
