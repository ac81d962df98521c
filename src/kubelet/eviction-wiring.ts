/**
 * Wires the eviction manager and the image garbage collector to the rest of the kubelet:
 * their stats come from the same provider as /stats/summary, disk reclaim is the image
 * GC's deleteUnusedImages and housekeeping's container GC, the candidates are the pods the workers still run, and an
 * eviction is the status manager's terminal-status amendment (phase Failed, reason
 * Evicted, the message, DisruptionTarget) plus the pod workers' terminate with the
 * eviction's grace period.
 */
import { stat } from 'node:fs/promises';
import type { Pod, PodCondition, PodStatus } from 'kubernetes-types/core/v1.js';
import type { CriClient } from '../cri/index.ts';
import type { EventRecorder } from '../events/types.ts';
import { EvictionManager } from '../eviction/manager.ts';
import { parseThresholdConfig, type ThresholdConfig } from '../eviction/thresholds.ts';
import type { EvictionStatus, Threshold } from '../eviction/types.ts';
import { ImageGcManager, type ImageGcPolicy } from '../images/gc.ts';
import type { KubeletMetrics } from '../metrics/registry.ts';
import type { PodWorkers } from '../podworkers/pod-workers.ts';
import { CriStatsProvider } from '../stats/cri-provider.ts';
import { ProcHostStats } from '../stats/host.ts';
import type { VolumeStatsSource } from '../stats/types.ts';
import type { PodStatusManager } from '../status/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import { parseQuantity } from '../util/quantity.ts';
import type { NodeReserved } from '../nodestatus/build.ts';

/** The eviction and image GC settings of the KubeletConfiguration, thresholds parsed. */
export interface EvictionOptions {
  readonly thresholds: readonly Threshold[];
  readonly imageGc: ImageGcPolicy;
  readonly pressureTransitionPeriodMs: number;
  readonly maxPodGracePeriodSeconds: number;
  /** evictionMonitoringPeriod; upstream's is fixed at 10 s. */
  readonly monitoringPeriodMs?: number;
}

export interface EvictionWiring {
  readonly cri: CriClient;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly recorder: EventRecorder;
  readonly metrics?: KubeletMetrics | undefined;
  readonly pods: () => ReadonlyMap<string, Pod>;
  readonly isRejected: (uid: string) => boolean;
  readonly podWorkers: () => PodWorkers;
  readonly status: () => PodStatusManager;
  /** The node's memory capacity (status.capacity.memory), once registered. */
  readonly memoryCapacity: () => string | undefined;
  /** Removes dead containers and sandboxes nothing needs (housekeeping's container GC). */
  readonly deleteAllUnusedContainers: (signal: AbortSignal) => Promise<void>;
  /** The pods' measured volumes, for the pods' ephemeral-storage and volume usage. */
  readonly volumes?: VolumeStatsSource;
}

/** The eviction manager, and the loops of it and the image garbage collector. */
export interface EvictionStack {
  readonly manager: EvictionManager;
  /** Both loops; returns when `signal` aborts. */
  run(signal: AbortSignal): Promise<void>;
}

/** Upstream's KillPodOptions status function: the evicted pod's terminal status. */
export function evictedStatus(s: PodStatus, e: EvictionStatus): PodStatus {
  const conditions: PodCondition[] = (s.conditions ?? []).filter(
    (c) => e.condition === undefined || c.type !== e.condition.type,
  );
  if (e.condition !== undefined) conditions.push(e.condition);
  return { ...s, phase: 'Failed', reason: e.reason, message: e.message, conditions };
}

/** Whether the image filesystem is another device than the kubelet's root directory. */
async function dedicatedImageFs(
  cri: CriClient,
  rootDir: string,
  signal: AbortSignal,
): Promise<boolean> {
  const info = await cri.image.imageFsInfo({}, { signal });
  const mount = info.imageFilesystems[0]?.fsId?.mountpoint;
  if (mount === undefined || mount === '') return false;
  const [a, b] = await Promise.all([stat(rootDir), stat(mount)]);
  return a.dev !== b.dev;
}

