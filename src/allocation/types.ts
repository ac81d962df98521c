/**
 * The allocation manager (upstream pkg/kubelet/allocation): what each pod's containers
 * have been *allocated* — the resources the kubelet admitted them with, which differ
 * from the spec while a resize (the pod's `resize` subresource) is pending — kept in a
 * checkpoint file in the root directory, so a restarted kubelet neither re-admits a
 * pod at its new size nor forgets a resize it had accepted.
 *
 * Two states share one format: `allocated_pods_state` (what was admitted, this
 * manager's) and `actuated_pods_state` (what the runtime was last told, the resize
 * execution's in kuberuntime). A resize is in progress while they differ; a berth
 * killed between the two finishes the resize on the next sync.
 */
import type { Pod, ResourceRequirements } from 'kubernetes-types/core/v1.js';
import { BerthError } from '../util/errors.ts';

/** Upstream's state.PodResourceInfo: one pod's recorded resources. */
export interface PodResourceInfo {
  /** By container name: regular containers and restartable (sidecar) init containers. */
  readonly containerResources: Readonly<Record<string, ResourceRequirements>>;
  /** spec.resources (pod-level resources), when the pod sets them. */
  readonly podLevelResources?: ResourceRequirements;
}

/** Upstream's state.State: pod UID -> recorded resources, optionally checkpointed. */
export interface ResourceState {
  get(uid: string): PodResourceInfo | undefined;
  /** Every recorded pod. */
  uids(): string[];
  /** Records a pod's resources (and writes the checkpoint when it changed). */
  set(uid: string, info: PodResourceInfo): Promise<void>;
  /** Records one container's resources, keeping the pod's others. */
  setContainer(uid: string, container: string, resources: ResourceRequirements): Promise<void>;
  /** Records the pod-level resources, keeping the containers'. */
  setPodLevel(uid: string, resources: ResourceRequirements | undefined): Promise<void>;
  /**
   * Forgets a pod. Like upstream, the file is not rewritten for a removal alone: a
   * leftover entry is harmless and goes with the next write.
   */
  remove(uid: string): void;
  /** Forgets every pod not in `keep`. */
  removeOrphans(keep: ReadonlySet<string>): void;
}

/** Why a resize is not allocated now: upstream's PodResizePending reasons. */
export type PendingReason = 'Infeasible' | 'Deferred';

/** What {@link AllocationManager.handleResize} decided for a pod. */
export type ResizeDecision =
  | { readonly kind: 'none' }
  | { readonly kind: 'allocated' }
  | { readonly kind: 'pending'; readonly reason: PendingReason; readonly message: string };

/** The allocation manager's interface (upstream's allocation.Manager). */
export interface AllocationManager {
  /** `pod` with its spec's resources replaced by the allocated ones; `updated` when they differ. */
  podFromAllocation(pod: Pod): { pod: Pod; updated: boolean };
  /** The allocated resources of one container, if recorded. */
  containerAllocation(uid: string, container: string): ResourceRequirements | undefined;
  hasAllocation(uid: string): boolean;
  /** Records an admitted pod's resources unless it already has an allocation (a restart). */
  addPod(pod: Pod): Promise<void>;
  /** The pod's spec changed: queue and evaluate a resize if its resources differ. */
  podUpdated(pod: Pod): Promise<void>;
  /** The pod is gone: forget it and retry the pending resizes it may have blocked. */
  removePod(uid: string): Promise<void>;
  /** Retries every pending resize (upstream's RetryPendingResizes). */
  retryPendingResizes(trigger: string): Promise<void>;
  /** Periodic retry of pending resizes until `signal` aborts. */
  run(signal: AbortSignal): Promise<void>;
}

export class AllocationError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('BERTH_ALLOCATION', message, options);
  }
}
