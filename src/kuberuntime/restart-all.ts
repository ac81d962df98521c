/**
 * RestartAllContainers (RestartAllContainersOnContainerExits, beta and on by default
 * since v1.36): a container exiting with a code whose restart rule says
 * RestartAllContainers restarts the pod in place. The sync that sees it (the pod's
 * AllContainersRestarting condition True) kills and removes every container of the pod,
 * in upstream's order (getContainersToReset): the app containers, then the init
 * containers that did not trigger it, then the triggering containers, so the exit that
 * caused the reset is the last thing to go. The next sync finds no container left, lets
 * the condition fall back to False, and starts the pod again from its first init
 * container in the same sandbox; the status carries restart counts and the last
 * terminations over (status/container-status.ts).
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { exitCodeOf, triggersRestartAll } from '../container/restart-policy.ts';
import type { RuntimePodStatus } from '../container/pod-status.ts';

/** One container instance to remove for the reset. */
export interface ContainerToReset {
  readonly id: string;
  readonly name: string;
  /** Still running (or not known to have exited): killed before it is removed. */
  readonly kill: boolean;
}

function split(
  containers: readonly Container[],
  status: RuntimePodStatus,
): { sources: ContainerToReset[]; targets: ContainerToReset[] } {
  const sources: ContainerToReset[] = [];
  const targets: ContainerToReset[] = [];
  for (const c of containers) {
    // Every instance of the container goes, not only the latest.
    for (const instance of status.containers.filter((x) => x.name === c.name)) {
      const exited = instance.state === 'exited';
      const entry = { id: instance.id, name: c.name, kill: !exited };
      if (exited && triggersRestartAll(c, exitCodeOf(instance))) sources.push(entry);
      else targets.push(entry);
    }
  }
  return { sources, targets };
}

/** The containers to remove, in upstream's order. */
export function containersToReset(pod: Pod, status: RuntimePodStatus): ContainerToReset[] {
  const init = split(pod.spec?.initContainers ?? [], status);
  const app = split(pod.spec?.containers ?? [], status);
  return [...app.targets, ...init.targets, ...app.sources, ...init.sources];
}
