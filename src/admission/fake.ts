/**
 * A PodAdmission for other managers' tests: no node predicates; a pod is refused only by
 * the handlers the test gives it (asked in order, the first refusal wins). Everything
 * callers see is the real manager's: one decision per UID until `forget`, a pod that
 * already ended admitted without asking, and a rejection's event and Failed status
 * (rejection.ts). Both pass contract.ts.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import { isTerminalPhase, rejectPod, type RejectionDeps } from './rejection.ts';
import type { PodAdmission, PodAdmitHandler } from './types.ts';

export interface FakePodAdmissionOptions extends RejectionDeps {
  readonly handlers?: readonly PodAdmitHandler[];
}

export class FakePodAdmission implements PodAdmission {
  readonly #o: FakePodAdmissionOptions;
  readonly #decided = new Map<string, boolean>();

  constructor(options: FakePodAdmissionOptions) {
    this.#o = options;
  }

  admit(pod: Pod): boolean {
    const uid = pod.metadata?.uid ?? '';
    const known = this.#decided.get(uid);
    if (known !== undefined) return known;
    if (isTerminalPhase(pod.status?.phase)) {
      this.#decided.set(uid, true);
      return true;
    }
    for (const h of this.#o.handlers ?? []) {
      const r = h.admit(pod);
      if (r.admit) continue;
      this.#decided.set(uid, false);
      rejectPod(this.#o, pod, r.reason, r.message);
      return false;
    }
    this.#decided.set(uid, true);
    return true;
  }

  isRejected(uid: string): boolean {
    return this.#decided.get(uid) === false;
  }

  forget(uid: string): void {
    this.#decided.delete(uid);
  }
}
