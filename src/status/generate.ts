/**
 * Computes a pod's API status from its spec, what the runtime reports, and what the
 * sync loop knows (waiting reasons such as ErrImagePull). Pure. Follows upstream's
 * phase rules: Pending until every container has run or runs; Running while any
 * runs or will be restarted; Succeeded/Failed once all have stopped for good.
 */
import type {
  Container,
  ContainerStatus,
  Pod,
  PodCondition,
  PodStatus,
  ResourceRequirements,
} from 'kubernetes-types/core/v1.js';
import { podAllocatedResources } from '../allocation/pod-allocated.ts';
import { qosClassOf } from '../container/qos.ts';
import {
  ALL_CONTAINERS_RESTARTING,
  allContainersCouldRestart,
  isSidecar,
} from '../container/restart-policy.ts';
import type { RuntimePodStatus } from '../container/pod-status.ts';
import {
  apiTime,
  containerStatus,
  terminateStatuses,
  type ContainerStatusContext,
  type WaitingReason,
} from './container-status.ts';
import { podPhase, type Phase } from './phase.ts';
import { RESIZE_CONDITIONS } from './resize-conditions.ts';

export type { WaitingReason } from './container-status.ts';
export { apiTime } from './container-status.ts';

export interface StatusInput {
  readonly pod: Pod;
  readonly runtime: RuntimePodStatus;
  /** Reasons the sync loop recorded for containers that are not running. */
  readonly waiting: ReadonlyMap<string, WaitingReason>;
  /** e.g. "containerd" for container IDs "containerd://…". */
  readonly runtimeName: string;
  readonly hostIPs: readonly string[];
  readonly now: Date;
  /**
   * The status this one replaces: the status manager's newest (it may not have reached
   * the API yet), else the pod's own.
   */
  readonly previous?: PodStatus;
  /**
   * The pod is being stopped for good (deleted, or it reached a terminal phase): its
   * phase becomes Succeeded or Failed once nothing runs, whatever its restart policy.
   */
  readonly terminal?: boolean;
  /** Set when the pod cannot run at all (admission, sandbox failure that is final). */
  readonly podFailure?: { readonly reason: string; readonly message: string };
  readonly readiness?: (containerName: string) => boolean | undefined;
  /** Whether a running container's startup probe passed; undefined: no startup probe. */
  readonly started?: (containerName: string) => boolean | undefined;
  /** The pod at its allocated resources (differs from `pod` while a resize is pending). */
  readonly allocatedPod?: Pod;
  /** Resources last given to the runtime per container (actuated_pods_state). */
  readonly actuated?: (containerName: string) => ResourceRequirements | undefined;
  /** PodResizePending / PodResizeInProgress (resize-conditions.ts); left out once terminal. */
  readonly resizeConditions?: readonly PodCondition[];
  /** status.resources (pod-resources.ts), with InPlacePodLevelResourcesVerticalScaling. */
  readonly podResources?: ResourceRequirements;
  /**
   * RestartAllContainers: `restarting` when this sync removes every container (the
   * AllContainersRestarting condition is True), `podRestarting` while the pod is in a
   * restart of all its containers (upstream's ShouldAllContainersRestart).
   */
  readonly restartAll?: { readonly restarting: boolean; readonly podRestarting: boolean };
}

/** Conditions the kubelet owns; others (PodScheduled, DisruptionTarget, gates) are kept. */
export const KUBELET_CONDITIONS = new Set([
  'PodReadyToStartContainers',
  'Initialized',
  'ContainersReady',
  'Ready',
  ...RESIZE_CONDITIONS,
  ALL_CONTAINERS_RESTARTING,
]);

function condition(
  type: string,
  ok: boolean,
  now: string,
  previous: readonly PodCondition[],
  reason?: string,
  message?: string,
): PodCondition {
  const status = ok ? 'True' : 'False';
  const old = previous.find((c) => c.type === type);
  return {
    type,
    status,
    lastTransitionTime: old?.status === status ? (old.lastTransitionTime ?? now) : now,
    ...(reason !== undefined && { reason }),
    ...(message !== undefined && { message }),
  };
}

/**
 * Ready: ContainersReady, and every readiness gate's condition (set by another
 * controller) True. While containers are not ready, Ready says why as ContainersReady
 * does; otherwise the unmet gates are listed in upstream's words.
 */
function readyCondition(
  pod: Pod,
  others: readonly PodCondition[],
  containersReady: boolean,
  now: string,
  prevConditions: readonly PodCondition[],
  reason: string | undefined,
  message: string | undefined,
): PodCondition {
  if (!containersReady) return condition('Ready', false, now, prevConditions, reason, message);
  const unmet: string[] = [];
  for (const gate of pod.spec?.readinessGates ?? []) {
    const c = others.find((x) => x.type === gate.conditionType);
    if (c === undefined)
      unmet.push(
        `corresponding condition of pod readiness gate "${gate.conditionType}" does not exist.`,
      );
    else if (c.status !== 'True')
      unmet.push(
        `the status of pod readiness gate "${gate.conditionType}" is not "True", but ${c.status}`,
      );
  }
  if (unmet.length === 0) return condition('Ready', true, now, prevConditions);
  return condition('Ready', false, now, prevConditions, 'ReadinessGatesNotReady', unmet.join(', '));
}

