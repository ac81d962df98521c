/**
 * Decides, once per pod, whether a new pod may start on this node (predicates.ts) and
 * rejects it the way upstream's kubelet does: a Warning event with the reason, and
 * phase Failed with "Pod was rejected: <message>". A rejected pod is never handed to the
 * pod workers; it stays rejected until its object goes away.
 */
import type { Node, Pod, PodStatus } from 'kubernetes-types/core/v1.js';
import type { EventRecorder } from '../events/types.ts';
import type { Logger } from '../util/logger.ts';
import { admitPod } from './predicates.ts';
import { isTerminalPhase, rejectPod } from './rejection.ts';
import type { PodAdmission, PodAdmitHandler, PodAdmitResult } from './types.ts';

export interface AdmissionOptions {
  /** The node object as last registered/updated; undefined before registration. */
  readonly node: () => Node | undefined;
  /** Every pod bound to the node (the pod source's view). */
  readonly pods: () => ReadonlyMap<string, Pod>;
  /** The phase berth last computed for a pod, if any. */
  readonly phase: (uid: string) => string | undefined;
  readonly setStatus: (pod: Pod, status: PodStatus) => void;
  readonly recorder: EventRecorder;
  readonly logger: Logger;
  readonly allowedUnsafeSysctls?: readonly string[];
  /** Whether the host enforces AppArmor; absent: it does not. */
  readonly appArmorEnabled?: () => boolean;
  /**
   * Upstream's other PodAdmitHandlers (the eviction manager's, ...), asked in order
   * before the predicates, as upstream registers the eviction handler first.
   */
  readonly handlers?: readonly PodAdmitHandler[];
}

export class AdmissionManager implements PodAdmission {
  readonly #o: AdmissionOptions;
  readonly #admitted = new Set<string>();
  readonly #rejected = new Set<string>();

  constructor(options: AdmissionOptions) {
    this.#o = options;
  }

  /** True when the pod may run (or already runs); false when it is (or was) rejected. */
  admit(pod: Pod): boolean {
    const uid = pod.metadata?.uid ?? '';
    if (this.#rejected.has(uid)) return false;
    if (this.#admitted.has(uid)) return true;
    // A pod that already ended (before a restart of berth) is not admitted again: the pod
    // workers only report it.
    if (isTerminalPhase(pod.status?.phase)) {
      this.#admitted.add(uid);
      return true;
    }
    const node = this.#o.node();
    const refused = this.#o.handlers
      ?.map((h) => h.admit(pod))
      .find((r): r is Extract<PodAdmitResult, { admit: false }> => !r.admit);
    const result: PodAdmitResult =
      refused !== undefined
        ? refused
        : node === undefined
          ? { admit: false, reason: 'InvalidNodeInfo', message: 'Kubelet cannot get node info.' }
          : admitPod({
              pod,
              node,
              active: this.#active(uid),
              allowedUnsafeSysctls: this.#o.allowedUnsafeSysctls ?? [],
              appArmorEnabled: this.#o.appArmorEnabled?.() ?? false,
            });
    if (result.admit) {
      this.#admitted.add(uid);
      return true;
    }
    this.#rejected.add(uid);
    rejectPod(this.#o, pod, result.reason, result.message);
    return false;
  }

  isRejected(uid: string): boolean {
    return this.#rejected.has(uid);
  }

  /** The pod object is gone. */
  forget(uid: string): void {
    this.#admitted.delete(uid);
    this.#rejected.delete(uid);
  }

  #active(except: string): Pod[] {
    const out: Pod[] = [];
    for (const [uid, pod] of this.#o.pods()) {
      if (uid === except || !this.#admitted.has(uid)) continue;
      if (isTerminalPhase(this.#o.phase(uid) ?? pod.status?.phase)) continue;
      out.push(pod);
    }
    return out;
  }
}
