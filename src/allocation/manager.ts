/**
 * The allocation manager (upstream's allocation.manager): records what each admitted
 * pod was allocated, decides resizes, and keeps the pending ones in a queue that is
 * retried when pods are added or removed, when a resized pod changes, and periodically
 * (30 s after start, then every 3 minutes), as upstream does.
 *
 * A resize is decided by {@link ManagerOptions.admit}: allocated (the checkpoint takes
 * the new resources, PodResizeInProgress is set, ResizeStarted, the pod is synced) or
 * pending (PodResizePending Infeasible or Deferred, ResizeInfeasible / ResizeDeferred).
 * Deferred resizes stay queued; infeasible ones leave the queue until the pod changes.
 */
import type { Pod, ResourceRequirements } from 'kubernetes-types/core/v1.js';
import type { PodAdmitResult } from '../admission/predicates.ts';
import type { EventRecorder } from '../events/types.ts';
import { podTarget } from '../events/targets.ts';
import { qosClassOf } from '../container/qos.ts';
import { podRequests } from '../container/pod-requests.ts';
import type { ResizeConditionStore } from '../status/resize-conditions.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import {
  RESIZE_DEFERRED,
  RESIZE_INFEASIBLE,
  RESIZE_STARTED,
  resizePendingMessage,
  resizeStartedMessage,
} from './events.ts';
import { applyAllocation, resourceInfoForPod } from './resources.ts';
import type { AllocationManager, ResizeDecision, ResourceState } from './types.ts';

export const INITIAL_RETRY_DELAY_MS = 30_000;
export const RETRY_DELAY_MS = 180_000;

export const TRIGGER_POD_UPDATED = 'pod_updated';
export const TRIGGER_PODS_ADDED = 'pods_added';
export const TRIGGER_PODS_REMOVED = 'pods_removed';
export const TRIGGER_POD_TERMINATED = 'pod_terminated';
const TRIGGER_PERIODIC = 'periodic_retry';

export interface ManagerOptions {
  /** allocated_pods_state. */
  readonly state: ResourceState;
  readonly conditions: ResizeConditionStore;
  /** Whether `desired` may have its resources now (see admit.ts). */
  readonly admit: (desired: Pod, allocated: Pod, others: readonly Pod[]) => PodAdmitResult;
  /** Pods admitted and not terminal, as the API (or a static source) has them. */
  readonly activePods: () => readonly Pod[];
  readonly podByUid: (uid: string) => Pod | undefined;
  /** Whether every pod source has reported once (no resize is decided before). */
  readonly sourcesReady: () => boolean;
  /** Asks the pod's worker to sync it soon. */
  readonly triggerSync: (pod: Pod) => void;
  readonly recorder: EventRecorder;
  readonly clock: Clock;
  readonly logger: Logger;
}

export class PodAllocationManager implements AllocationManager {
  readonly #o: ManagerOptions;
  #pending: string[] = [];
  #lock: Promise<void> = Promise.resolve();
  #delay = INITIAL_RETRY_DELAY_MS;
  /** Pods seen in a terminal phase (each triggers one retry). */
  readonly #terminal = new Set<string>();

  constructor(options: ManagerOptions) {
    this.#o = options;
  }

