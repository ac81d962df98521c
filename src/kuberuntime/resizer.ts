/**
 * What the pod sync does for in-place resize, in one place (upstream spreads it over
 * kubelet.SyncPod, kuberuntime.SyncPod and generateAPIPodStatus):
 *
 * 1. `prepare`: the pod is synced at its *allocated* resources (a pending resize is not
 *    applied, and a container (re)started meanwhile gets the allocation), and the
 *    actuated state is initialised for a pod that has none (InitializeActuatedPod).
 * 2. `plan`: resize.ts decides the in-place updates and the restarts for resizePolicy;
 *    the restarts go into the sync plan (computePodActions' resizeRestarts).
 * 3. `actuate`: after the sandbox step and before containers start, resize-exec.ts
 *    applies the updates. A failure sets PodResizeInProgress reason Error with the
 *    message, and a ResizeError event when that changed; later syncs retry.
 * 4. `containerStarting`: a container about to be created records its allocation as
 *    actuated.
 * 5. `statusInputs`: PodResizeInProgress is set while allocated and actuated differ for
 *    a running container or the pod-level resources, and cleared (ResizeCompleted) once
 *    they agree; the status gets the conditions, the allocated pod, the actuated
 *    resources and the pod's resources (status/pod-resources.ts).
 */
import type {
  Pod,
  PodCondition,
  PodStatus,
  ResourceRequirements,
} from 'kubernetes-types/core/v1.js';
import {
  RESIZE_COMPLETED,
  RESIZE_ERROR,
  resizeCompletedMessage,
  resizeErrorMessage,
} from '../allocation/events.ts';
import { resourceInfoForPod } from '../allocation/resources.ts';
import type { AllocationManager } from '../allocation/types.ts';
import { podTarget } from '../events/targets.ts';
import type { EventRecorder } from '../events/types.ts';
import { podResourcesStatus, type PodCgroupReading } from '../status/pod-resources.ts';
import type { ResizeConditionStore } from '../status/resize-conditions.ts';
import type { Logger } from '../util/logger.ts';
import {
  computeResizeActions,
  hasResizeWork,
  isResizeInProgress,
  type ActuatedReader,
  type ResizeActions,
} from './resize.ts';
import { doPodResize, recordContainerStart, type ResizeExecDeps } from './resize-exec.ts';
import type { RuntimePodStatus } from '../container/pod-status.ts';

export interface PodResizerOptions extends Omit<ResizeExecDeps, 'logger'> {
  readonly allocation: Pick<AllocationManager, 'podFromAllocation'>;
  readonly conditions: ResizeConditionStore;
  readonly recorder: EventRecorder;
  readonly logger: Logger;
  /** Drops cached runtime statuses of a container whose resources changed. */
  readonly invalidate?: (containerId: string) => void;
  /**
   * InPlacePodLevelResourcesVerticalScaling: the status carries the pod's resources
   * (`status.resources`, the pod cgroup read back once it runs).
   */
  readonly podLevelStatus?: boolean;
}

/** The status generator's resize inputs. */
export interface ResizeStatusInputs {
  readonly allocatedPod: Pod;
  readonly actuated: (containerName: string) => ResourceRequirements | undefined;
  readonly resizeConditions: readonly PodCondition[];
  /** status.resources, with InPlacePodLevelResourcesVerticalScaling. */
  readonly podResources?: ResourceRequirements;
}

export class PodResizer {
  readonly #o: PodResizerOptions;
  readonly #reader: ActuatedReader;

