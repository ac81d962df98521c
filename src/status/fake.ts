/**
 * A PodStatusManager for other managers' tests: the "API" is a map in memory, written
 * at once when the status differs from what it holds (StatusManager writes soon after,
 * through the API client); terminal amendments and removal behave as the real one's
 * (the contract, contract.ts). Every write is recorded.
 */
import type { Pod, PodStatus } from 'kubernetes-types/core/v1.js';
import type { PodStatusManager, TerminalStatusAmendment } from './types.ts';

export class FakeStatusManager implements PodStatusManager {
  /** The status each pod's API object holds, by UID. */
  readonly api = new Map<string, PodStatus>();
  /** Every write to the "API", in order. */
  readonly writes: { readonly uid: string; readonly status: PodStatus }[] = [];
  readonly #statuses = new Map<string, PodStatus>();
  readonly #amendments = new Map<string, TerminalStatusAmendment>();

  get(uid: string): PodStatus | undefined {
    return this.#statuses.get(uid);
  }

  set(pod: Pod, given: PodStatus): void {
    const uid = pod.metadata?.uid ?? '';
    const amend = this.#amendments.get(uid);
    const terminal = given.phase === 'Succeeded' || given.phase === 'Failed';
    this.#statuses.set(uid, amend !== undefined && terminal ? amend(given) : given);
    this.resend(uid);
  }

  resend(uid: string): void {
    const status = this.#statuses.get(uid);
    if (status === undefined) return;
    if (JSON.stringify(this.api.get(uid)) === JSON.stringify(status)) return;
    this.api.set(uid, status);
    this.writes.push({ uid, status });
  }

  amendTerminal(uid: string, amend: TerminalStatusAmendment): void {
    this.#amendments.set(uid, amend);
  }

  remove(uid: string): void {
    this.#statuses.delete(uid);
    this.#amendments.delete(uid);
  }

  run(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      signal.addEventListener(
        'abort',
        () => {
          resolve();
        },
        { once: true },
      );
    });
  }

  drain(): Promise<void> {
    return Promise.resolve();
  }
}