  /** Runs `fn` alone: decisions read and write the allocations of every pod. */
  async #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const previous = this.#lock;
    let release = (): void => undefined;
    this.#lock = new Promise((r) => {
      release = r;
    });
    await previous;
    try {
      return await fn();
    } finally {
      release();
    }
  }

  podFromAllocation(pod: Pod): { pod: Pod; updated: boolean } {
    const info = this.#o.state.get(pod.metadata?.uid ?? '');
    return info === undefined ? { pod, updated: false } : applyAllocation(pod, info);
  }

  containerAllocation(uid: string, container: string): ResourceRequirements | undefined {
    return this.#o.state.get(uid)?.containerResources[container];
  }

  hasAllocation(uid: string): boolean {
    return this.#o.state.get(uid) !== undefined;
  }

  /** Active pods that have an allocation, at their allocated resources. */
  allocatedPods(): Pod[] {
    return this.#o
      .activePods()
      .filter((p) => this.hasAllocation(p.metadata?.uid ?? ''))
      .map((p) => this.podFromAllocation(p).pod);
  }

  async addPod(pod: Pod): Promise<void> {
    const uid = pod.metadata?.uid ?? '';
    // After a restart the API's status carries the resize conditions of before.
    if (this.#o.conditions.get(uid).length === 0) this.#o.conditions.backfill(uid, pod.status);
    const pending = await this.#exclusive(async () => {
      if (this.hasAllocation(uid)) {
        // Restarted berth: the checkpoint is the truth; a differing spec is a pending
        // resize (one patched while berth was down, or allocated but not yet actuated).
        if (!this.podFromAllocation(pod).updated) return false;
        this.#push(uid);
        return true;
      }
      await this.#o.state.set(uid, resourceInfoForPod(pod));
      return false;
    });
    // Before every source reported this only resets the periodic retry to 30 s.
    if (pending) await this.retryPendingResizes(TRIGGER_PODS_ADDED);
  }

  async podUpdated(pod: Pod): Promise<void> {
    const uid = pod.metadata?.uid ?? '';
    const phase = pod.status?.phase;
    if ((phase === 'Succeeded' || phase === 'Failed') && !this.#terminal.has(uid)) {
      // A pod that ended releases its resources (upstream's HandlePodReconcile).
      this.#terminal.add(uid);
      if (this.#pending.length > 0) await this.retryPendingResizes(TRIGGER_POD_TERMINATED);
      return;
    }
    if (!this.hasAllocation(uid)) return;
    if (this.podFromAllocation(pod).updated) {
      this.#push(uid);
      await this.retryPendingResizes(TRIGGER_POD_UPDATED);
    } else {
      // A pending resize was reverted.
      this.#o.conditions.clearPending(uid);
    }
  }

  async removePod(uid: string): Promise<void> {
    this.#o.state.remove(uid);
    this.#o.conditions.remove(uid);
    this.#pending = this.#pending.filter((u) => u !== uid);
    this.#terminal.delete(uid);
    await this.retryPendingResizes(TRIGGER_PODS_REMOVED);
  }

  /** Forgets the allocations of pods not in `keep` (housekeeping). */
  removeOrphans(keep: ReadonlySet<string>): void {
    this.#o.state.removeOrphans(keep);
  }

  hasPendingResizes(): boolean {
    return this.#pending.length > 0;
  }

  #push(uid: string): void {
    if (!this.#pending.includes(uid)) this.#pending.push(uid);
    this.#sort();
  }

  /** Whether any request of the resize grows (those that do not go first: they always fit). */
  #increasing(pod: Pod): boolean {
    const { pod: allocated, updated } = this.podFromAllocation(pod);
    if (!updated) return false;
    const before = podRequests(allocated);
    const after = podRequests(pod);
    return after.cpu > before.cpu || after.memory > before.memory;
  }

  #pendingSince(uid: string): string | undefined {
    return this.#o.conditions.get(uid).find((c) => c.type === 'PodResizePending')
      ?.lastTransitionTime;
  }

  /** Upstream's sortPendingResizes: not increasing, priority, Guaranteed, longest pending. */
  #sort(): void {
    const pods = this.#pending.flatMap((uid) => this.#o.podByUid(uid) ?? []);
    pods.sort((a, b) => {
      if (!this.#increasing(a)) return -1;
      if (!this.#increasing(b)) return 1;
      const pa = a.spec?.priority ?? 0;
      const pb = b.spec?.priority ?? 0;
      if (pa !== pb) return pb - pa;
      const ga = qosClassOf(a) === 'Guaranteed';
      const gb = qosClassOf(b) === 'Guaranteed';
      if (ga !== gb) return ga ? -1 : 1;
      const ta = this.#pendingSince(a.metadata?.uid ?? '');
      const tb = this.#pendingSince(b.metadata?.uid ?? '');
      if (ta === undefined) return 1;
      if (tb === undefined) return -1;
      return Date.parse(ta) < Date.parse(tb) ? -1 : 1;
    });
    this.#pending = pods.map((p) => p.metadata?.uid ?? '');
  }

  async retryPendingResizes(trigger: string): Promise<void> {
    await this.#exclusive(async () => {
      if (!this.#o.sourcesReady()) {
        this.#delay = INITIAL_RETRY_DELAY_MS;
        return;
      }
      this.#delay = RETRY_DELAY_MS;
      const still: string[] = [];
      for (const uid of this.#pending) {
        const pod = this.#o.podByUid(uid);
        if (pod === undefined) continue;
        const before = this.#conditionsKey(uid);
        let decision: ResizeDecision;
        try {
          decision = await this.#handleResize(pod);
        } catch (err) {
          this.#o.logger.error('Failed to handle pod resources resize', {
            pod: podName(pod),
            podUID: uid,
            error: String(err),
          });
          still.push(uid);
          continue;
        }
        if (decision.kind === 'pending' && decision.reason === 'Deferred') still.push(uid);
        if (decision.kind === 'allocated')
          this.#o.logger.info('Pod resize allocated', { pod: podName(pod), podUID: uid, trigger });
        const after = this.#conditionsKey(uid);
        if (decision.kind === 'allocated' || before !== after) this.#o.triggerSync(pod);
      }
      this.#pending = still;
    });
  }

  /** The pod's resize conditions without their probe times (which move on every decision). */
  #conditionsKey(uid: string): string {
    return JSON.stringify(this.#o.conditions.get(uid).map((c) => ({ ...c, lastProbeTime: '' })));
  }

  /** Upstream's handlePodResourcesResize. */
  async #handleResize(pod: Pod): Promise<ResizeDecision> {
    const uid = pod.metadata?.uid ?? '';
    const { pod: allocated, updated } = this.podFromAllocation(pod);
    const generation = pod.metadata?.generation ?? 0;
    if (!updated) {
      this.#o.conditions.clearPending(uid);
      return { kind: 'none' };
    }
    const others = this.allocatedPods().filter((p) => p.metadata?.uid !== uid);
    const result = this.#o.admit(pod, allocated, others);
    if (result.admit) {
      await this.#o.state.set(uid, resourceInfoForPod(pod));
      this.#o.conditions.clearPending(uid);
      this.#o.conditions.clearInProgress(uid);
      this.#o.conditions.setInProgress(uid, '', '', generation);
      this.#o.recorder.event(
        podTarget(pod),
        'Normal',
        RESIZE_STARTED,
        resizeStartedMessage(pod, generation),
      );
      return { kind: 'allocated' };
    }
    this.#o.logger.info('Pod admission denied', {
      pod: podName(pod),
      podUID: uid,
      reason: result.reason,
      message: result.message,
      operation: 'resize',
    });
    const reason = result.reason === 'Infeasible' ? 'Infeasible' : 'Deferred';
    if (this.#o.conditions.setPending(uid, result.reason, result.message, generation)) {
      this.#o.recorder.event(
        podTarget(pod),
        'Warning',
        reason === 'Infeasible' ? RESIZE_INFEASIBLE : RESIZE_DEFERRED,
        resizePendingMessage(pod, result.reason, result.message, generation),
      );
    }
    return { kind: 'pending', reason, message: result.message };
  }

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await this.#o.clock.sleep(this.#delay, signal);
      } catch {
        return;
      }
      await this.retryPendingResizes(TRIGGER_PERIODIC);
    }
  }
}

function podName(pod: Pod): string {
  return `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
}
