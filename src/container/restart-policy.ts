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
 * (RestartAllContainersOnContainerExits, beta and on since 1.36) restarts the whole pod
 * in place: every container is removed and the pod starts again from its first init
 * container in the same sandbox ({@link shouldAllContainersRestart}).
 */
import type { Container, Pod, PodStatus } from 'kubernetes-types/core/v1.js';
import { latestContainer, type RuntimeContainer, type RuntimePodStatus } from './pod-status.ts';

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

/** The action of the first rule whose exit codes match (upstream's FindMatchingContainerRestartRule). */
function matchingRuleAction(container: ContainerWithRules, exitCode: number): string | undefined {
  for (const rule of container.restartPolicyRules ?? []) {
    const values = rule.exitCodes?.values ?? [];
    const listed = values.includes(exitCode);
    const operator = rule.exitCodes?.operator;
    if ((operator === 'In' && listed) || (operator === 'NotIn' && !listed)) return rule.action;
  }
  return undefined;
}

function matchesRestartRule(container: ContainerWithRules, exitCode: number): boolean {
  // The first matching rule decides; an unknown action falls back to the policy.
  const action = matchingRuleAction(container, exitCode);
  return action === 'Restart' || action === 'RestartAllContainers';
}

/** Whether `container` exiting with `exitCode` restarts the whole pod. */
export function triggersRestartAll(container: Container, exitCode: number): boolean {
  return matchingRuleAction(container, exitCode) === 'RestartAllContainers';
}

/** The pod's init and app containers. */
function podContainers(pod: Pod): Container[] {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
}

/** Upstream's AllContainersCouldRestart: some container has a RestartAllContainers rule. */
export function allContainersCouldRestart(pod: Pod): boolean {
  return podContainers(pod).some((c) =>
    ((c as ContainerWithRules).restartPolicyRules ?? []).some(
      (r) => r.action === 'RestartAllContainers',
    ),
  );
}

/** The pod condition a restart of all containers is tracked with. */
export const ALL_CONTAINERS_RESTARTING = 'AllContainersRestarting';

/**
 * Upstream's ShouldAllContainersRestart: the status already says the pod is restarting
 * all its containers, or a container's latest instance (in the runtime, else in the
 * status) exited with a code whose rule is RestartAllContainers.
 */
export function shouldAllContainersRestart(
  pod: Pod,
  runtime: RuntimePodStatus | undefined,
  status: PodStatus | undefined,
): boolean {
  if (status?.conditions?.some((c) => c.type === ALL_CONTAINERS_RESTARTING && c.status === 'True'))
    return true;
  const reported = new Map(
    [...(status?.initContainerStatuses ?? []), ...(status?.containerStatuses ?? [])].map((s) => [
      s.name,
      s,
    ]),
  );
  return podContainers(pod).some((c) => {
    const latest = runtime === undefined ? undefined : latestContainer(runtime, c.name);
    if (latest?.state === 'exited' && triggersRestartAll(c, exitCodeOf(latest))) return true;
    const terminated = reported.get(c.name)?.state?.terminated;
    return terminated !== undefined && triggersRestartAll(c, terminated.exitCode);
  });
}

/** Upstream's AllContainersRestartCleanedUp: no container of the pod is left in the runtime. */
export function allContainersCleanedUp(pod: Pod, runtime: RuntimePodStatus): boolean {
  const names = new Set(podContainers(pod).map((c) => c.name));
  return !runtime.containers.some((c) => names.has(c.name));
}

function asPolicy(value: string | undefined): RestartPolicy | undefined {
  return value === 'Always' || value === 'OnFailure' || value === 'Never' ? value : undefined;
}
