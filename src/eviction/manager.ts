/**
 * The eviction manager (upstream's managerImpl): every monitoring period it measures
 * the signals, keeps the node conditions, and when a threshold has been met for its
 * grace period it first reclaims node-level resources (dead containers, unused images)
 * for disk signals and then evicts at most one pod, ranked for the starved resource.
 * After an eviction it waits (up to 30 s) for the pod to be cleaned up and measures
 * again at once, as upstream does, instead of sleeping a whole period.
 */
import type { Pod, PodCondition } from 'kubernetes-types/core/v1.js';
import { isCriticalPod } from '../admission/predicates.ts';
import { podTarget } from '../events/targets.ts';
import type { EventRecorder } from '../events/types.ts';
import type { PodStats, StatsProvider } from '../stats/types.ts';
import type { Clock } from '../util/clock.ts';
import { isAborted } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import { localStorageViolation } from './local-storage.ts';
import { evictionMessage, rankFor } from './rank.ts';
import {
  SIGNAL_RESOURCE,
  byEvictionPriority,
  conditionsLastObservedAt,
  conditionsObservedSince,
  firstObservedAt,
  isHard,
  mergeThresholds,
  nodeConditions,
  observe,
  podStatsByUID,
  thresholdsMet,
  thresholdsMetGracePeriod,
  thresholdsUpdatedStats,
} from './signals.ts';
import { withContainerFsThresholds } from './thresholds.ts';
import type {
  EvictionMetrics,
  KillPod,
  NodePressure,
  NodeReclaimer,
  Observations,
  PressureCondition,
  Threshold,
} from './types.ts';

/** Upstream's evictionMonitoringPeriod. */
export const MONITORING_PERIOD_MS = 10_000;
/** Upstream's immediateEvictionGracePeriodSeconds, for hard thresholds. */
const IMMEDIATE_GRACE_SECONDS = 1;
const CLEANUP_TIMEOUT_MS = 30_000;
const CLEANUP_POLL_MS = 1_000;

export interface EvictionManagerOptions {
  readonly thresholds: readonly Threshold[];
  readonly pressureTransitionPeriodMs: number;
  /** evictionMaxPodGracePeriod: the grace period cap for soft evictions. */
  readonly maxPodGracePeriodSeconds: number;
  readonly monitoringPeriodMs?: number;
  readonly stats: StatsProvider;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly recorder: EventRecorder;
  readonly nodeName: string;
  /** The admitted pods still running (candidates for eviction). */
  readonly activePods: () => readonly Pod[];
  readonly killPod: KillPod;
  /** True once nothing of the pod runs any more. */
  readonly podCleanedUp: (uid: string) => boolean;
  /** What the pods may use in all (allocatableMemory.available); undefined: not observed. */
  readonly podsMemoryBytes?: () => number | undefined;
  /** Whether images live on their own filesystem (asked once, at the first pass). */
  readonly dedicatedImageFs?: (signal: AbortSignal) => Promise<boolean>;
  readonly reclaimer?: NodeReclaimer;
  readonly metrics?: EvictionMetrics;
  /** localStorageCapacityIsolation: evict pods over their ephemeral-storage limits (default on). */
  readonly localStorageLimits?: boolean;
}

export class EvictionManager implements NodePressure {
  readonly #o: EvictionManagerOptions;
  #thresholds: readonly Threshold[];
  #dedicatedImageFs: boolean | undefined;
  #conditions: readonly PressureCondition[] = [];
  #conditionsLastObservedAt = new Map<PressureCondition, number>();
  #thresholdsFirstObservedAt = new Map<Threshold, number>();
  #thresholdsMet: readonly Threshold[] = [];
  #lastObservations: Observations = new Map();

  constructor(options: EvictionManagerOptions) {
    this.#o = options;
    this.#thresholds = options.thresholds;
  }

  conditions(): readonly PressureCondition[] {
    return this.#conditions;
  }

