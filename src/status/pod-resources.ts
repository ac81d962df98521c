/**
 * A pod's `status.resources` (upstream's convertToAPIPodLevelResourcesStatus, with
 * InPlacePodLevelResourcesVerticalScaling): what the pod as a whole has. Before the pod
 * runs it is the allocated pod's requests and limits (PodRequests / PodLimits over
 * spec.resources); once it runs, the pod cgroup's settings read back: cpu request from
 * cpu.shares, cpu limit from the CFS quota, memory limit from the cgroup's limit; the
 * memory request is not in any cgroup file, so it stays the allocated one. The scheduler
 * reads this field (max of spec and status) while a pod-level resize is in flight.
 *
 * Near the cgroup floors (2 shares, 10m quota) and where cgroup v2's coarse cpu.weight
 * cannot give the shares back exactly, the allocated value is kept, as upstream does, so
 * the API does not show a rounding artefact as a change. A value the cgroup does not have
 * (no pod cgroup, unlimited) keeps what the previous status said.
 */
import type { Pod, PodStatus, ResourceRequirements } from 'kubernetes-types/core/v1.js';
import { podResourceList } from '../allocation/pod-allocated.ts';
import { formatBytes, formatMilliCpu } from '../allocation/resources.ts';
import { milliCpuToShares } from '../cm/pod-cgroups.ts';
import { podLevelResources } from '../container/pod-level.ts';
import { milliCpu } from '../util/quantity.ts';

/** The pod cgroup's settings (cm's CgroupState); unlimited values left out. */
export interface PodCgroupReading {
  readonly cpuShares?: number;
  /** -1: unlimited. */
  readonly cpuQuota?: number;
  readonly cpuPeriod?: number;
  readonly memoryLimit?: number;
}

const MIN_SHARES = 2;
const MIN_MILLI_CPU_LIMIT = 10;

/** Upstream's SharesToMilliCPU. */
function sharesToMilliCpu(shares: number): number {
  return shares >= MIN_SHARES ? Math.ceil((shares * 1000) / 1024) : 0;
}

/**
 * Upstream's CPUSharesEqualAfterV2RoundTrip: shares -> cpu.weight -> shares with the
 * integer formulas of the v2 cgroup manager.
 */
function sharesEqualAfterV2RoundTrip(allocated: number, readback: number): boolean {
  const weight = allocated >= 262_144 ? 10_000 : 1 + Math.floor(((allocated - 2) * 9999) / 262_142);
  return Math.floor(((weight - 1) * 262_142) / 9999) + 2 === readback;
}

/** Upstream's getEffectiveAllocatedResources: the pod's requests and limits. */
function effectiveAllocated(pod: Pod): ResourceRequirements {
  const requests = podResourceList(pod, 'requests');
  const limits = podResourceList(pod, 'limits');
  return {
    ...podLevelResources(pod),
    ...(requests !== undefined && { requests }),
    ...(limits !== undefined && { limits }),
  };
}

/**
 * `status.resources` of `allocated` (the pod at its allocated resources, its `status`
 * the API's); `previous` is the status being replaced, `cgroup` the pod cgroup's reading
 * (read only for a running pod).
 */
export function podResourcesStatus(
  allocated: Pod,
  previous: PodStatus | undefined,
  cgroup: PodCgroupReading | undefined,
): ResourceRequirements {
  if (allocated.status?.phase !== 'Running') return effectiveAllocated(allocated);
  const spec = podLevelResources(allocated);
  const requests: Record<string, string> = { ...spec?.requests };
  const limits: Record<string, string> = { ...spec?.limits };
  const old = (previous as { resources?: ResourceRequirements } | undefined)?.resources;
  const keepOld = previous?.phase === 'Running' && old !== undefined;
  const preserve = (into: Record<string, string>, from: 'requests' | 'limits', name: string) => {
    const q = old?.[from]?.[name];
    if (keepOld && q !== undefined) into[name] = q;
  };

  const shares = cgroup?.cpuShares;
  const cpuRequest = shares !== undefined && shares > 0 ? sharesToMilliCpu(shares) : 0;
  if (cpuRequest > 0) {
    const allocatedMilli = requests['cpu'] === undefined ? 0 : milliCpu(requests['cpu']);
    if (cpuRequest > MIN_SHARES || allocatedMilli > MIN_SHARES) {
      if (
        shares === undefined ||
        !sharesEqualAfterV2RoundTrip(milliCpuToShares(allocatedMilli), shares)
      )
        requests['cpu'] = formatMilliCpu(cpuRequest);
    }
  } else preserve(requests, 'requests', 'cpu');

  if (requests['memory'] === undefined) {
    const memory = podResourceList(allocated, 'requests')?.['memory'];
    if (memory !== undefined) requests['memory'] = memory;
  }

  const { cpuQuota, cpuPeriod } = cgroup ?? {};
  const cpuLimit =
    cpuPeriod !== undefined && cpuPeriod > 0 && cpuQuota !== undefined && cpuQuota !== -1
      ? Math.trunc((cpuQuota * 1000) / cpuPeriod)
      : 0;
  if (cpuLimit > 0) {
    const allocatedLimit = limits['cpu'] === undefined ? 0 : milliCpu(limits['cpu']);
    if (cpuLimit > MIN_MILLI_CPU_LIMIT || allocatedLimit > MIN_MILLI_CPU_LIMIT)
      limits['cpu'] = formatMilliCpu(cpuLimit);
  } else preserve(limits, 'limits', 'cpu');

  const memoryLimit = cgroup?.memoryLimit;
  if (memoryLimit !== undefined && memoryLimit > 0) limits['memory'] = formatBytes(memoryLimit);
  else preserve(limits, 'limits', 'memory');

  // Empty lists are left out, as Go's omitempty does.
  return {
    ...(spec?.claims !== undefined && { claims: spec.claims }),
    ...(Object.keys(requests).length > 0 && { requests }),
    ...(Object.keys(limits).length > 0 && { limits }),
  };
}
