/**
 * The sync plan's input and output types (plan.ts computes one from the other).
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { RuntimePodStatus } from '../container/pod-status.ts';
import type { ProbeResultsReader } from '../prober/types.ts';
import type { BackoffReader, WaitingContainer } from './crash-backoff.ts';
import type { ContainerToReset } from './restart-all.ts';
import type { SandboxChangeReason } from './sandbox-decision.ts';

/** Input of plan.ts's computePodActions. */
export interface PlanInput {
  readonly pod: Pod;
  readonly status: RuntimePodStatus;
  /** Sync time in ms since the epoch; only used to date `waiting[].retryAt`. */
  readonly now: number;
  readonly backoff: BackoffReader;
  /**
   * Probe results by container id. Without a reader every probe counts as passed, so
   * nothing is killed for a probe and sidecars do not wait for startup probes.
   */
  readonly probes?: ProbeResultsReader;
  /**
   * Running containers whose resize needs a restart (their resizePolicy says
   * RestartContainer for a changed resource; resize.ts), with the Killing message.
   */
  readonly resizeRestarts?: ReadonlyMap<string, string>;
  /**
   * The pod is restarting all its containers (AllContainersRestarting, restart-all.ts):
   * this round only removes them.
   */
  readonly restartAll?: boolean;
}

/** Why a container is killed; probe reasons select the probe's own grace period. */
export type KillReason = 'spec changed' | 'liveness' | 'startup' | 'unknown state' | 'resize';

/** A container instance to stop before the starts happen. */
export interface ContainerToKill {
  readonly id: string;
  readonly name: string;
  readonly reason: KillReason;
  /** Human-readable, for the Killing event. */
  readonly message: string;
}

/** What one sync round must do for a pod. See the module comment for the order. */
export interface PodActions {
  /** Stop every container and the sandbox(es) before anything else. */
  readonly killPod: boolean;
  readonly createSandbox: boolean;
  /** Id of the newest sandbox: the one to start containers in, or the one replaced. */
  readonly sandboxId?: string;
  /** Set when a new sandbox is needed, whether or not one will be created. */
  readonly sandboxChangeReason?: SandboxChangeReason;
  /** Attempt number for a new sandbox (or the current sandbox's). */
  readonly attempt: number;
  /** Init containers (sidecars and at most one regular one) to start, in spec order. */
  readonly initContainersToStart: readonly string[];
  /** The regular init container among `initContainersToStart`, if any. */
  readonly nextInitContainerToStart?: string;
  /** A regular init container failed and may not restart: the pod has failed. */
  readonly initFailed?: boolean;
  readonly containersToStart: readonly string[];
  readonly ephemeralContainersToStart: readonly string[];
  readonly containersToKill: readonly ContainerToKill[];
  /** Containers held back by CrashLoopBackOff, by container name. */
  readonly waiting: Readonly<Record<string, WaitingContainer>>;
  /** RestartAllContainers: every container to kill and remove, in order (restart-all.ts). */
  readonly containersToReset: readonly ContainerToReset[];
}
