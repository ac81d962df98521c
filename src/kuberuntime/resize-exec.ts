/**
 * Carrying out a resize (upstream's doPodResizeAction): the pod cgroup and CRI
 * UpdateContainerResources, memory before cpu, each in upstream's order:
 *
 *   limit grows   -> pod cgroup limit first
 *   request grows -> pod cgroup request (cpu.shares) next
 *   -> the containers (their updates already ordered decreases first)
 *   request shrinks -> pod cgroup request
 *   limit shrinks   -> pod cgroup limit last
 *
 * so the pod cgroup is never below what its containers are given. Before a memory
 * limit goes down the pod's and each container's use are checked: a limit below use
 * would have the kernel reclaim or OOM-kill, so the resize fails with upstream's
 * message ("cannot decrease memory limits: attempting to set ... below current usage")
 * and stays in progress, retried on later syncs. Every successful container update is
 * recorded in the actuated state, so a berth that dies half-way resumes from there.
 * Upstream also tells the runtime first (UpdatePodSandboxResources); that call is
 * best-effort there and not in berth's CRI subset.
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { formatBytes, formatMilliCpu, podLevelResources } from '../allocation/resources.ts';
import type { ResourceState } from '../allocation/types.ts';
import type { PodCgroups } from '../cm/pod-cgroups.ts';
import { milliCpuToQuota, milliCpuToShares, CPU_PERIOD_US } from '../cm/pod-cgroups.ts';
import type { CgroupResources } from '../cm/types.ts';
import { cri, type RuntimeService } from '../cri/index.ts';
import type { Logger } from '../util/logger.ts';
import {
  effectiveRequirements,
  type ContainerResizeUpdate,
  type ResizeActions,
  type ResizeResource,
  type ResourceValues,
} from './resize.ts';

export interface ResizeExecDeps {
  readonly runtime: Pick<RuntimeService, 'updateContainerResources' | 'containerStats'>;
  /** Absent without cgroupsPerQOS: only the containers are resized. */
  readonly podCgroups?: Pick<PodCgroups, 'desiredPod' | 'readPod' | 'resizePod'>;
  /** actuated_pods_state. */
  readonly actuated: ResourceState;
  readonly logger: Logger;
  /**
   * The container's CRI `unified` map at its new resources (memory-qos.ts): upstream's
   * resize sends the whole generateContainerResources, so memory.high follows a memory
   * resize on cgroup v2.
   */
  readonly unified?: (container: Container) => Record<string, string>;
}

export type ResizeResult = { readonly ok: true } | { readonly ok: false; readonly message: string };

/** A value where undefined or a negative quota means unlimited. */
function limitValue(v: number | undefined): number {
  return v === undefined || v < 0 ? Infinity : v;
}

/** Upstream's utilerrors.NewAggregate(...).Error(). */
function aggregate(messages: readonly string[]): string {
  const unique = [...new Set(messages)];
  return unique.length === 1 ? (unique[0] ?? '') : `[${unique.join(', ')}]`;
}

/** The CRI resources of a container at `v` (upstream's generateContainerResources, cpu and memory). */
export function linuxResourcesOf(v: ResourceValues): cri.LinuxContainerResources {
  return cri.LinuxContainerResources.fromPartial({
    cpuShares: BigInt(milliCpuToShares(v.cpuRequest)),
    ...(v.cpuLimit > 0 && {
      cpuPeriod: BigInt(CPU_PERIOD_US),
      cpuQuota: BigInt(milliCpuToQuota(v.cpuLimit)),
    }),
    memoryLimitInBytes: BigInt(v.memoryLimit),
  });
}

/** A container spec at `v`, for what is derived from its resources (the unified map). */
function containerAt(name: string, v: ResourceValues): Container {
  return { name, resources: requirementsOf(v) };
}

/** A ResourceRequirements holding `v`, as upstream records an actuated container. */
function requirementsOf(v: ResourceValues) {
  return {
    limits: { cpu: formatMilliCpu(v.cpuLimit), memory: formatBytes(v.memoryLimit) },
    requests: { cpu: formatMilliCpu(v.cpuRequest), memory: formatBytes(v.memoryRequest) },
  };
}

