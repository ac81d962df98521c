/**
 * Wiring of graceful node shutdown (src/nodeshutdown) into the kubelet: which pods are
 * active, how one is killed with the shutdown's status (upstream's killPodNow with a
 * PodStatusFunc), and the node status sync. Without configured periods there is no
 * manager at all: berth never connects to the system bus then.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { EventRecorder } from '../events/types.ts';
import { LogindBus } from '../nodeshutdown/logind-bus.ts';
import { LogindShutdownManager } from '../nodeshutdown/manager.ts';
import { LOCAL_STORAGE_STATE_FILE, ShutdownStateStorage } from '../nodeshutdown/storage.ts';
import type { KubeletMetrics } from '../metrics/registry.ts';
import { join } from 'node:path';
import type {
  InhibitBus,
  KillPodFunc,
  NodeShutdownManager,
  ShutdownGracePeriodByPodPriority,
} from '../nodeshutdown/types.ts';
import type { PodWorkers } from '../podworkers/pod-workers.ts';
import type { PodStatusManager } from '../status/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';

export interface NodeShutdownWiringOptions {
  /** shutdownPeriods() of the configuration; empty: the feature is off. */
  readonly periods: readonly ShutdownGracePeriodByPodPriority[];
  /** Where the InhibitDelayMaxSec drop-in goes (default /etc/systemd/logind.conf.d). */
  readonly logindConfigDirectory?: string;
}

export interface NodeShutdownWiringDeps {
  readonly nodeName: string;
  readonly pods: () => ReadonlyMap<string, Pod>;
  readonly podWorkers: () => PodWorkers;
  readonly status: () => PodStatusManager;
  readonly syncNodeStatus: (signal: AbortSignal) => Promise<unknown>;
  readonly recorder: EventRecorder;
  readonly clock: Clock;
  readonly logger: Logger;
  /** --root-dir: where the last shutdown's times are kept. */
  readonly rootDir: string;
  readonly metrics?: KubeletMetrics;
  /** The system bus (tests); default: a LogindBus on DBUS_SYSTEM_BUS_ADDRESS. */
  readonly connect?: () => InhibitBus;
}

/** How often a kill waits on its pod worker (upstream waits on a channel). */
const TERMINATION_POLL_MS = 100;

/**
 * Stops a pod through its worker with the given grace period and records `amend` for its
 * terminal status; resolves once nothing of it runs (or `signal` aborts the wait: the
 * termination itself goes on).
 */
export function killPodNow(
  podWorkers: () => PodWorkers,
  status: () => PodStatusManager,
  clock: Clock,
): KillPodFunc {
  return async (pod, gracePeriodSeconds, amend, signal) => {
    const uid = pod.metadata?.uid ?? '';
    // Upstream applies the status function as the kill starts, so the phase it decides
    // (Failed unless the pod had already succeeded) holds even when the containers then
    // exit 0 on SIGTERM.
    const { phase } = amend(status().get(uid) ?? pod.status ?? {});
    status().amendTerminal(uid, (s) => ({ ...amend(s), ...(phase !== undefined && { phase }) }));
    podWorkers().terminate(uid, gracePeriodSeconds);
    for (;;) {
      const state = podWorkers().state(uid);
      if (state === undefined || state === 'terminated') return;
      await clock.sleep(TERMINATION_POLL_MS, signal);
    }
  };
}

/** Undefined when graceful shutdown is off (no periods). */
export function nodeShutdownOf(
  options: NodeShutdownWiringOptions,
  d: NodeShutdownWiringDeps,
): NodeShutdownManager | undefined {
  const logger = d.logger.child({ component: 'nodeshutdown' });
  if (options.periods.length === 0) return undefined;
  logger.info('Creating node shutdown manager', {
    shutdownGracePeriodByPodPriority: options.periods,
  });
  return new LogindShutdownManager({
    periods: options.periods,
    connect:
      d.connect ??
      (() =>
        LogindBus.connect({
          clock: d.clock,
          logger,
          ...(options.logindConfigDirectory !== undefined && {
            logindConfigDirectory: options.logindConfigDirectory,
          }),
        })),
    activePods: () =>
      [...d.pods().values()].filter((p) => {
        const state = d.podWorkers().state(p.metadata?.uid ?? '');
        return state === 'syncing' || state === 'terminating';
      }),
    killPod: killPodNow(d.podWorkers, d.status, d.clock),
    statusesSent: () => d.status().drain(),
    syncNodeStatus: d.syncNodeStatus,
    recorder: d.recorder,
    node: { kind: 'Node', name: d.nodeName, uid: d.nodeName },
    clock: d.clock,
    logger,
    state: new ShutdownStateStorage(join(d.rootDir, LOCAL_STORAGE_STATE_FILE)),
    ...(d.metrics !== undefined && {
      metrics: {
        setStart: (s: number) => d.metrics?.gracefulShutdownStartTime.set(s),
        setEnd: (s: number) => d.metrics?.gracefulShutdownEndTime.set(s),
      },
    }),
  });
}
