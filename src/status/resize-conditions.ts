/**
 * The pod resize conditions the kubelet reports (upstream's status manager keeps them
 * beside the statuses): PodResizePending (reason Infeasible or Deferred: the resize is
 * not allocated) and PodResizeInProgress (allocated, not yet actuated; reason Error
 * with the runtime's message while actuating fails). Each carries the pod generation it
 * describes. The status generator adds them to every status it computes.
 */
import type { PodCondition, PodStatus } from 'kubernetes-types/core/v1.js';
import type { Clock } from '../util/clock.ts';
import { apiTime } from './container-status.ts';

export const POD_RESIZE_PENDING = 'PodResizePending';
export const POD_RESIZE_IN_PROGRESS = 'PodResizeInProgress';
export const RESIZE_CONDITIONS: readonly string[] = [POD_RESIZE_PENDING, POD_RESIZE_IN_PROGRESS];

/** A condition with the v1.35 observedGeneration field kubernetes-types lacks. */
export type ResizeCondition = PodCondition & { observedGeneration?: number };

interface Entry {
  pending?: ResizeCondition;
  inProgress?: ResizeCondition;
}

/** What the allocation manager and the pod sync read and write. */
export interface ResizeConditionStore {
  /** The pod's resize conditions, PodResizePending first. */
  get(uid: string): ResizeCondition[];
  /** Sets PodResizePending; any reason but Infeasible becomes Deferred. True when it changed. */
  setPending(uid: string, reason: string, message: string, generation: number): boolean;
  clearPending(uid: string): void;
  /**
   * Sets PodResizeInProgress. An existing condition keeps its generation (clear it to
   * move on) and its reason and message when none are given. Returns the condition's
   * generation and whether anything but the probe time changed.
   */
  setInProgress(
    uid: string,
    reason: string,
    message: string,
    generation: number,
  ): { generation: number; changed: boolean };
  /** Clears PodResizeInProgress; returns the generation it had, if it was set. */
  clearInProgress(uid: string): number | undefined;
  isDeferred(uid: string): boolean;
  isInfeasible(uid: string): boolean;
  /** Takes over the conditions a status from before a restart carries. */
  backfill(uid: string, status: PodStatus | undefined): void;
  remove(uid: string): void;
}

export class ResizeConditions implements ResizeConditionStore {
  readonly #clock: Clock;
  readonly #entries = new Map<string, Entry>();

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  get(uid: string): ResizeCondition[] {
    const e = this.#entries.get(uid);
    return [e?.pending, e?.inProgress].filter((c) => c !== undefined);
  }

  #condition(
    type: string,
    old: ResizeCondition | undefined,
    reason: string,
    message: string,
    generation: number,
  ): ResizeCondition {
    const now = apiTime(this.#clock.now());
    return {
      type,
      status: 'True',
      lastProbeTime: now,
      lastTransitionTime:
        old === undefined || old.reason !== reason ? now : (old.lastTransitionTime ?? now),
      observedGeneration: generation,
      ...(reason !== '' && { reason }),
      ...(message !== '' && { message }),
    };
  }

  setPending(uid: string, reason: string, message: string, generation: number): boolean {
    const e = this.#entries.get(uid) ?? {};
    const old = e.pending;
    const r = reason === 'Infeasible' ? 'Infeasible' : 'Deferred';
    this.#entries.set(uid, {
      ...e,
      pending: this.#condition(POD_RESIZE_PENDING, old, r, message, generation),
    });
    return old === undefined || old.reason !== r || old.observedGeneration !== generation;
  }

  clearPending(uid: string): void {
    const e = this.#entries.get(uid);
    if (e?.pending === undefined) return;
    this.#entries.set(uid, { ...(e.inProgress !== undefined && { inProgress: e.inProgress }) });
  }

  setInProgress(
    uid: string,
    reason: string,
    message: string,
    generation: number,
  ): { generation: number; changed: boolean } {
    const e = this.#entries.get(uid) ?? {};
    const old = e.inProgress;
    let r = reason;
    let m = message;
    let g = generation;
    if (old !== undefined) {
      if (r === '' && m === '') {
        r = old.reason ?? '';
        m = old.message ?? '';
      }
      g = old.observedGeneration ?? generation;
    }
    const next = this.#condition(POD_RESIZE_IN_PROGRESS, old, r, m, g);
    this.#entries.set(uid, { ...e, inProgress: next });
    const changed =
      old === undefined ||
      old.reason !== next.reason ||
      old.message !== next.message ||
      old.observedGeneration !== next.observedGeneration;
    return { generation: g, changed };
  }

  clearInProgress(uid: string): number | undefined {
    const e = this.#entries.get(uid);
    if (e?.inProgress === undefined) return undefined;
    this.#entries.set(uid, { ...(e.pending !== undefined && { pending: e.pending }) });
    return e.inProgress.observedGeneration ?? 0;
  }

  isDeferred(uid: string): boolean {
    return this.#entries.get(uid)?.pending?.reason === 'Deferred';
  }

  isInfeasible(uid: string): boolean {
    return this.#entries.get(uid)?.pending?.reason === 'Infeasible';
  }

  backfill(uid: string, status: PodStatus | undefined): void {
    for (const c of (status?.conditions ?? []) as ResizeCondition[]) {
      const generation = c.observedGeneration ?? 0;
      const e = this.#entries.get(uid) ?? {};
      if (c.type === POD_RESIZE_PENDING)
        this.#entries.set(uid, {
          ...e,
          pending: this.#condition(c.type, undefined, c.reason ?? '', c.message ?? '', generation),
        });
      else if (c.type === POD_RESIZE_IN_PROGRESS)
        this.#entries.set(uid, {
          ...e,
          inProgress: this.#condition(
            c.type,
            undefined,
            c.reason ?? '',
            c.message ?? '',
            generation,
          ),
        });
    }
  }

  remove(uid: string): void {
    this.#entries.delete(uid);
  }
}
