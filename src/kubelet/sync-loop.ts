/**
 * The sync loop (upstream's Kubelet.syncLoop and syncLoopIteration): every input that
 * makes the kubelet act on its pods arrives here and goes to one handler.
 *
 * | input          | from                                     | handler                                      |
 * | -------------- | ---------------------------------------- | -------------------------------------------- |
 * | `config` ADD    | the pod sources, merged (podsource/)     | handlePodAdditions: admit, probe, start      |
 * | `config` UPDATE | "                                        | handlePodUpdates: re-admit, hand to worker   |
 * | `config` REMOVE | "                                        | handlePodRemoves: stop probing, terminate    |
 * | `pleg`          | the PLEG's events (pleg/)                | handlePodSyncs of the pods the events name   |
 * | `probe`         | a liveness/readiness/startup result      | handlePodSyncs of that pod                   |
 * | `sync`          | the sync tick, every syncFrequency       | every pod worker resynced                    |
 * | `housekeeping`  | the housekeeping tick                    | handlePodCleanups (kubelet/housekeeping.ts)  |
 *
 * Upstream selects over channels in one goroutine. Node's event loop already runs one
 * callback at a time, so each source calls `syncLoopIteration` directly (the
 * `configChannel` adapter for the pod sources) and `run` drives the two tickers on the
 * injected clock. berth's sources deliver add / update / remove only: a graceful
 * deletion and a status-only change both arrive as UPDATE (upstream splits them off as
 * DELETE, which it handles as an update too, and RECONCILE).
 *
 * Every iteration stamps the time it ran: /healthz's syncloop check (`health`) fails
 * when the loop has not run for twice the sync period (at least 30 s), as upstream's.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import { isStaticPod } from '../admission/predicates.ts';
import type { PodAllocationManager } from '../allocation/manager.ts';
import type { KubeClient } from '../kube/types.ts';
import type { PodLifecycleEvent } from '../pleg/types.ts';
import type { PodSourceConsumer } from '../podsource/types.ts';
import type { PodAdmission } from '../admission/types.ts';
import type { PodWorkers } from '../podworkers/pod-workers.ts';
import type { ProbeManager } from '../prober/types.ts';
import type { ProbeKind } from '../prober/types.ts';
import type { PodStatusManager } from '../status/types.ts';
import type { Clock } from '../util/clock.ts';
import { isAborted } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import { deleteRejectedPod } from './kubelet-util.ts';

/** What a pod source reports (upstream's kubetypes.PodOperation, as berth's sources send it). */
export type PodOperation = 'ADD' | 'UPDATE' | 'REMOVE';

/** One input of the loop: one receive of upstream's select. */
export type SyncLoopInput =
  | { readonly kind: 'config'; readonly op: PodOperation; readonly pods: readonly Pod[] }
  | { readonly kind: 'pleg'; readonly events: readonly PodLifecycleEvent[] }
  | { readonly kind: 'probe'; readonly probe: ProbeKind; readonly podUID: string }
  | { readonly kind: 'sync' }
  | { readonly kind: 'housekeeping' };

export interface SyncLoopDeps {
  readonly clock: Clock;
  readonly logger: Logger;
  /** Deletes an API pod rejected on an update (it has a deletion timestamp). */
  readonly kube: KubeClient;
  /** The kubelet's own signal: work the handlers start outlives no kubelet. */
  readonly signal: AbortSignal;
  /** The pod manager: every pod the node must run, by UID. */
  readonly pods: () => ReadonlyMap<string, Pod>;
  readonly admission: PodAdmission;
  readonly podWorkers: Pick<PodWorkers, 'update' | 'resyncAll'>;
  readonly prober: Pick<ProbeManager, 'addPod' | 'removePod'>;
  /** The configMap/secret watch of the pods' volumes and env. */
  readonly objects: { register(pod: Pod): void; unregister(uid: string): void };
  readonly status: Pick<PodStatusManager, 'remove'>;
  /** Records allocations and decides resizes (in-place pod resize). */
  readonly allocation?: PodAllocationManager;
  /** upstream's HandlePodCleanups: orphans killed, directories and caches pruned. */
  readonly housekeeping: { handlePodCleanups(signal: AbortSignal): Promise<void> };
  /** syncFrequency: every pod is resynced this often. */
  readonly syncFrequencyMs: number;
  /** podHousekeepingPeriod (default 2 s). */
  readonly housekeepingPeriodMs?: number;
}

const DEFAULT_HOUSEKEEPING_MS = 2000;
/** Upstream's syncLoopHealthCheck floor. */
const MIN_HEALTHY_WINDOW_MS = 30_000;

export class SyncLoop {
  readonly #d: SyncLoopDeps;
  /** When an iteration last ran (upstream's syncLoopMonitor); 0 before the first. */
  #lastIteration = 0;

  constructor(deps: SyncLoopDeps) {
    this.#d = deps;
  }

  /**
   * Runs the sync and housekeeping tickers until `signal` aborts. The other inputs
   * arrive through `syncLoopIteration` whenever their source has one.
   */
  async run(signal: AbortSignal): Promise<void> {
    const housekeepingMs = this.#d.housekeepingPeriodMs ?? DEFAULT_HOUSEKEEPING_MS;
    await Promise.all([
      this.#ticker(this.#d.syncFrequencyMs, { kind: 'sync' }, signal),
      this.#ticker(housekeepingMs, { kind: 'housekeeping' }, signal),
    ]);
  }