/** The eviction manager and image GC for the kubelet's options; undefined: both off. */
export function evictionStackOf(
  kubelet: {
    readonly eviction?: EvictionOptions | undefined;
    readonly reserved?: NodeReserved | undefined;
    readonly nodeName: string;
    readonly rootDir: string;
    readonly podLogsDir: string;
  },
  w: EvictionWiring,
): EvictionStack | undefined {
  const options = kubelet.eviction;
  if (options === undefined) return undefined;
  const { cri, clock, logger, metrics, recorder } = w;
  const reserved = kubelet.reserved?.memoryBytes ?? 0;
  const stats = new CriStatsProvider({
    cri,
    host: new ProcHostStats(),
    clock,
    logger: logger.child({ component: 'stats' }),
    nodeName: kubelet.nodeName,
    rootDir: kubelet.rootDir,
    podLogsDir: kubelet.podLogsDir,
    ...(w.volumes !== undefined && { volumes: w.volumes }),
  });
  const images = new ImageGcManager({
    images: cri.image,
    runtime: cri.runtime,
    imageFs: async (signal) => {
      const fs = (await stats.summary({ signal })).node.runtime?.imageFs;
      return { capacityBytes: fs?.capacityBytes ?? 0, availableBytes: fs?.availableBytes ?? 0 };
    },
    policy: options.imageGc,
    clock,
    logger: logger.child({ component: 'image-gc' }),
    recorder,
    nodeName: kubelet.nodeName,
    ...(metrics !== undefined && {
      collected: (reason: 'age' | 'space') => {
        metrics.imageGarbageCollected.inc({ reason });
      },
    }),
  });
  const running = (uid: string): boolean => w.podWorkers().state(uid) === 'syncing';
  const manager = new EvictionManager({
    thresholds: options.thresholds,
    pressureTransitionPeriodMs: options.pressureTransitionPeriodMs,
    maxPodGracePeriodSeconds: options.maxPodGracePeriodSeconds,
    ...(options.monitoringPeriodMs !== undefined && {
      monitoringPeriodMs: options.monitoringPeriodMs,
    }),
    stats,
    clock,
    logger: logger.child({ component: 'eviction' }),
    recorder: w.recorder,
    nodeName: kubelet.nodeName,
    activePods: () =>
      [...w.pods()].filter(([uid]) => !w.isRejected(uid) && running(uid)).map(([, p]) => p),
    killPod: (pod, grace, evicted) => {
      const uid = pod.metadata?.uid ?? '';
      w.status().amendTerminal(uid, (s) => evictedStatus(s, evicted));
      w.podWorkers().terminate(uid, grace);
    },
    podCleanedUp: (uid) => {
      const state = w.podWorkers().state(uid);
      return state === undefined || state === 'terminated';
    },
    podsMemoryBytes: () => {
      const capacity = w.memoryCapacity();
      return capacity === undefined ? undefined : parseQuantity(capacity) - reserved;
    },
    dedicatedImageFs: (signal) => dedicatedImageFs(cri, kubelet.rootDir, signal),
    reclaimer: {
      deleteAllUnusedContainers: w.deleteAllUnusedContainers,
      deleteUnusedImages: (signal) => images.deleteUnusedImages(signal),
    },
    ...(metrics !== undefined && {
      metrics: {
        evicted: (signal: string) => {
          metrics.evictions.inc({ eviction_signal: signal });
        },
        statsAge: (signal: string, seconds: number) => {
          metrics.evictionStatsAge.observe({ eviction_signal: signal }, seconds);
        },
      },
    }),
  });
  return {
    manager,
    run: async (signal) => {
      await Promise.all([manager.run(signal), images.run(signal)]);
    },
  };
}

/** The eviction and image GC part of a KubeletConfiguration (structurally the config's). */
export interface EvictionConfig extends ThresholdConfig {
  readonly evictionPressureTransitionPeriodMs: number;
  readonly evictionMaxPodGracePeriodSeconds: number;
  readonly imageGCHighThresholdPercent: number;
  readonly imageGCLowThresholdPercent: number;
  readonly imageMinimumGCAgeMs: number;
  readonly imageMaximumGCAgeMs: number;
}

/**
 * The eviction manager's settings from the KubeletConfiguration.
 * @throws EvictionConfigError naming the field of a threshold upstream would refuse.
 */
export function evictionOptionsOf(c: EvictionConfig): EvictionOptions {
  return {
    thresholds: parseThresholdConfig(c),
    imageGc: {
      highThresholdPercent: c.imageGCHighThresholdPercent,
      lowThresholdPercent: c.imageGCLowThresholdPercent,
      minAgeMs: c.imageMinimumGCAgeMs,
      maxAgeMs: c.imageMaximumGCAgeMs,
    },
    pressureTransitionPeriodMs: c.evictionPressureTransitionPeriodMs,
    maxPodGracePeriodSeconds: c.evictionMaxPodGracePeriodSeconds,
  };
}
