/**
 * Terminal-phase detection for the sync loop: a pod whose containers have all finished
 * for good is Succeeded or Failed, and its worker moves on to termination. The status
 * manager computes the full phase; this answers only "is it over, and how".
 *
 * It uses the same restart decisions as the plan (restart-policy.ts), so a pod is
 * terminal exactly when the plan would start none of its containers again: with pod
 * restartPolicy Never or OnFailure in practice, or Always when every app container has
 * its own Never/OnFailure policy.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import {
  exitCodeOf,
  isFailedInstance,
  isSidecar,
  shouldRestartAfterExit,
  shouldRestartAfterFailure,
} from '../container/restart-policy.ts';
import { latestContainer, type RuntimePodStatus } from '../container/pod-status.ts';

/** The terminal phase a pod has reached. */
export type TerminalPhase = 'Succeeded' | 'Failed';

/**
 * `Failed` when a regular init container failed and may not restart; otherwise, once
 * every app container's newest instance has exited and may not restart, `Succeeded` if
 * all exited 0 and `Failed` if any did not. `undefined` while anything may still run.
 * Sidecars do not count: they are stopped once the app containers are done.
 */
export function isPodTerminal(pod: Pod, status: RuntimePodStatus): TerminalPhase | undefined {
  for (const container of pod.spec?.initContainers ?? []) {
    if (isSidecar(container)) continue;
    const latest = latestContainer(status, container.name);
    if (latest === undefined || !isFailedInstance(latest)) continue;
    const exitCode = latest.state === 'unknown' ? undefined : exitCodeOf(latest);
    if (!shouldRestartAfterFailure(container, pod, exitCode)) return 'Failed';
  }
  const containers = pod.spec?.containers ?? [];
  if (containers.length === 0) return undefined;
  let failed = false;
  for (const container of containers) {
    const latest = latestContainer(status, container.name);
    if (latest?.state !== 'exited') return undefined;
    const exitCode = exitCodeOf(latest);
    if (shouldRestartAfterExit(container, pod, exitCode)) return undefined;
    if (exitCode !== 0) failed = true;
  }
  return failed ? 'Failed' : 'Succeeded';
}