  constructor(options: PodResizerOptions) {
    this.#o = options;
    this.#reader = {
      container: (uid, name) => options.actuated.get(uid)?.containerResources[name],
      podLevel: (uid) => options.actuated.get(uid)?.podLevelResources,
    };
  }

  /** The pod at its allocated resources; initialises the actuated state once. */
  async prepare(pod: Pod): Promise<Pod> {
    const allocated = this.#o.allocation.podFromAllocation(pod).pod;
    const uid = allocated.metadata?.uid ?? '';
    if (this.#o.actuated.get(uid) === undefined) {
      // The state is set in memory at once; a failed write is retried with the next one.
      await this.#o.actuated.set(uid, resourceInfoForPod(allocated)).catch((err: unknown) => {
        this.#o.logger.error('Failed to initialize actuated pod resource info checkpoint', {
          podUID: uid,
          error: String(err),
        });
      });
    }
    return allocated;
  }

  plan(allocated: Pod, runtime: RuntimePodStatus): ResizeActions {
    return computeResizeActions(allocated, runtime, this.#reader);
  }

  /**
   * Applies `actions` except for containers being killed this round (`killed`: their
   * new instance starts with the allocation). Returns whether anything was attempted.
   */
  async actuate(
    allocated: Pod,
    actions: ResizeActions,
    killed: ReadonlySet<string>,
    signal: AbortSignal,
  ): Promise<boolean> {
    const keep = (u: { name: string }): boolean => !killed.has(u.name);
    const work: ResizeActions = {
      ...actions,
      updates: {
        memory: actions.updates.memory.filter(keep),
        cpu: actions.updates.cpu.filter(keep),
      },
    };
    if (!hasResizeWork(work)) return false;
    const uid = allocated.metadata?.uid ?? '';
    const log = this.#o.logger.child({
      pod: `${allocated.metadata?.namespace ?? ''}/${allocated.metadata?.name ?? ''}`,
      podUID: uid,
    });
    const result = await doPodResize({ ...this.#o, logger: log }, allocated, work, signal);
    for (const u of [...work.updates.memory, ...work.updates.cpu])
      this.#o.invalidate?.(u.containerId);
    if (!result.ok) {
      const generation = allocated.metadata?.generation ?? 0;
      const set = this.#o.conditions.setInProgress(uid, 'Error', result.message, generation);
      if (set.changed)
        this.#o.recorder.event(
          podTarget(allocated),
          'Warning',
          RESIZE_ERROR,
          resizeErrorMessage(allocated, set.generation, result.message),
        );
    }
    return true;
  }

  async containerStarting(allocated: Pod, name: string): Promise<void> {
    await recordContainerStart(this.#o.actuated, allocated, name);
  }

  /**
   * Upstream's check before each status: in progress while a running container's
   * allocation is not actuated; otherwise the condition is cleared (ResizeCompleted).
   * A terminal pod's resize conditions are dropped.
   */
  async statusInputs(
    pod: Pod,
    runtime: RuntimePodStatus,
    terminal: boolean,
    previous: PodStatus | undefined,
  ): Promise<ResizeStatusInputs> {
    const allocated = this.#o.allocation.podFromAllocation(pod).pod;
    const uid = allocated.metadata?.uid ?? '';
    const conditions = this.#o.conditions;
    if (terminal) {
      conditions.clearInProgress(uid);
      conditions.clearPending(uid);
    } else if (isResizeInProgress(allocated, runtime, this.#reader)) {
      conditions.setInProgress(uid, '', '', allocated.metadata?.generation ?? 0);
    } else {
      const generation = conditions.clearInProgress(uid);
      if (generation !== undefined)
        this.#o.recorder.event(
          podTarget(allocated),
          'Normal',
          RESIZE_COMPLETED,
          resizeCompletedMessage(allocated, generation),
        );
    }
    const podResources =
      this.#o.podLevelStatus === true
        ? podResourcesStatus(allocated, previous, await this.#podCgroup(allocated))
        : undefined;
    return {
      allocatedPod: allocated,
      actuated: (name) => this.#o.actuated.get(uid)?.containerResources[name],
      resizeConditions: conditions.get(uid),
      ...(podResources !== undefined && { podResources }),
    };
  }

  /**
   * The pod cgroup's settings for a running pod's status (upstream reads them each time);
   * a cgroup that cannot be read leaves the previous values, logged.
   */
  async #podCgroup(allocated: Pod): Promise<PodCgroupReading | undefined> {
    if (allocated.status?.phase !== 'Running') return undefined;
    try {
      return await this.#o.podCgroups?.readPod(allocated);
    } catch (err) {
      this.#o.logger.error('Failed to read the pod cgroup config', {
        pod: `${allocated.metadata?.namespace ?? ''}/${allocated.metadata?.name ?? ''}`,
        podUID: allocated.metadata?.uid ?? '',
        error: String(err),
      });
      return undefined;
    }
  }

  /** The pod is gone: forget its actuated state and conditions. */
  forget(uid: string): void {
    this.#o.actuated.remove(uid);
    this.#o.conditions.remove(uid);
  }
}
