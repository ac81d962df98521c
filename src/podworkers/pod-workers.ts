/**
 * Implementation of the pod worker state machine described in types.ts. Each worker
 * runs at most one operation at a time and always works on the newest pod it was given.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { KubeletMetrics } from '../metrics/registry.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import type { PodSyncer, PodUpdateKind, PodWorkerState } from './types.ts';

export interface PodWorkersOptions {
  readonly syncer: PodSyncer;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Back-off after a failed sync (upstream: 10 s). */
  readonly errorBackoffMs?: number;
  /** Upstream minimum honoured grace period. */
  readonly minGracePeriodSeconds?: number;
  /** Records kubelet_pod_worker_duration_seconds{operation_type}. */
  readonly metrics?: KubeletMetrics;
}

/** operation_type of kubelet_pod_worker_duration_seconds: upstream's sync types plus the termination steps. */
export type PodWorkerOperation = 'create' | 'update' | 'sync' | 'terminating' | 'terminated';

interface Worker {
  readonly uid: string;
  pod: Pod;
  state: PodWorkerState;
  /** Pod left the source (deleted from the API). */
  removed: boolean;
  /** Another update arrived while an operation ran. */
  dirty: boolean;
  running: boolean;
  /** Aborts the operation in progress (a sync when termination is requested). */
  current: AbortController | undefined;
  timer: AbortController | undefined;
  gracePeriodSeconds: number | undefined;
  /** A syncPod has completed once (the next is not a "create"). */
  synced: boolean;
  /** The spec changed since the last sync (an "update" rather than a resync). */
  updated: boolean;
  /**
   * The terminated step finished for a pod being deleted (its containers, volumes and
   * API object are gone or going): later updates of it, such as a finalizer keeping the
   * object a while, have nothing left to do — upstream's "finished" pod worker. Only its
   * removal from the source is still handled.
   */
  cleanedUp: boolean;
  /** Settles when the worker is forgotten; for waiters on a UID. */
  done: Promise<void>;
  finish: () => void;
}