async function usageOf(
  deps: ResizeExecDeps,
  containerId: string,
  signal: AbortSignal,
): Promise<number | undefined> {
  try {
    const r = await deps.runtime.containerStats({ containerId }, { signal });
    const bytes = r.stats?.memory?.usageBytes?.value;
    return bytes === undefined ? undefined : Number(bytes);
  } catch (err) {
    if (signal.aborted) throw err;
    return undefined;
  }
}

/** Upstream's validateMemoryResizeAction. */
async function validateMemory(
  deps: ResizeExecDeps,
  actions: ResizeActions,
  current: CgroupResources & { memoryUsage?: number },
  desired: CgroupResources | undefined,
  signal: AbortSignal,
): Promise<string | undefined> {
  const podLimitDecreasing =
    desired?.memoryLimit !== undefined &&
    (current.memoryLimit === undefined || desired.memoryLimit < current.memoryLimit);
  const decreasing = actions.updates.memory.filter(
    (u) =>
      u.desired.memoryLimit !== 0 &&
      (u.current.memoryLimit === 0 || u.desired.memoryLimit < u.current.memoryLimit),
  );
  if (!podLimitDecreasing && decreasing.length === 0) return undefined;
  const errors: string[] = [];
  const podUsage = current.memoryUsage;
  if (podLimitDecreasing) {
    if (podUsage === undefined) errors.push('missing pod memory usage');
    else if (podUsage >= (desired.memoryLimit ?? 0))
      errors.push(
        `attempting to set pod memory limit (${desired.memoryLimit ?? 0}) below current usage (${podUsage})`,
      );
  }
  for (const u of decreasing) {
    const usage = await usageOf(deps, u.containerId, signal);
    if (usage === undefined) errors.push(`missing container "${u.name}" memory usage`);
    else if (usage >= u.desired.memoryLimit)
      // Upstream prints the pod's usage here, not the container's; kept for the same text.
      errors.push(
        `attempting to set container "${u.name}" memory limit (${u.desired.memoryLimit}) below current usage (${podUsage ?? usage})`,
      );
  }
  return errors.length === 0 ? undefined : `cannot decrease memory limits: ${aggregate(errors)}`;
}

/**
 * Actuates `actions` for `pod` (the allocated pod). Returns the error message of the
 * first step that failed; what succeeded before it stays done (and recorded).
 */
