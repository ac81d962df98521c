/**
 * Restart decisions for one container, shared by the sync plan and terminal-phase
 * detection so that both always agree on whether an exited container comes back.
 *
 * The effective policy of a container is its own `restartPolicy` when set (container
 * restart rules, beta and on by default since Kubernetes 1.35), else the pod's
 * (`Always` when unset). An init container with `restartPolicy: Always` is a sidecar
 * and is handled separately: it is restarted whenever it is not running.
 *
 * `restartPolicyRules` (exit-code rules, same feature) are honoured: the first rule
 * whose exit codes match decides. `Restart` restarts the container. `RestartAllContainers`
 * restarts it too, but berth does not yet reset the pod's other containers as upstream
 * does (RestartAllContainersOnContainerExits, beta since 1.36).
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import type { RuntimeContainer } from './pod-status.ts';

/** A restart policy value as the API spells it. */
export type RestartPolicy = 'Always' | 'OnFailure' | 'Never';

/** A container restart rule (core/v1 ContainerRestartRule, newer than kubernetes-types). */
interface ContainerRestartRule {
  readonly action?: string;
  readonly exitCodes?: { readonly operator?: string; readonly values?: readonly number[] };
}

type ContainerWithRules = Container & {
  readonly restartPolicyRules?: readonly ContainerRestartRule[];
};

/** The pod's restart policy, `Always` when unset or unrecognised (the API default). */
export function podRestartPolicy(pod: Pod): RestartPolicy {
  return asPolicy(pod.spec?.restartPolicy) ?? 'Always';
}

/** The container's own policy when set, else the pod's. */
export function effectiveRestartPolicy(container: Container, pod: Pod): RestartPolicy {
  return asPolicy(container.restartPolicy) ?? podRestartPolicy(pod);
}

/** True for init containers that run alongside the app containers (sidecars). */
export function isSidecar(container: Container): boolean {
  return container.restartPolicy === 'Always';
}

/** True once the pod has a deletion timestamp: nothing of it is started again. */
export function isPodDeleting(pod: Pod): boolean {
  return pod.metadata?.deletionTimestamp !== undefined;
}

/**
 * Whether a container that exited with `exitCode` is started again: its restart rules
 * first (only consulted when it has a policy of its own, as upstream), then its
 * effective policy.
 */
export function shouldRestartAfterExit(container: Container, pod: Pod, exitCode: number): boolean {
  if (container.restartPolicy !== undefined && matchesRestartRule(container, exitCode)) return true;
  switch (effectiveRestartPolicy(container, pod)) {
    case 'Always':
      return true;
    case 'OnFailure':
      return exitCode !== 0;
    case 'Never':
      return false;
  }
}

/**
 * Whether a container that failed (exited non-zero, OOM-killed, or lost in an unknown
 * state) is started again. Unlike {@link shouldRestartAfterExit} this does not trust
 * an exit code of 0: an OOM kill or an unknown state is a failure whatever code the
 * runtime reported.
 */
export function shouldRestartAfterFailure(
  container: Container,
  pod: Pod,
  exitCode: number | undefined,
): boolean {
  if (
    exitCode !== undefined &&
    container.restartPolicy !== undefined &&
    matchesRestartRule(container, exitCode)
  ) {
    return true;
  }
  return effectiveRestartPolicy(container, pod) !== 'Never';
}

/**
 * Whether a running container killed for a probe failure is started again. No exit
 * code exists yet, so only the policy counts (upstream skips the rules here too).
 */
export function restartsAfterKill(container: Container, pod: Pod): boolean {
  return effectiveRestartPolicy(container, pod) !== 'Never';
}

/** The exit code the plan reads; CRI leaves it 0 when the runtime does not set it. */
export function exitCodeOf(container: RuntimeContainer): number {
  return container.exitCode ?? 0;
}

/** A (non-sidecar) init container instance that did not complete. */
export function isFailedInstance(container: RuntimeContainer): boolean {
  if (container.reason === 'OOMKilled') return true;
  if (container.state === 'unknown') return true;
  return container.state === 'exited' && exitCodeOf(container) !== 0;
}

function matchesRestartRule(container: ContainerWithRules, exitCode: number): boolean {
  for (const rule of container.restartPolicyRules ?? []) {
    const values = rule.exitCodes?.values ?? [];
    const listed = values.includes(exitCode);
    const operator = rule.exitCodes?.operator;
    const matched = (operator === 'In' && listed) || (operator === 'NotIn' && !listed);
    // The first matching rule decides; an unknown action falls back to the policy.
    if (matched) return rule.action === 'Restart' || rule.action === 'RestartAllContainers';
  }
  return false;
}

function asPolicy(value: string | undefined): RestartPolicy | undefined {
  return value === 'Always' || value === 'OnFailure' || value === 'Never' ? value : undefined;
}