function fullName(pod: Pod): string {
  return `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
}

export class PodWorkers {
  readonly #o: PodWorkersOptions;
  readonly #workers = new Map<string, Worker>();
  readonly #stopping = new AbortController();
  readonly #inflight = new Set<Promise<void>>();

  constructor(options: PodWorkersOptions) {
    this.#o = options;
  }

  state(uid: string): PodWorkerState | undefined {
    return this.#workers.get(uid)?.state;
  }

  /** UIDs of every pod with a worker (what the node is responsible for now). */
  known(): string[] {
    return [...this.#workers.keys()];
  }

  /** Hands a pod (or its removal) to its worker. */
  update(pod: Pod, kind: PodUpdateKind): void {
    const uid = pod.metadata?.uid;
    if (uid === undefined || uid === '') return;
    let w = this.#workers.get(uid);
    if (w === undefined) {
      if (kind === 'remove' || kind === 'runtime-event') {
        // Nothing of ours to stop, unless the caller handles orphans (the kubelet does).
        if (kind === 'remove') return;
      }
      let finish = (): void => undefined;
      const done = new Promise<void>((r) => {
        finish = r;
      });
      w = {
        uid,
        pod,
        state: 'syncing',
        removed: false,
        dirty: true,
        running: false,
        current: undefined,
        timer: undefined,
        gracePeriodSeconds: undefined,
        synced: false,
        updated: false,
        cleanedUp: false,
        done,
        finish,
      };
      this.#workers.set(uid, w);
    } else if (kind !== 'runtime-event' && kind !== 'sync') {
      w.pod = pod;
    }
    if (kind === 'remove') w.removed = true;
    else if (w.cleanedUp) return;
    if (kind === 'update') w.updated = true;
    if (w.state === 'syncing' && (w.removed || pod.metadata?.deletionTimestamp != null))
      this.#beginTermination(w);
    w.dirty = true;
    this.#kick(w);
  }

  /** Asks for termination with an explicit grace period (eviction, kill from the API). */
  terminate(uid: string, gracePeriodSeconds?: number): void {
    const w = this.#workers.get(uid);
    if (w === undefined) return;
    if (gracePeriodSeconds !== undefined) {
      w.gracePeriodSeconds = Math.min(
        w.gracePeriodSeconds ?? gracePeriodSeconds,
        gracePeriodSeconds,
      );
    }
    if (w.state === 'syncing') this.#beginTermination(w);
    w.dirty = true;
    this.#kick(w);
  }

  /** Requeues every syncing pod (the periodic syncFrequency resync). */
  resyncAll(): void {
    for (const w of this.#workers.values()) {
      if (w.cleanedUp) continue;
      w.dirty = true;
      this.#kick(w);
    }
  }

  /** Resolves when the worker for `uid` is gone (immediately when there is none). */
  async waitForgotten(uid: string): Promise<void> {
    await this.#workers.get(uid)?.done;
  }

  /** Stops taking work and waits for running operations (pods keep running). */
  async close(): Promise<void> {
    this.#stopping.abort();
    for (const w of this.#workers.values()) {
      w.timer?.abort();
      w.current?.abort();
    }
    await Promise.allSettled([...this.#inflight]);
  }

  #beginTermination(w: Worker): void {
    w.state = 'terminating';
    w.current?.abort();
    w.timer?.abort();
  }

  #gracePeriod(w: Worker): number {
    const min = this.#o.minGracePeriodSeconds ?? 2;
    const fromPod =
      w.pod.metadata?.deletionGracePeriodSeconds ?? w.pod.spec?.terminationGracePeriodSeconds ?? 30;
    const chosen = w.gracePeriodSeconds ?? fromPod;
    // Upstream honours at least 2 s unless the deletion asked for exactly 0 (force).
    return chosen === 0 && w.pod.metadata?.deletionGracePeriodSeconds === 0
      ? 0
      : Math.max(min, chosen);
  }

  #kick(w: Worker): void {
    if (w.running || this.#stopping.signal.aborted) return;
    w.running = true;
    const p = this.#loop(w).finally(() => {
      this.#inflight.delete(p);
    });
    this.#inflight.add(p);
  }

  #schedule(w: Worker, ms: number): void {
    w.timer?.abort();
    const timer = new AbortController();
    w.timer = timer;
    this.#o.clock.sleep(ms, timer.signal).then(
      () => {
        if (w.timer !== timer) return;
        w.timer = undefined;
        w.dirty = true;
        this.#kick(w);
      },
      () => undefined,
    );
  }

  async #loop(w: Worker): Promise<void> {
    const log = this.#o.logger.child({ pod: fullName(w.pod), podUID: w.uid });
    try {
      while (w.dirty && !this.#stopping.signal.aborted) {
        w.dirty = false;
        const controller = new AbortController();
        w.current = controller;
        const signal = AbortSignal.any([controller.signal, this.#stopping.signal]);
        const updateType = w.state;
        log.debug('Processing pod event', { updateType });
        try {
          await this.#step(w, signal, log);
          log.debug('Processing pod event done', { updateType });
        } catch (err) {
          if (signal.aborted) continue; // superseded (termination began) or shutting down
          log.warn('Error syncing pod, will retry', {
            state: w.state,
            error: err instanceof Error ? err.message : String(err),
          });
          this.#schedule(w, this.#o.errorBackoffMs ?? 10_000);
        } finally {
          w.current = undefined;
        }
      }
    } finally {
      w.running = false;
    }
    if (w.dirty && !this.#stopping.signal.aborted) this.#kick(w);
  }

  async #step(w: Worker, signal: AbortSignal, log: ReturnType<Logger['child']>): Promise<void> {
    const m = this.#o.metrics;
    if (m === undefined) {
      await this.#run(w, signal, log);
      return;
    }
    const operation: PodWorkerOperation =
      w.state !== 'syncing' ? w.state : !w.synced ? 'create' : w.updated ? 'update' : 'sync';
    const started = this.#o.clock.monotonic();
    try {
      await this.#run(w, signal, log);
    } finally {
      m.podWorkerDuration.observe(
        { operation_type: operation },
        (this.#o.clock.monotonic() - started) / 1000,
      );
    }
  }

  async #run(w: Worker, signal: AbortSignal, log: ReturnType<Logger['child']>): Promise<void> {
    const syncer = this.#o.syncer;
    switch (w.state) {
      case 'syncing': {
        w.updated = false;
        const result = await syncer.syncPod(w.pod, signal);
        w.synced = true;
        if (result.terminal === true) {
          log.info('Pod reached a terminal phase, terminating it');
          w.state = 'terminating';
          w.dirty = true;
        } else if (result.requeueAfterMs !== undefined) {
          this.#schedule(w, result.requeueAfterMs);
        }
        return;
      }
      case 'terminating': {
        await syncer.syncTerminatingPod(w.pod, this.#gracePeriod(w), signal);
        w.state = 'terminated';
        w.dirty = true;
        return;
      }
      case 'terminated': {
        await syncer.syncTerminatedPod(w.pod, signal);
        if (w.pod.metadata?.deletionTimestamp != null) w.cleanedUp = true;
        if (w.removed) {
          this.#workers.delete(w.uid);
          w.timer?.abort();
          w.finish();
        }
        return;
      }
    }
  }
}
