/**
 * The pod phase, as upstream's getPhase computes it from the container statuses.
 *
 * - Pending while a regular init container has not completed, while a sidecar has not
 *   started (before the pod initialized), or while an app container waits with no
 *   earlier run.
 * - Failed at once when an init container failed and will not be restarted.
 * - Running while an app container runs (sidecars count) and every container is known.
 * - Once every app container stopped: a terminal pod (being deleted or past its
 *   termination) is Succeeded when all exited 0, else Failed; otherwise it stays Running
 *   while any container will be restarted, by its own restart policy and rules
 *   (ContainerRestartRules, on by default) or the pod's.
 */
import type { Container, ContainerStatus, Pod, PodStatus } from 'kubernetes-types/core/v1.js';
import { isSidecar, shouldRestartAfterExit } from '../container/restart-policy.ts';
import { RESTARTING_ALL_CONTAINERS } from './container-status.ts';

export type Phase = NonNullable<PodStatus['phase']>;

/** The exit code of a container that stopped (now, or before it waits to restart). */
function stoppedExitCode(s: ContainerStatus): number | undefined {
  return s.state?.terminated?.exitCode ?? s.lastState?.terminated?.exitCode;
}

export interface PhaseInput {
  readonly pod: Pod;
  readonly init: readonly ContainerStatus[];
  readonly app: readonly ContainerStatus[];
  /** The pod is being stopped for good: nothing of it restarts. */
  readonly terminal: boolean;
  /** A regular container has run in this pod (it initialized before). */
  readonly initialized: boolean;
}

/**
 * Whether a stopped container runs again: by its policy and rules, or because it was
 * removed to restart all of the pod's containers (upstream's RestartingAllContainers).
 */
function restarts(c: Container, pod: Pod, s: ContainerStatus, exitCode: number): boolean {
  const reason = s.state?.terminated?.reason ?? s.lastState?.terminated?.reason;
  return reason === RESTARTING_ALL_CONTAINERS || shouldRestartAfterExit(c, pod, exitCode);
}

function byName(list: readonly ContainerStatus[], c: Container): ContainerStatus | undefined {
  return list.find((s) => s.name === c.name);
}

export function podPhase(input: PhaseInput): Phase {
  const { pod } = input;
  const initSpecs = pod.spec?.initContainers ?? [];
  let pendingInit = 0;
  let pendingSidecars = 0;
  let failedInitForGood = 0;
  for (const c of initSpecs.filter((x) => !isSidecar(x))) {
    const s = byName(input.init, c);
    const exitCode = s === undefined || s.state?.running !== undefined ? 0 : stoppedExitCode(s);
    if (s === undefined || s.state?.running !== undefined || exitCode === undefined) {
      pendingInit++;
    } else if (exitCode !== 0 && !restarts(c, pod, s, exitCode)) {
      failedInitForGood++;
    }
  }
  let unknown = 0;
  let running = 0;
  let waiting = 0;
  let stopped = 0;
  let stoppedForGood = 0;
  let succeeded = 0;
  for (const c of initSpecs.filter(isSidecar)) {
    const s = byName(input.init, c);
    if (s === undefined) {
      unknown++;
    } else if (s.state?.running !== undefined) {
      if (s.started !== true) pendingSidecars++;
      running++;
    } else if (s.state?.waiting !== undefined && s.lastState?.terminated === undefined) {
      // A stopped sidecar does not count for the phase; one that never ran does.
      pendingSidecars++;
      waiting++;
    }
  }
  for (const c of pod.spec?.containers ?? []) {
    const s = byName(input.app, c);
    const exitCode = s === undefined ? undefined : stoppedExitCode(s);
    if (s === undefined) unknown++;
    else if (s.state?.running !== undefined) running++;
    else if (exitCode === undefined) waiting++;
    else {
      stopped++;
      if (!restarts(c, pod, s, exitCode)) stoppedForGood++;
      if (exitCode === 0) succeeded++;
    }
  }
  if (failedInitForGood > 0) return 'Failed';
  if (pendingInit > 0 || (pendingSidecars > 0 && !input.initialized) || waiting > 0)
    return 'Pending';
  if (running > 0 && unknown === 0) return 'Running';
  if (running === 0 && stopped > 0 && unknown === 0) {
    if (input.terminal || stopped === stoppedForGood)
      return stopped === succeeded ? 'Succeeded' : 'Failed';
    // At least one container is being restarted.
    return 'Running';
  }
  return 'Pending';
}
