/**
 * The memory side of a container's CRI resources that depends on the node: the OOM
 * score adjust (upstream's qos.GetContainerOOMScoreAdjust) and, on cgroup v2, the
 * unified keys upstream sets — memory.oom.group unless singleProcessOOMKill, and with
 * the MemoryQoS gate (beta, on by default in v1.37) memory.min/low and memory.high so a
 * Burstable container is throttled before the OOM killer has to act.
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { isCriticalPod } from '../admission/predicates.ts';
import type { QosClass } from '../container/qos.ts';
import { isSidecar } from '../container/restart-policy.ts';
import { parseQuantity } from '../util/quantity.ts';

const GUARANTEED_OOM_SCORE_ADJ = -997;
const BESTEFFORT_OOM_SCORE_ADJ = 1000;
/**
 * Upstream rounds memory.high down to os.Getpagesize(); Node cannot ask, and 4 KiB is
 * the page size of every x86-64 and stock arm64 kernel berth runs on.
 */
const PAGE_SIZE = 4096;

function memoryRequest(c: Container): number {
  const q = c.resources?.requests?.['memory'];
  return q === undefined ? 0 : Math.floor(parseQuantity(q));
}

function memoryLimit(c: Container): number {
  const q = c.resources?.limits?.['memory'];
  return q === undefined ? 0 : Math.floor(parseQuantity(q));
}

/** kubetypes.IsNodeCriticalPod: critical and of the system-node-critical class. */
function isNodeCriticalPod(pod: Pod): boolean {
  return isCriticalPod(pod) && pod.spec?.priorityClassName === 'system-node-critical';
}

/**
 * The container's oom_score_adj: -997 for Guaranteed and node-critical pods, 1000 for
 * BestEffort, and for Burstable 1000 - 1000 * request / capacity kept within 3..999, a
 * sidecar never above the pod's regular containers. Without the node's memory capacity
 * (not yet known) a Burstable container gets 999, the least protected Burstable value.
 */
export function containerOomScoreAdjust(
  pod: Pod,
  container: Container,
  qos: QosClass,
  memoryCapacityBytes: number | undefined,
): number {
  if (isNodeCriticalPod(pod) || qos === 'Guaranteed') return GUARANTEED_OOM_SCORE_ADJ;
  if (qos === 'BestEffort') return BESTEFFORT_OOM_SCORE_ADJ;
  if (memoryCapacityBytes === undefined || memoryCapacityBytes <= 0) return 999;
  const score = (request: number): number =>
    1000 - Math.trunc((1000 * request) / memoryCapacityBytes);
  let adjust = score(memoryRequest(container));
  const initNames = new Set((pod.spec?.initContainers ?? []).map((c) => c.name));
  const regular = pod.spec?.containers ?? [];
  if (isSidecar(container) && initNames.has(container.name) && regular.length > 0) {
    const minRegular = Math.min(...regular.map(memoryRequest));
    adjust = Math.min(adjust, score(minRegular));
  }
  if (adjust < 1000 + GUARANTEED_OOM_SCORE_ADJ) return 1000 + GUARANTEED_OOM_SCORE_ADJ;
  if (adjust === BESTEFFORT_OOM_SCORE_ADJ) return adjust - 1;
  return adjust;
}

export interface UnifiedOptions {
  /** The node's cgroups are the unified (v2) hierarchy; nothing is set on v1. */
  readonly cgroupV2: boolean;
  /** singleProcessOOMKill as configured (null: upstream's default, false on v2). */
  readonly singleProcessOOMKill: boolean | null;
  /** Present when the MemoryQoS gate is on. */
  readonly memoryQos?: {
    readonly throttlingFactor: number;
    /** The node's allocatable memory in bytes, for a container with no memory limit. */
    readonly allocatableMemoryBytes: number | undefined;
  };
}

/** The container's CRI `unified` map (cgroup v2 only; empty on v1). */
export function containerUnified(
  container: Container,
  options: UnifiedOptions,
): Record<string, string> {
  if (!options.cgroupV2) return {};
  const unified: Record<string, string> = {};
  // Kill the whole container on OOM, not one process of it (upstream's v2 default).
  if (options.singleProcessOOMKill !== true) unified['memory.oom.group'] = '1';
  const qos = options.memoryQos;
  if (qos === undefined) {
    // Gate off: clear a throttle left by an earlier MemoryQoS configuration.
    unified['memory.high'] = 'max';
    return unified;
  }
  // memoryReservationPolicy None (the only one berth accepts): no protection.
  unified['memory.min'] = '0';
  unified['memory.low'] = '0';
  const request = memoryRequest(container);
  const limit = memoryLimit(container);
  if (request !== limit || request === 0) {
    const ceiling = limit !== 0 ? limit : (qos.allocatableMemoryBytes ?? 0);
    const high =
      ceiling > 0
        ? Math.floor((request + (ceiling - request) * qos.throttlingFactor) / PAGE_SIZE) * PAGE_SIZE
        : 0;
    if (high !== 0 && high > request) unified['memory.high'] = String(high);
  }
  return unified;
}
