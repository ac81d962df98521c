/**
 * What the pod sync, the pod consumer, eviction and node shutdown use of the status
 * manager (upstream's status.Manager). StatusManager (manager.ts) patches the API;
 * FakeStatusManager (fake.ts) keeps the "API" in memory; both pass contract.ts.
 */
import type { Pod, PodStatus } from 'kubernetes-types/core/v1.js';

/** Rewrites a terminal status (the reason, message and DisruptionTarget of a kill). */
export type TerminalStatusAmendment = (status: PodStatus) => PodStatus;

export interface PodStatusManager {
  /** The status last set for `uid` (what berth believes), if any. */
  get(uid: string): PodStatus | undefined;
  /** Records the status of `pod` and writes it soon if the API lacks it. */
  set(pod: Pod, status: PodStatus): void;
  /** Writes the pod's status now if the API lacks it. */
  resend(uid: string): void;
  /** Every terminal status set for `uid` from now on passes through `amend`. */
  amendTerminal(uid: string, amend: TerminalStatusAmendment): void;
  /** Forgets a pod whose object is gone. */
  remove(uid: string): void;
  /** Rewrites what the API may lack, periodically, until `signal` aborts. */
  run(signal: AbortSignal): Promise<void>;
  /** Waits for writes in flight. */
  drain(): Promise<void>;
}