export async function doPodResize(
  deps: ResizeExecDeps,
  pod: Pod,
  actions: ResizeActions,
  signal: AbortSignal,
): Promise<ResizeResult> {
  const uid = pod.metadata?.uid ?? '';
  const cgroups = deps.podCgroups;
  const desired = cgroups?.desiredPod(pod);
  const initial = await cgroups?.readPod(pod);
  let current: CgroupResources & { memoryUsage?: number } = initial ?? {};
  const podWork = actions.updatePodResources || actions.updatePodLevelResources;
  const memoryWork = actions.updates.memory.length > 0 || podWork;
  const cpuWork = actions.updates.cpu.length > 0 || podWork;
  if (memoryWork && initial !== undefined) {
    const invalid = await validateMemory(deps, actions, initial, desired, signal);
    if (invalid !== undefined) return { ok: false, message: invalid };
  } else if (memoryWork) {
    const invalid = await validateMemory(deps, actions, {}, undefined, signal);
    if (invalid !== undefined) return { ok: false, message: invalid };
  }
  // What each container has now, advanced as its updates succeed (a cpu update after a
  // memory one sends the new memory values).
  const now = new Map<string, ResourceValues>();
  const valuesOf = (u: ContainerResizeUpdate): ResourceValues => now.get(u.name) ?? u.current;

  const setPod = async (resource: ResizeResource, limit: boolean): Promise<void> => {
    if (cgroups === undefined || initial === undefined || desired === undefined) return;
    let change: CgroupResources;
    if (resource === 'cpu')
      change = limit
        ? { cpuPeriod: desired.cpuPeriod ?? CPU_PERIOD_US, cpuQuota: desired.cpuQuota ?? -1 }
        : { ...(desired.cpuShares !== undefined && { cpuShares: desired.cpuShares }) };
    else if (limit)
      change = { ...(desired.memoryLimit !== undefined && { memoryLimit: desired.memoryLimit }) };
    else return; // memory requests are not written to cgroups
    await cgroups.resizePod(pod, change);
    current = { ...current, ...change };
  };

  const updateContainers = async (
    resource: ResizeResource,
    updates: readonly ContainerResizeUpdate[],
  ): Promise<void> => {
    for (const u of updates) {
      const have = valuesOf(u);
      const next: ResourceValues =
        resource === 'memory'
          ? { ...have, memoryLimit: u.desired.memoryLimit, memoryRequest: u.desired.memoryRequest }
          : { ...have, cpuLimit: u.desired.cpuLimit, cpuRequest: u.desired.cpuRequest };
      const linux = linuxResourcesOf(next);
      const unified = deps.unified?.(containerAt(u.name, next));
      if (unified !== undefined && Object.keys(unified).length > 0) linux.unified = unified;
      await deps.runtime.updateContainerResources(
        { containerId: u.containerId, linux },
        { signal },
      );
      now.set(u.name, next);
      await deps.actuated.setContainer(uid, u.name, requirementsOf(next));
      deps.logger.info('Container resources updated', {
        container: u.name,
        containerID: u.containerId,
        resource,
      });
    }
  };

  const resize = async (
    resource: ResizeResource,
    currentLimit: number,
    newLimit: number,
    currentRequest: number,
    newRequest: number,
  ): Promise<void> => {
    if (newLimit > currentLimit) await setPod(resource, true);
    if (newRequest > currentRequest) await setPod(resource, false);
    await updateContainers(resource, actions.updates[resource]);
    if (newRequest < currentRequest) await setPod(resource, false);
    if (newLimit < currentLimit) await setPod(resource, true);
    if (actions.updatePodLevelResources) await recordPodLevel(deps, pod, resource);
  };

  try {
    if (memoryWork) {
      const have = limitValue(current.memoryLimit);
      // No pod memory limit wanted: keep the current one (upstream cannot remove limits).
      const want = desired?.memoryLimit === undefined ? have : limitValue(desired.memoryLimit);
      await resize('memory', have, want, 0, 0);
    }
    if (cpuWork) {
      const have = limitValue(current.cpuQuota);
      const want =
        desired?.cpuQuota === undefined || desired.cpuQuota < 0 ? have : desired.cpuQuota;
      await resize('cpu', have, want, current.cpuShares ?? 0, desired?.cpuShares ?? 0);
    }
  } catch (err) {
    if (signal.aborted) throw err;
    const message = err instanceof Error ? err.message : String(err);
    deps.logger.error('Pod resize failed', { error: message });
    return { ok: false, message };
  }
  return { ok: true };
}

/**
 * Records `resource` of the pod's allocated pod-level resources as actuated, keeping the
 * other resource's record (upstream's updateActuatedPodLevelResources, per resource).
 */
async function recordPodLevel(deps: ResizeExecDeps, pod: Pod, resource: ResizeResource) {
  const allocated = podLevelResources(pod);
  if (allocated === undefined) return;
  const uid = pod.metadata?.uid ?? '';
  const old = deps.actuated.get(uid)?.podLevelResources;
  const merge = (
    have: Readonly<Record<string, string>> | undefined,
    want: Readonly<Record<string, string>> | undefined,
  ): Record<string, string> | undefined => {
    if (want === undefined) return have === undefined ? undefined : { ...have };
    const next = Object.entries(have ?? {}).filter(([name]) => name !== resource);
    const q = want[resource];
    return Object.fromEntries(q === undefined ? next : [...next, [resource, q]]);
  };
  const requests = merge(old?.requests, allocated.requests);
  const limits = merge(old?.limits, allocated.limits);
  await deps.actuated.setPodLevel(uid, {
    ...(requests !== undefined && { requests }),
    ...(limits !== undefined && { limits }),
  });
}

/**
 * Records what a container is created with (upstream marks the resources actuated when
 * it creates a container), so a later resize compares against them.
 */
export async function recordContainerStart(
  actuated: ResourceState,
  pod: Pod,
  containerName: string,
): Promise<void> {
  const spec = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].find(
    (c) => c.name === containerName,
  );
  if (spec === undefined) return;
  await actuated.setContainer(
    pod.metadata?.uid ?? '',
    containerName,
    effectiveRequirements(podLevelResources(pod), spec.resources),
  );
}
