/**
 * Pod admission as the pod consumer uses it (upstream's lifecycle.PodAdmitHandler chain
 * run from HandlePodAdditions): a new pod is admitted once, or rejected with a Warning
 * event and phase Failed, and the decision holds until the pod object goes away.
 * AdmissionManager (manager.ts) asks the other handlers and then the node predicates;
 * FakePodAdmission (fake.ts) asks only the handlers it is given; both pass contract.ts.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';

/** A handler's answer: admit, or refuse with upstream's reason and message. */
export type PodAdmitResult =
  | { readonly admit: true }
  | { readonly admit: false; readonly reason: string; readonly message: string };

/** One more reason to refuse a pod (upstream's lifecycle.PodAdmitHandler). */
export interface PodAdmitHandler {
  admit(pod: Pod): PodAdmitResult;
}

export interface PodAdmission {
  /**
   * True when the pod may run (or already runs); false when it is (or was) rejected. The
   * first answer for a UID is final: a rejection writes the Failed status and the event.
   */
  admit(pod: Pod): boolean;
  /** Whether the pod with `uid` was rejected. */
  isRejected(uid: string): boolean;
  /** The pod object is gone: its decision is forgotten. */
  forget(uid: string): void;
}
