/**
 * Graceful node shutdown (upstream's pkg/kubelet/nodeshutdown): berth holds a logind
 * "delay" inhibitor lock on shutdown; when logind announces PrepareForShutdown(true) the
 * node turns NotReady, new pods are refused, and running pods are stopped by priority
 * group, each group within its share of the grace period, before the lock is released
 * and the machine goes down. PrepareForShutdown(false) (a cancelled shutdown) takes the
 * lock again and the node returns to Ready.
 *
 * The manager's life:
 *
 *   idle -> watching <-> shutting-down          (watching -> idle when the bus is lost,
 *                                                then reconnecting every second)
 */
import type { Pod, PodStatus } from 'kubernetes-types/core/v1.js';
import type { ShutdownGracePeriodByPodPriority } from '../config/types.ts';

export type { ShutdownGracePeriodByPodPriority };

/** Upstream's status of a pod stopped for a shutdown (admission's is in src/admission). */
export const NODE_SHUTDOWN_REASON = 'Terminated';
export const NODE_SHUTDOWN_MESSAGE = 'Pod was terminated in response to imminent node shutdown.';
/** What ShutdownStatus returns while shutting down; the NotReady condition's message. */
export const NODE_SHUTTING_DOWN = 'node is shutting down';

/** A held inhibitor lock; releasing it lets logind go on with the shutdown. */
export interface InhibitLock {
  release(): Promise<void>;
}

/**
 * logind over the system bus (upstream's dbusInhibiter). Each method fails with a
 * `NodeShutdownError` when the bus or logind cannot do it.
 */
export interface InhibitBus {
  /** logind's InhibitDelayMaxUSec, in milliseconds. */
  currentInhibitDelayMs(signal: AbortSignal): Promise<number>;
  /** Inhibit("shutdown", "kubelet", "Kubelet needs time to handle node shutdown", "delay"). */
  inhibitShutdown(signal: AbortSignal): Promise<InhibitLock>;
  /** Asks logind to reload its configuration (SIGHUP through systemd's KillUnit). */
  reloadLogindConf(signal: AbortSignal): Promise<void>;
  /** Writes the 99-kubelet.conf drop-in raising InhibitDelayMaxSec. */
  overrideInhibitDelay(delayMs: number): Promise<void>;
  /**
   * Calls `onEvent` for every well-formed PrepareForShutdown signal; malformed ones are
   * logged and dropped. `onClosed` runs once when the connection ends.
   */
  monitorShutdown(onEvent: (shuttingDown: boolean) => void, onClosed: () => void): Promise<void>;
  close(): void;
}

/** Stops one pod within `gracePeriodSeconds` and gives it the terminal status `amend` makes. */
export type KillPodFunc = (
  pod: Pod,
  gracePeriodSeconds: number,
  amend: (status: PodStatus) => PodStatus,
  signal: AbortSignal,
) => Promise<void>;

export type NodeShutdownErrorCode =
  'BERTH_NODE_SHUTDOWN_BUS' | 'BERTH_NODE_SHUTDOWN_INHIBIT' | 'BERTH_NODE_SHUTDOWN_DELAY';

export class NodeShutdownError extends Error {
  readonly code: NodeShutdownErrorCode;
  constructor(code: NodeShutdownErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NodeShutdownError';
    this.code = code;
  }
}

/** kubelet_graceful_shutdown_{start,end}_time_seconds (seconds since the epoch; 0: unset). */
export interface GracefulShutdownMetrics {
  setStart(seconds: number): void;
  setEnd(seconds: number): void;
}

/** What the kubelet sees of the shutdown manager. */
export interface NodeShutdownManager {
  /** Watches for shutdown events until `signal` aborts; never throws (failures are logged). */
  run(signal: AbortSignal): Promise<void>;
  /** NODE_SHUTTING_DOWN while a shutdown is in progress, else undefined. */
  shutdownStatus(): string | undefined;
}
