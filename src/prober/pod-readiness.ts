/**
 * The `ready` and `started` flags of a pod's containers from probe results (upstream's
 * prober.Manager.UpdatePodStatus): one set of rules that ProberManager and
 * FakeProberManager both apply, so the fake's flags are the real ones.
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import type { RuntimeContainer, RuntimePodStatus } from '../container/pod-status.ts';
import type { ProbeKind, ProbeResult } from './types.ts';

/** Upstream's kubeletRestartGracePeriod: containers started this long before berth are adopted. */
export const RESTART_GRACE_MS = 10_000;

/** What the flags are computed from besides the pod and its runtime status. */
export interface ResultsView {
  get(kind: ProbeKind, containerId: string): ProbeResult | undefined;
  /** When the prober started (ms since the epoch): older instances are adopted. */
  readonly startedAt: number;
}

/** Containers that can be probed: app containers and restartable init containers (sidecars). */
export function probedContainers(pod: Pod): Container[] {
  return [
    ...(pod.spec?.initContainers ?? []).filter((c) => c.restartPolicy === 'Always'),
    ...(pod.spec?.containers ?? []),
  ];
}

/** The newest running instance of container `name`, if any. */
export function runningInstance(
  runtime: RuntimePodStatus,
  name: string,
): RuntimeContainer | undefined {
  return runtime.containers
    .filter((c) => c.name === name && c.state === 'running')
    .sort((a, b) => b.attempt - a.attempt || b.createdAt - a.createdAt)[0];
}

/** Whether the API status shows the pod Ready (what berth reported before a restart). */
function podReady(pod: Pod): boolean {
  return (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

/** Whether the API status reported this very instance started (its startup probe had passed). */
export function apiStarted(pod: Pod, name: string, containerId: string): boolean {
  const statuses = [
    ...(pod.status?.initContainerStatuses ?? []),
    ...(pod.status?.containerStatuses ?? []),
  ];
  const s = statuses.find((c) => c.name === name);
  return s?.started === true && s.containerID?.endsWith(`://${containerId}`) === true;
}

/**
 * Whether the instance was running before the prober (berth) started, with upstream's
 * 10 s of grace: such a container's earlier probe results are in the API status, not in
 * memory.
 */
export function adopted(view: ResultsView, instance: RuntimeContainer): boolean {
  return (instance.startedAt ?? instance.createdAt) < view.startedAt - RESTART_GRACE_MS;
}

function hasStarted(
  view: ResultsView,
  pod: Pod,
  container: Container,
  instance: RuntimeContainer,
): boolean {
  if (container.startupProbe === undefined) return true;
  const result = view.get('startup', instance.id);
  if (result !== undefined) return result === 'success';
  return adopted(view, instance) && apiStarted(pod, container.name, instance.id);
}

/**
 * The `ready` flag per running container of the pod: its readiness result; without a
 * readiness probe, whether it started; undefined when no probe decides.
 */
export function readinessOf(
  view: ResultsView,
  pod: Pod,
  runtime: RuntimePodStatus,
): (containerName: string) => boolean | undefined {
  return (name) => {
    const container = probedContainers(pod).find((c) => c.name === name);
    const instance = runningInstance(runtime, name);
    if (container === undefined || instance === undefined) return undefined;
    if (container.readinessProbe !== undefined) {
      if (!hasStarted(view, pod, container, instance)) return false;
      const result = view.get('readiness', instance.id);
      if (result !== undefined) return result === 'success';
      // Not probed yet since berth started: a container that ran before keeps the
      // readiness the API shows, as upstream's, so a restart of berth does not flap
      // every Ready pod on the node to NotReady until its next probe.
      return adopted(view, instance) && podReady(pod);
    }
    return container.startupProbe === undefined
      ? undefined
      : hasStarted(view, pod, container, instance);
  };
}

/** The `started` flag per running container: false until its startup probe passed. */
export function startedOf(
  view: ResultsView,
  pod: Pod,
  runtime: RuntimePodStatus,
): (containerName: string) => boolean | undefined {
  return (name) => {
    const container = probedContainers(pod).find((c) => c.name === name);
    const instance = runningInstance(runtime, name);
    if (container?.startupProbe === undefined || instance === undefined) return undefined;
    return hasStarted(view, pod, container, instance);
  };
}
