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
} from 'kubernetes-types/core/v1.js';
import { qosClassOf } from '../kuberuntime/qos.ts';
import type { RuntimeContainer, RuntimePodStatus } from '../kuberuntime/runtime-state.ts';

export interface WaitingReason {
  readonly reason: string;
  readonly message: string;
}

export interface StatusInput {
  readonly pod: Pod;
  readonly runtime: RuntimePodStatus;
  /** Reasons the sync loop recorded for containers that are not running. */
  readonly waiting: ReadonlyMap<string, WaitingReason>;
  /** e.g. "containerd" for container IDs "containerd://…". */
  readonly runtimeName: string;
  readonly hostIPs: readonly string[];
  readonly now: Date;
  /** Set when the pod cannot run at all (admission, sandbox failure that is final). */
  readonly podFailure?: { readonly reason: string; readonly message: string };
  readonly readiness?: (containerName: string) => boolean | undefined;
  /** Whether a running container's startup probe passed; undefined: no startup probe. */
  readonly started?: (containerName: string) => boolean | undefined;
}

/** Conditions the kubelet owns; others (PodScheduled, DisruptionTarget, gates) are kept. */
export const KUBELET_CONDITIONS = new Set([
  'PodReadyToStartContainers',
  'Initialized',
  'ContainersReady',
  'Ready',
]);