/** The sandbox's IPs; the last known ones while no sandbox reports any (e.g. stopped). */
function podIPs(ips: readonly string[], previous: PodStatus): Pick<PodStatus, 'podIP' | 'podIPs'> {
  const [first] = ips;
  if (first !== undefined) return { podIP: first, podIPs: ips.map((ip) => ({ ip })) };
  if (previous.podIP !== undefined) return { podIP: previous.podIP, podIPs: previous.podIPs ?? [] };
  return {};
}

/** Whether a regular container ever ran in this pod (upstream's HasAnyActiveRegularContainerStarted). */
function regularContainerRan(pod: Pod, runtime: RuntimePodStatus): boolean {
  const names = new Set((pod.spec?.containers ?? []).map((c) => c.name));
  return runtime.containers.some((c) => names.has(c.name));
}

/** Upstream's order: app container statuses sorted by name, init ones in spec order. */
function byName(a: ContainerStatus, b: ContainerStatus): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

export function generatePodStatus(input: StatusInput): PodStatus {
  const { pod, runtime } = input;
  const previous = input.previous ?? pod.status ?? {};
  const prevConditions = previous.conditions ?? [];
  // Conditions other controllers own (readiness gates, DisruptionTarget) as the API has
  // them now, over any this kubelet set itself and has not written yet: the status
  // manager's copy does not see another controller's patch.
  const others = [
    ...new Map(
      [...prevConditions, ...(pod.status?.conditions ?? [])]
        .filter((c) => !KUBELET_CONDITIONS.has(c.type))
        .map((c) => [c.type, c]),
    ).values(),
  ];
  const now = apiTime(input.now);
  const initSpecs = pod.spec?.initContainers ?? [];
  const ctx: ContainerStatusContext = {
    runtime,
    waiting: input.waiting,
    runtimeName: input.runtimeName,
    defaultWaiting: initSpecs.length > 0 ? 'PodInitializing' : 'ContainerCreating',
    previous,
    deleting: pod.metadata?.deletionTimestamp != null,
    ...(input.readiness !== undefined && { readiness: input.readiness }),
    ...(input.started !== undefined && { started: input.started }),
    ...(input.allocatedPod !== undefined && {
      allocated: (name: string) => specOf(input.allocatedPod, name),
    }),
    ...(input.actuated !== undefined && { actuated: input.actuated }),
    ...(input.restartAll?.podRestarting === true && { podRestarting: true }),
  };
  let initStatuses = initSpecs.map((c) =>
    containerStatus(c, isSidecar(c) ? 'sidecar' : 'init', ctx),
  );
  let statuses = (pod.spec?.containers ?? []).map((c) => containerStatus(c, 'app', ctx));
  // Ephemeral containers (kubectl debug) are reported apart and never counted for phase or readiness.
  const ephemeralStatuses = ((pod.spec?.ephemeralContainers ?? []) as Container[]).map((c) =>
    containerStatus(c, 'app', ctx),
  );
  const initialized = regularContainerRan(pod, runtime);
  const terminalRequested = input.terminal === true;
  let phase: Phase =
    input.podFailure !== undefined
      ? 'Failed'
      : podPhase({
          pod,
          init: initStatuses,
          app: statuses,
          terminal: terminalRequested,
          initialized,
        });
  // A terminal phase never changes back.
  if (previous.phase === 'Succeeded' || previous.phase === 'Failed') phase = previous.phase;
  else if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed')
    phase = pod.status.phase;
  if (terminalRequested) {
    // Upstream's TerminatePod: nothing of a stopped pod is left waiting or running, and
    // it is never left Pending or Running.
    const done = terminateStatuses(initStatuses, statuses, initialized || hasRun(previous));
    initStatuses = done.init;
    statuses = done.app;
    if (phase !== 'Succeeded' && phase !== 'Failed') phase = 'Failed';
  }
  const terminal = phase === 'Succeeded' || phase === 'Failed';
  const sandbox = runtime.sandboxes[0];
  const sidecars = new Set(initSpecs.filter(isSidecar).map((c) => c.name));
  const notReady = [...initStatuses.filter((s) => sidecars.has(s.name)), ...statuses]
    .filter((s) => !s.ready)
    .map((s) => s.name);
  const containersReady = notReady.length === 0 && !terminal;
  const reason = terminal ? 'PodCompleted' : containersReady ? undefined : 'ContainersNotReady';
  const message =
    terminal || containersReady
      ? undefined
      : `containers with unready status: [${notReady.join(' ')}]`;
  const initDone =
    initialized ||
    initStatuses.every(
      (s, i) =>
        s.state?.terminated?.exitCode === 0 ||
        (initSpecs[i] !== undefined &&
          isSidecar(initSpecs[i]) &&
          s.state?.running !== undefined &&
          s.started === true),
    );
  const notInit = initStatuses
    .filter((s, i) => {
      const spec = initSpecs[i];
      if (spec !== undefined && isSidecar(spec))
        return s.state?.running === undefined || s.started !== true;
      return s.state?.terminated?.exitCode !== 0;
    })
    .map((s) => s.name);
  // Once initialized a pod stays so (upstream, with RestartAllContainersOnContainerExits):
  // init containers run again after a restart of all containers.
  const stayInitialized = prevConditions.some(
    (c) => c.type === 'Initialized' && c.status === 'True',
  );
  const conditions: PodCondition[] = [
    condition('PodReadyToStartContainers', sandbox?.state === 'ready', now, prevConditions),
    phase === 'Succeeded'
      ? condition('Initialized', true, now, prevConditions, 'PodCompleted')
      : stayInitialized && !initDone
        ? condition('Initialized', true, now, prevConditions)
        : condition(
            'Initialized',
            initDone,
            now,
            prevConditions,
            initDone ? undefined : 'ContainersNotInitialized',
            initDone ? undefined : `containers with incomplete status: [${notInit.join(' ')}]`,
          ),
    readyCondition(pod, others, containersReady, now, prevConditions, reason, message),
    condition('ContainersReady', containersReady, now, prevConditions, reason, message),
    ...(allContainersCouldRestart(pod)
      ? [
          input.restartAll?.restarting === true
            ? condition(
                ALL_CONTAINERS_RESTARTING,
                true,
                now,
                prevConditions,
                'RestartAllContainersStarted',
                'container exited with restart policy rule',
              )
            : condition(ALL_CONTAINERS_RESTARTING, false, now, prevConditions),
        ]
      : []),
    ...others,
  ];
  // A pod bound by spec.nodeName never met the scheduler; the kubelet reports it scheduled.
  if (!conditions.some((c) => c.type === 'PodScheduled')) {
    conditions.push({
      type: 'PodScheduled',
      status: 'True',
      lastTransitionTime: previous.startTime ?? now,
    });
  }
  // Upstream: a hostNetwork pod's sandbox has no IP of its own; it inherits the node's
  // (the kube-apiserver and etcd static pods, kube-proxy).
  const ips =
    (sandbox?.ips ?? []).length === 0 && pod.spec?.hostNetwork === true
      ? input.hostIPs
      : (sandbox?.ips ?? []);
  const generation = observedGeneration(pod, previous);
  return {
    phase,
    conditions: [
      ...conditions.map((c) =>
        generation === undefined || !ownCondition(c, prevConditions)
          ? c
          : { ...c, observedGeneration: generation },
      ),
      // They carry the generation of the resize they describe.
      ...(terminal ? [] : (input.resizeConditions ?? [])),
    ],
    ...(generation !== undefined && { observedGeneration: generation }),
    ...(input.podFailure !== undefined && {
      reason: input.podFailure.reason,
      message: input.podFailure.message,
    }),
    hostIP: input.hostIPs[0] ?? '',
    hostIPs: input.hostIPs.map((ip) => ({ ip })),
    ...podIPs(ips, previous),
    startTime: previous.startTime ?? now,
    ...(initSpecs.length > 0 && { initContainerStatuses: initStatuses }),
    containerStatuses: [...statuses].sort(byName),
    ...(ephemeralStatuses.length > 0 && { ephemeralContainerStatuses: ephemeralStatuses }),
    qosClass: previous.qosClass ?? qosClassOf(pod),
    ...allocatedResources(input.allocatedPod ?? pod),
    ...(input.podResources !== undefined && { resources: input.podResources }),
  };
}