  /** Handles one input; resolves once its handler is done (housekeeping is asynchronous). */
  async syncLoopIteration(input: SyncLoopInput, signal: AbortSignal): Promise<void> {
    this.#lastIteration = this.#d.clock.monotonic();
    switch (input.kind) {
      case 'config':
        switch (input.op) {
          case 'ADD':
            this.handlePodAdditions(input.pods);
            break;
          case 'UPDATE':
            this.handlePodUpdates(input.pods);
            break;
          case 'REMOVE':
            this.handlePodRemoves(input.pods);
            break;
        }
        break;
      case 'pleg':
        this.#plegEvents(input.events);
        break;
      case 'probe': {
        // Liveness and startup results feed the plan (a kill), readiness the status.
        const pod = this.#d.pods().get(input.podUID);
        if (pod !== undefined) this.handlePodSyncs([pod]);
        break;
      }
      case 'sync':
        this.#d.podWorkers.resyncAll();
        break;
      case 'housekeeping':
        await this.#d.housekeeping.handlePodCleanups(signal);
        break;
    }
    this.#lastIteration = this.#d.clock.monotonic();
  }

  /**
   * One iteration for an input that arrives by callback (pod sources, PLEG, prober): a
   * handler that throws is logged, and the source that called goes on.
   */
  dispatch(input: Exclude<SyncLoopInput, { kind: 'sync' | 'housekeeping' }>): void {
    this.syncLoopIteration(input, this.#d.signal).catch((err: unknown) => {
      this.#d.logger.error('Sync loop iteration failed', {
        input: input.kind,
        error: String(err),
      });
    });
  }

  /** New pods: admitted (or rejected with their reason), probed, handed to a worker. */
  handlePodAdditions(pods: readonly Pod[]): void {
    const { admission, objects, prober, podWorkers } = this.#d;
    for (const pod of pods) {
      if (!admission.admit(pod)) continue;
      this.#allocation('add', (m) => m.addPod(pod));
      objects.register(pod);
      prober.addPod(pod);
      podWorkers.update(pod, 'add');
    }
  }

  /**
   * Changed pods go to their worker. A pod rejected on an update is deleted from the
   * API, unless it is a static pod, which has no API object of its own.
   */
  handlePodUpdates(pods: readonly Pod[]): void {
    const { admission, objects, podWorkers } = this.#d;
    for (const pod of pods) {
      if (!admission.admit(pod)) {
        if (!isStaticPod(pod)) deleteRejectedPod(this.#d.kube, pod, this.#d.signal, this.#d.logger);
        continue;
      }
      objects.register(pod);
      podWorkers.update(pod, 'update');
      this.#allocation('update', (m) => m.podUpdated(pod));
    }
  }

  /** Pods gone from their source: no more probes, their workers terminate them. */
  handlePodRemoves(pods: readonly Pod[]): void {
    const { admission, objects, prober, podWorkers, status } = this.#d;
    for (const pod of pods) {
      const uid = pod.metadata?.uid ?? '';
      prober.removePod(uid);
      // A rejected pod never had a worker: only its status is left to forget.
      if (admission.isRejected(uid)) status.remove(uid);
      else podWorkers.update(pod, 'remove');
      objects.unregister(uid);
      admission.forget(uid);
      this.#allocation('remove', (m) => m.removePod(uid));
    }
  }

  /** The pods' workers sync them again (runtime change, probe result). */
  handlePodSyncs(pods: readonly Pod[]): void {
    for (const pod of pods) this.#d.podWorkers.update(pod, 'runtime-event');
  }

  /** A message for /healthz when the loop has stalled, else undefined. */
  health(): string | undefined {
    if (this.#lastIteration === 0) return undefined;
    const age = this.#d.clock.monotonic() - this.#lastIteration;
    const limit = Math.max(2 * this.#d.syncFrequencyMs, MIN_HEALTHY_WINDOW_MS);
    return age > limit
      ? `sync loop took too long: last ran ${Math.round(age / 1000)}s ago`
      : undefined;
  }

  /** Events of pods the node does not run are dropped (upstream: "irrelevant event"). */
  #plegEvents(events: readonly PodLifecycleEvent[]): void {
    const pods = this.#d.pods();
    const wake: Pod[] = [];
    for (const uid of new Set(events.map((e) => e.podUID))) {
      const pod = pods.get(uid);
      if (pod !== undefined) wake.push(pod);
    }
    this.handlePodSyncs(wake);
  }

  async #ticker(periodMs: number, input: SyncLoopInput, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.#d.clock.sleep(periodMs, signal).catch(() => undefined);
      if (isAborted(signal)) return;
      try {
        await this.syncLoopIteration(input, signal);
      } catch (err) {
        // One failed pass is retried at the next tick; the loop itself goes on.
        if (!isAborted(signal))
          this.#d.logger.warn('Sync loop iteration failed', {
            input: input.kind,
            error: String(err),
          });
      }
    }
  }

  /** The allocation's work is asynchronous (checkpoint writes); its errors are logged. */
  #allocation(what: string, work: (m: PodAllocationManager) => Promise<void>): void {
    const m = this.#d.allocation;
    if (m === undefined) return;
    work(m).catch((err: unknown) => {
      this.#d.logger.error('Pod allocation failed', { operation: what, error: String(err) });
    });
  }
}

/**
 * The pod sources' consumer: each add / update / remove is one `config` iteration of
 * the loop. `loop` is read at call time, so the sources may be built before it.
 */
export function configChannel(loop: () => SyncLoop): PodSourceConsumer {
  const send = (op: PodOperation, pod: Pod): void => {
    loop().dispatch({ kind: 'config', op, pods: [pod] });
  };
  return {
    add: (pod) => {
      send('ADD', pod);
    },
    update: (pod) => {
      send('UPDATE', pod);
    },
    remove: (pod) => {
      send('REMOVE', pod);
    },
  };
}
