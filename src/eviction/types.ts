/**
 * Node-pressure eviction (upstream's pkg/kubelet/eviction): the signals, thresholds and
 * node conditions, and the small ports the manager needs from the rest of the kubelet.
 *
 * Each monitoring pass (every evictionMonitoringPeriod, 10 s) turns the stats summary
 * into one observation per signal (available and capacity), compares it with every
 * threshold, and then:
 *
 *   observed -> (grace period met) -> reclaim node-level resources -> evict one pod
 *
 * A threshold met is remembered until the signal is above threshold + minimum reclaim;
 * a node condition stays True for evictionPressureTransitionPeriod after its last
 * threshold was seen met, so it does not flap.
 */
import type { Pod, PodCondition } from 'kubernetes-types/core/v1.js';

/** The eviction signals berth measures on Linux (upstream's evictionapi.Signal values). */
export type Signal =
  | 'memory.available'
  | 'allocatableMemory.available'
  | 'nodefs.available'
  | 'nodefs.inodesFree'
  | 'imagefs.available'
  | 'imagefs.inodesFree'
  | 'containerfs.available'
  | 'containerfs.inodesFree'
  | 'pid.available';

/** Node conditions a met threshold sets. */
export type PressureCondition = 'MemoryPressure' | 'DiskPressure' | 'PIDPressure';

/** The resource a signal starves (upstream's signalToResource). */
export type StarvedResource = 'memory' | 'ephemeral-storage' | 'inodes' | 'pids';

/** How a quantity prints (Go's resource.Format of the value it came from). */
export type QuantityFormat = 'BinarySI' | 'DecimalSI';

/** A threshold's value: an absolute quantity or a fraction of the signal's capacity. */
export type ThresholdValue =
  { readonly quantity: number; readonly format: QuantityFormat } | { readonly percentage: number };

export interface Threshold {
  readonly signal: Signal;
  readonly value: ThresholdValue;
  /** 0 for a hard threshold; a soft one waits this long once met before evicting. */
  readonly gracePeriodMs: number;
  /** evictionMinimumReclaim: how far above the threshold the signal must get back. */
  readonly minReclaim?: ThresholdValue;
}

/** One signal as measured: what is available out of what capacity, and when. */
export interface Observation {
  readonly available: number;
  readonly capacity: number;
  /** When the stats behind it were taken (ms); used for "has it been updated". */
  readonly timeMs: number;
}

export type Observations = ReadonlyMap<Signal, Observation>;

/** What the node-status setters and the admission handler read. */
export interface NodePressure {
  /** The pressure conditions now True (held for the transition period), in fixed order. */
  conditions(): readonly PressureCondition[];
}

/** What an evicted pod's status becomes (upstream's killPodFunc status function). */
export interface EvictionStatus {
  readonly reason: 'Evicted';
  readonly message: string;
  /** DisruptionTarget (TerminationByKubelet); absent for local-storage limit evictions. */
  readonly condition?: PodCondition;
}

/**
 * Stops one pod: sets its status (phase Failed) and asks the pod workers to terminate
 * it with `gracePeriodSeconds`. Resolves once the request is made.
 */
export type KillPod = (pod: Pod, gracePeriodSeconds: number, status: EvictionStatus) => void;

/** Node-level reclaim before pods are evicted (upstream's ImageGC / ContainerGC). */
export interface NodeReclaimer {
  /** Removes every dead container and sandbox not needed by a running pod. */
  deleteAllUnusedContainers(signal: AbortSignal): Promise<void>;
  /** Removes every image no container uses (never a pinned one). */
  deleteUnusedImages(signal: AbortSignal): Promise<void>;
}

/** kubelet_evictions{eviction_signal}, as a port so this layer needs no registry. */
export interface EvictionMetrics {
  evicted(signal: string): void;
  statsAge?(signal: string, seconds: number): void;
}