/**
 * status.allocatedResources: the allocated pod's requests, as upstream reports them for
 * every pod with InPlacePodLevelResourcesVerticalScaling on (its v1.37 default).
 */
function allocatedResources(pod: Pod): { allocatedResources?: Record<string, string> } {
  const list = podAllocatedResources(pod);
  return list === undefined ? {} : { allocatedResources: list };
}

/**
 * The pod generation this status reflects (PodObservedGenerationTracking, GA in v1.35):
 * the pod's, never lower than one already reported (an older spec's sync must not
 * undo a newer one's).
 */
function observedGeneration(pod: Pod, previous: PodStatus): number | undefined {
  const generation = pod.metadata?.generation;
  const before = (previous as { observedGeneration?: number }).observedGeneration;
  if (generation === undefined) return before;
  return before !== undefined && before > generation ? before : generation;
}

/** A condition this kubelet wrote (PodScheduled only when the scheduler did not). */
function ownCondition(c: PodCondition, before: readonly PodCondition[]): boolean {
  if (KUBELET_CONDITIONS.has(c.type)) return true;
  return c.type === 'PodScheduled' && !before.some((x) => x.type === 'PodScheduled');
}

function specOf(pod: Pod | undefined, name: string): Container | undefined {
  return [...(pod?.spec?.initContainers ?? []), ...(pod?.spec?.containers ?? [])].find(
    (c) => c.name === name,
  );
}

/** Upstream's hasPodInitialized, from the status alone: an app container left waiting. */
function hasRun(status: PodStatus): boolean {
  return (status.containerStatuses ?? []).some(
    (s) => s.lastState?.terminated !== undefined || s.state?.waiting === undefined,
  );
}