export function apiTime(d: Date | number): string {
  return new Date(d).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** Containers of `name`, newest attempt first. */
function attempts(runtime: RuntimePodStatus, name: string): RuntimeContainer[] {
  return runtime.containers
    .filter((c) => c.name === name)
    .sort((a, b) => b.attempt - a.attempt || b.createdAt - a.createdAt);
}

function terminatedState(
  c: RuntimeContainer,
  runtimeName: string,
): NonNullable<ContainerStatus['state']> {
  const exitCode = c.exitCode ?? 0;
  return {
    terminated: {
      exitCode,
      reason:
        c.reason !== undefined && c.reason !== ''
          ? c.reason
          : exitCode === 0
            ? 'Completed'
            : 'Error',
      ...(c.message !== undefined && c.message !== '' && { message: c.message }),
      ...(c.startedAt !== undefined && { startedAt: apiTime(c.startedAt) }),
      ...(c.finishedAt !== undefined && { finishedAt: apiTime(c.finishedAt) }),
      containerID: `${runtimeName}://${c.id}`,
    },
  };
}

function containerStatus(spec: Container, input: StatusInput): ContainerStatus {
  const [current, previous] = attempts(input.runtime, spec.name);
  const waiting = input.waiting.get(spec.name);
  const base = {
    name: spec.name,
    image: spec.image ?? '',
    imageID: '',
    restartCount: 0,
    ready: false,
    started: false,
  };
  if (current === undefined) {
    return {
      ...base,
      state: {
        waiting: {
          reason: waiting?.reason ?? 'ContainerCreating',
          ...(waiting !== undefined && { message: waiting.message }),
        },
      },
    };
  }
  const status: ContainerStatus = {
    ...base,
    imageID: current.imageRef,
    containerID: `${input.runtimeName}://${current.id}`,
    restartCount: current.attempt,
  };
  if (current.state === 'running') {
    const ready = input.readiness?.(spec.name) ?? true;
    return {
      ...status,
      ready,
      started: input.started?.(spec.name) ?? true,
      state: { running: { startedAt: apiTime(current.startedAt ?? current.createdAt) } },
      ...(previous !== undefined &&
        previous.state === 'exited' && { lastState: terminatedState(previous, input.runtimeName) }),
    };
  }
  // Only a restart being held back overrides an exit; other reasons (a failed start)
  // are already in the runtime's terminated state.
  if (current.state === 'exited' && waiting?.reason === 'CrashLoopBackOff') {
    // Waiting to be restarted (CrashLoopBackOff): the exit just seen becomes lastState.
    return {
      ...status,
      state: { waiting: { reason: waiting.reason, message: waiting.message } },
      lastState: terminatedState(current, input.runtimeName),
    };
  }
  if (current.state === 'exited') {
    return {
      ...status,
      state: terminatedState(current, input.runtimeName),
      ...(previous !== undefined &&
        previous.state === 'exited' && { lastState: terminatedState(previous, input.runtimeName) }),
    };
  }
  return {
    ...status,
    state: {
      waiting: {
        reason: waiting?.reason ?? 'ContainerCreating',
        ...(waiting !== undefined && { message: waiting.message }),
      },
    },
  };
}

type Phase = NonNullable<PodStatus['phase']>;

/** Upstream's getPhase over the main containers, given init containers are done. */
export function podPhase(
  pod: Pod,
  statuses: readonly ContainerStatus[],
  initDone: boolean,
  initFailed: boolean,
): Phase {
  const policy = pod.spec?.restartPolicy ?? 'Always';
  if (initFailed && policy === 'Never') return 'Failed';
  if (!initDone) return 'Pending';
  let running = 0;
  let waiting = 0;
  let stopped = 0;
  let succeeded = 0;
  for (const s of statuses) {
    if (s.state?.running !== undefined) running++;
    else if (s.state?.terminated !== undefined) {
      stopped++;
      if (s.state.terminated.exitCode === 0) succeeded++;
    } else if (s.lastState?.terminated !== undefined) {
      stopped++;
      if (s.lastState.terminated.exitCode === 0) succeeded++;
    } else waiting++;
  }
  if (waiting > 0) return 'Pending';
  if (running > 0) return 'Running';
  if (stopped > 0) {
    if (policy === 'Always') return 'Running';
    if (stopped === succeeded) return 'Succeeded';
    if (policy === 'OnFailure') return 'Running';
    return 'Failed';
  }
  return 'Pending';
}

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
  containersReady: boolean,
  now: string,
  prevConditions: readonly PodCondition[],
  reason: string | undefined,
  message: string | undefined,
): PodCondition {
  if (!containersReady) return condition('Ready', false, now, prevConditions, reason, message);
  const unmet: string[] = [];
  for (const gate of pod.spec?.readinessGates ?? []) {
    const c = prevConditions.find((x) => x.type === gate.conditionType);
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

export function generatePodStatus(input: StatusInput): PodStatus {
  const { pod, runtime } = input;
  const previous = pod.status ?? {};
  const prevConditions = previous.conditions ?? [];
  const now = apiTime(input.now);
  const initSpecs = pod.spec?.initContainers ?? [];
  const initStatuses = initSpecs.map((c) => containerStatus(c, input));
  const statuses = (pod.spec?.containers ?? []).map((c) => containerStatus(c, input));
  // Ephemeral containers (kubectl debug) are reported apart and never counted for phase or readiness.
  const ephemeralStatuses = ((pod.spec?.ephemeralContainers ?? []) as Container[]).map((c) =>
    containerStatus(c, input),
  );
  const initFailed = initStatuses.some(
    (s) =>
      (s.state?.terminated?.exitCode ?? 0) !== 0 &&
      (pod.spec?.restartPolicy ?? 'Always') === 'Never',
  );
  const initDone = initStatuses.every(
    (s, i) =>
      s.state?.terminated?.exitCode === 0 ||
      (initSpecs[i]?.restartPolicy === 'Always' && s.state?.running !== undefined),
  );
  let phase: Phase =
    input.podFailure !== undefined ? 'Failed' : podPhase(pod, statuses, initDone, initFailed);
  // A terminal phase never changes back.
  if (previous.phase === 'Succeeded' || previous.phase === 'Failed') phase = previous.phase;
  const terminal = phase === 'Succeeded' || phase === 'Failed';
  const sandbox = runtime.sandboxes[0];
  const notReady = statuses.filter((s) => !s.ready).map((s) => s.name);
  const containersReady = notReady.length === 0 && !terminal;
  const reason = terminal ? 'PodCompleted' : containersReady ? undefined : 'ContainersNotReady';
  const message =
    terminal || containersReady
      ? undefined
      : `containers with unready status: [${notReady.join(' ')}]`;
  const notInit = initStatuses
    .filter((s) => s.state?.terminated?.exitCode !== 0 && s.state?.running === undefined)
    .map((s) => s.name);
  const conditions: PodCondition[] = [
    condition('PodReadyToStartContainers', sandbox?.state === 'ready', now, prevConditions),
    condition(
      'Initialized',
      initDone || terminal,
      now,
      prevConditions,
      initDone || terminal ? undefined : 'ContainersNotInitialized',
      initDone || terminal
        ? undefined
        : `containers with incomplete status: [${notInit.join(' ')}]`,
    ),
    readyCondition(pod, containersReady, now, prevConditions, reason, message),
    condition('ContainersReady', containersReady, now, prevConditions, reason, message),
    ...prevConditions.filter((c) => !KUBELET_CONDITIONS.has(c.type)),
  ];
  // A pod bound by spec.nodeName never met the scheduler; the kubelet reports it scheduled.
  if (!conditions.some((c) => c.type === 'PodScheduled')) {
    conditions.push({
      type: 'PodScheduled',
      status: 'True',
      lastTransitionTime: previous.startTime ?? now,
    });
  }
  const ips = sandbox?.ips ?? [];
  return {
    phase,
    conditions,
    ...(input.podFailure !== undefined && {
      reason: input.podFailure.reason,
      message: input.podFailure.message,
    }),
    hostIP: input.hostIPs[0] ?? '',
    hostIPs: input.hostIPs.map((ip) => ({ ip })),
    ...podIPs(ips, previous),
    startTime: previous.startTime ?? now,
    ...(initSpecs.length > 0 && { initContainerStatuses: initStatuses }),
    containerStatuses: statuses,
    ...(ephemeralStatuses.length > 0 && { ephemeralContainerStatuses: ephemeralStatuses }),
    qosClass: previous.qosClass ?? qosClassOf(pod),
  };
}