  /** The monitoring loop; returns when `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const { clock, logger } = this.#o;
    logger.info('Eviction manager: starting control loop');
    while (!signal.aborted) {
      let evicted: Pod[] = [];
      try {
        evicted = await this.synchronize(signal);
      } catch (err) {
        if (isAborted(signal)) return;
        logger.error('Eviction manager: failed to synchronize', { error: String(err) });
      }
      if (evicted.length > 0) {
        await this.#waitForCleanup(evicted, signal);
        continue;
      }
      await clock.sleep(this.#o.monitoringPeriodMs ?? MONITORING_PERIOD_MS, signal).catch(() => {
        /* aborted: the loop ends */
      });
    }
  }

  /** One pass; returns the pods evicted (at most one). */
  async synchronize(signal: AbortSignal): Promise<Pod[]> {
    const o = this.#o;
    const localStorage = o.localStorageLimits ?? true;
    if (this.#thresholds.length === 0 && !localStorage) return [];
    if (this.#dedicatedImageFs === undefined) {
      const dedicated = (await o.dedicatedImageFs?.(signal)) ?? false;
      this.#dedicatedImageFs = dedicated;
      this.#thresholds = withContainerFsThresholds(this.#thresholds, dedicated);
    }
    const active = [...o.activePods()];
    let summary;
    try {
      summary = await o.stats.summary({ signal });
    } catch (err) {
      if (signal.aborted) throw err;
      o.logger.error('Eviction manager: failed to get summary stats', { error: String(err) });
      return [];
    }
    const observations = observe(summary, o.podsMemoryBytes?.());
    const statsByUID = podStatsByUID(summary);
    const statsOf = (p: Pod): PodStats | undefined => statsByUID.get(p.metadata?.uid ?? '');

    let met = thresholdsMet(this.#thresholds, observations, false);
    if (this.#thresholdsMet.length > 0)
      met = mergeThresholds(met, thresholdsMet(this.#thresholdsMet, observations, true));
    const now = o.clock.now();
    const firstObserved = firstObservedAt(met, this.#thresholdsFirstObservedAt, now);
    const lastObserved = conditionsLastObservedAt(
      nodeConditions(met),
      this.#conditionsLastObservedAt,
      now,
    );
    const conditions = conditionsObservedSince(lastObserved, o.pressureTransitionPeriodMs, now);
    const graced = thresholdsMetGracePeriod(firstObserved, now);
    if (conditions.join() !== this.#conditions.join())
      o.logger.info('Eviction manager: node conditions changed', { conditions });
    this.#conditions = conditions;
    this.#thresholdsFirstObservedAt = firstObserved;
    this.#conditionsLastObservedAt = lastObserved;
    this.#thresholdsMet = graced;
    const updated = thresholdsUpdatedStats(graced, observations, this.#lastObservations);
    this.#lastObservations = observations;
    if (localStorage) {
      const evicted = this.#localStorageEviction(active, statsOf);
      if (evicted.length > 0) return evicted;
    }
    if (updated.length === 0) return [];

    const sorted = byEvictionPriority(updated);
    const toReclaim = sorted[0];
    if (toReclaim === undefined) return [];
    const resource = SIGNAL_RESOURCE[toReclaim.signal];
    o.logger.info('Eviction manager: attempting to reclaim', { resourceName: resource });
    const nodeRef = { kind: 'Node', name: o.nodeName, uid: o.nodeName } as const;
    o.recorder.event(
      nodeRef,
      'Warning',
      'EvictionThresholdMet',
      `Attempting to reclaim ${resource}`,
    );
    if (await this.#reclaimNodeLevel(toReclaim, signal)) {
      o.logger.info('Eviction manager: able to reduce resource pressure without evicting pods.', {
        resourceName: resource,
      });
      return [];
    }
    const rank = rankFor(toReclaim.signal, this.#dedicatedImageFs);
    if (rank === undefined) return [];
    if (active.length === 0) {
      o.logger.error(
        'Eviction manager: eviction thresholds have been met, but no pods are active to evict',
      );
      return [];
    }
    rank(active, statsOf);
    o.logger.info('Eviction manager: pods ranked for eviction', {
      pods: active.map((p) => `${p.metadata?.namespace ?? ''}/${p.metadata?.name ?? ''}`),
    });
    for (const t of sorted) {
      const at = observations.get(t.signal)?.timeMs ?? 0;
      if (at > 0) o.metrics?.statsAge?.(t.signal, (now - at) / 1000);
    }
    for (const pod of active) {
      let grace = IMMEDIATE_GRACE_SECONDS;
      if (!isHard(toReclaim)) {
        const own = pod.spec?.terminationGracePeriodSeconds;
        grace =
          own === undefined
            ? o.maxPodGracePeriodSeconds
            : Math.min(o.maxPodGracePeriodSeconds, own);
      }
      const message = evictionMessage(resource, pod, statsOf(pod), sorted, observations);
      const condition: PodCondition = {
        type: 'DisruptionTarget',
        status: 'True',
        reason: 'TerminationByKubelet',
        message,
        lastTransitionTime: new Date(now).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      };
      if (this.#evict(pod, grace, message, condition)) {
        o.metrics?.evicted(toReclaim.signal);
        return [pod];
      }
    }
    o.logger.info('Eviction manager: unable to evict any pods from the node');
    return [];
  }

  /** Every pod over an ephemeral-storage limit is evicted at once, pressure or not. */
  #localStorageEviction(active: readonly Pod[], statsOf: (p: Pod) => PodStats | undefined): Pod[] {
    const evicted: Pod[] = [];
    for (const pod of active) {
      const stats = statsOf(pod);
      if (stats === undefined) continue;
      const v = localStorageViolation(pod, stats, this.#dedicatedImageFs ?? false);
      if (v === undefined) continue;
      if (this.#evict(pod, IMMEDIATE_GRACE_SECONDS, v.message)) {
        this.#o.metrics?.evicted(v.signal);
        evicted.push(pod);
      }
    }
    return evicted;
  }

  /** Runs the reclaim functions for a disk signal; true when no threshold is met after. */
  async #reclaimNodeLevel(t: Threshold, signal: AbortSignal): Promise<boolean> {
    const o = this.#o;
    const r = o.reclaimer;
    if (r === undefined || SIGNAL_RESOURCE[t.signal] === 'memory' || t.signal === 'pid.available')
      return false;
    // With a dedicated image filesystem, nodefs holds neither images nor containers.
    if (this.#dedicatedImageFs === true && t.signal.startsWith('nodefs.')) return false;
    for (const step of [
      (s: AbortSignal) => r.deleteAllUnusedContainers(s),
      (s: AbortSignal) => r.deleteUnusedImages(s),
    ]) {
      try {
        await step(signal);
      } catch (err) {
        if (signal.aborted) throw err;
        o.logger.info(
          'Eviction manager: unexpected error when attempting to reduce resource pressure',
          { resourceName: SIGNAL_RESOURCE[t.signal], error: String(err) },
        );
      }
    }
    let summary;
    try {
      summary = await o.stats.summary({ signal });
    } catch (err) {
      if (signal.aborted) throw err;
      return false;
    }
    const after = observe(summary, o.podsMemoryBytes?.());
    return thresholdsMet(this.#thresholds, after, true).length === 0;
  }

  /** Upstream's evictPod: critical pods are never evicted for node pressure. */
  #evict(pod: Pod, grace: number, message: string, condition?: PodCondition): boolean {
    const o = this.#o;
    const name = `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
    if (isCriticalPod(pod)) {
      o.logger.error('Eviction manager: cannot evict a critical pod', { pod: name });
      return false;
    }
    o.recorder.event(podTarget(pod), 'Warning', 'Evicted', message);
    o.killPod(pod, grace, {
      reason: 'Evicted',
      message,
      ...(condition !== undefined && { condition }),
    });
    o.logger.info('Eviction manager: pod is evicted successfully', { pod: name });
    return true;
  }

  async #waitForCleanup(pods: readonly Pod[], signal: AbortSignal): Promise<void> {
    const o = this.#o;
    const deadline = o.clock.now() + CLEANUP_TIMEOUT_MS;
    while (!signal.aborted && o.clock.now() < deadline) {
      await o.clock.sleep(CLEANUP_POLL_MS, signal).catch(() => undefined);
      if (pods.every((p) => o.podCleanedUp(p.metadata?.uid ?? ''))) {
        o.logger.info('Eviction manager: pods successfully cleaned up');
        return;
      }
    }
    if (!signal.aborted)
      o.logger.info('Eviction manager: timed out waiting for pods to be cleaned up');
  }
}
