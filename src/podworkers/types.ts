/**
 * Pod workers: one serialized worker per pod UID, moving the pod through
 *
 *   syncing -> terminating -> terminated -> (forgotten)
 *
 * - syncing: `syncPod` converges the node to the pod spec; re-run on every update, on
 *   runtime events, when `syncPod` asks to be requeued, and every syncFrequency.
 * - terminating: entered when the pod has a deletionTimestamp, left the pod source, or
 *   reached a terminal phase; `syncTerminatingPod` stops every container and the
 *   sandbox within the grace period. A sync in progress is aborted first.
 * - terminated: `syncTerminatedPod` posts the final status and cleans up; the worker is
 *   forgotten once the pod has left the source.
 *
 * A pod with the UID of a worker that is still terminating is not started until that
 * worker has finished (the pod's containers must be gone first).
 */
import type { Pod } from 'kubernetes-types/core/v1.js';

export type PodWorkerState = 'syncing' | 'terminating' | 'terminated';

export interface SyncResult {
  /** The pod reached Succeeded/Failed: terminate it (restartPolicy Never/OnFailure). */
  readonly terminal?: boolean;
  /** Sync again after this long (e.g. when a back-off expires). */
  readonly requeueAfterMs?: number;
}

/** The work a pod worker does; implemented by the kubelet's sync logic. */
export interface PodSyncer {
  syncPod(pod: Pod, signal: AbortSignal): Promise<SyncResult>;
  /** Stops everything of the pod, honouring `gracePeriodSeconds`. */
  syncTerminatingPod(pod: Pod, gracePeriodSeconds: number, signal: AbortSignal): Promise<void>;
  /** Final status and clean-up once nothing of the pod runs. */
  syncTerminatedPod(pod: Pod, signal: AbortSignal): Promise<void>;
}

export type PodUpdateKind = 'add' | 'update' | 'remove' | 'sync' | 'runtime-event';
