/**
 * One container's API status from what the runtime reports, what the sync loop
 * recorded (waiting reasons) and the previous status — upstream's
 * convertToAPIContainerStatuses plus the readiness rules of its prober manager's
 * UpdatePodStatus, for the three kinds of container a pod has:
 *
 * - `init`: a regular init container. Ready once it completed (exit 0), never while
 *   it runs; not probed.
 * - `sidecar`: an init container with `restartPolicy: Always`. Ready like an app
 *   container (running, started, readiness probe passed or absent).
 * - `app` (and ephemeral): ready when running, started and its readiness probe
 *   passed (or it has none).
 *
 * A container the runtime no longer knows keeps what the previous status said of it
 * when that was a termination (its containers are removed once a pod terminated, but a
 * finalizer can keep the API object, and its status must not fall back to waiting).
 */
import type {
  Container,
  ContainerStatus,
  PodStatus,
  ResourceRequirements,
} from 'kubernetes-types/core/v1.js';
import { formatBytes, formatMilliCpu } from '../allocation/resources.ts';
import type {
  RuntimeContainer,
  RuntimePodStatus,
  RuntimeResources,
} from '../container/pod-status.ts';
import { milliCpu, parseQuantity } from '../util/quantity.ts';

export interface WaitingReason {
  readonly reason: string;
  readonly message: string;
}

export type ContainerKind = 'init' | 'sidecar' | 'app';

/** What one container's status needs from the pod's status input. */
export interface ContainerStatusContext {
  readonly runtime: RuntimePodStatus;
  readonly waiting: ReadonlyMap<string, WaitingReason>;
  readonly runtimeName: string;
  /** The default waiting reason: PodInitializing in a pod with init containers. */
  readonly defaultWaiting: 'ContainerCreating' | 'PodInitializing';
  /** The status this one replaces (the status manager's newest, else the API's). */
  readonly previous: PodStatus;
  /** Whether the pod is being deleted (a lost running container is then not a restart). */
  readonly deleting: boolean;
  readonly readiness?: (containerName: string) => boolean | undefined;
  readonly started?: (containerName: string) => boolean | undefined;
  /** The container's spec at its allocated resources (a resize not yet allocated excluded). */
  readonly allocated?: (containerName: string) => Container | undefined;
  /** The resources last given to the runtime for the container (actuated_pods_state). */
  readonly actuated?: (containerName: string) => ResourceRequirements | undefined;
  /**
   * The pod is restarting all its containers (RestartAllContainers): one removed from
   * the runtime waits with reason RestartingAllContainers.
   */
  readonly podRestarting?: boolean;
}

/** Upstream's reason for containers removed by a restart of all containers. */
export const RESTARTING_ALL_CONTAINERS = 'RestartingAllContainers';
const RESTARTING_ALL_MESSAGE = 'The container is removed because RestartAllContainers in place';

/** Upstream's reason for a container that vanished from the runtime. */
export const STATUS_UNKNOWN = 'ContainerStatusUnknown';

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

function previousOf(previous: PodStatus, kind: ContainerKind, name: string) {
  const list =
    kind === 'app' ? previous.containerStatuses : (previous.initContainerStatuses ?? undefined);
  return list?.find((s) => s.name === name);
}

/** Below these both the allocation and what runs read the same (cm.MinMilliCPULimit, MinShares). */
const MIN_MILLI_CPU_LIMIT = 10;
const MIN_SHARES = 2;

/**
 * What the runtime reports for a running container, with what it does not report (the
 * memory request, or everything from a runtime that reports nothing) taken from the
 * actuated resources, as upstream's toKubeContainerStatus fills them.
 */
function reported(
  current: RuntimeContainer,
  actuated: ResourceRequirements | undefined,
): (RuntimeResources & { memoryRequest?: number }) | undefined {
  const memoryRequest = actuated?.requests?.['memory'];
  const actuatedMemoryRequest =
    memoryRequest === undefined ? 0 : Math.floor(parseQuantity(memoryRequest));
  if (current.resources === undefined) {
    if (actuated === undefined) return undefined;
    const q = (v: string | undefined, f: (x: string) => number): number =>
      v === undefined ? 0 : f(v);
    return {
      cpuRequest: q(actuated.requests?.['cpu'], milliCpu),
      cpuLimit: q(actuated.limits?.['cpu'], milliCpu),
      memoryLimit: q(actuated.limits?.['memory'], (x) => Math.floor(parseQuantity(x))),
      memoryRequest: actuatedMemoryRequest,
    };
  }
  return {
    ...current.resources,
    ...(actuatedMemoryRequest > 0 && { memoryRequest: actuatedMemoryRequest }),
  };
}

/**
 * status.resources and status.allocatedResources (upstream's
 * convertContainerStatusResources): the allocated resources, with what the runtime says
 * a running container has in their place — so during a resize `resources` shows the
 * old values until the runtime applied the new ones. A value the runtime does not
 * report is kept from the previous status of the same running container.
 */
function resourcesOf(
  spec: Container,
  current: RuntimeContainer,
  ctx: ContainerStatusContext,
  old: ContainerStatus | undefined,
): Pick<ContainerStatus, 'resources' | 'allocatedResources'> {
  const allocated = ctx.allocated?.(spec.name) ?? spec;
  const r = allocated.resources;
  if (r === undefined) return {};
  const resources: ResourceRequirements = structuredClone({
    ...(r.limits !== undefined && { limits: r.limits }),
    ...(r.requests !== undefined && { requests: r.requests }),
  });
  const allocatedRequests =
    r.requests !== undefined ? { allocatedResources: { ...r.requests } } : {};
  if (current.state !== 'running') return { resources, ...allocatedRequests };
  const have = reported(current, ctx.actuated?.(spec.name));
  const sameRunning =
    old?.state?.running !== undefined &&
    old.containerID === `${ctx.runtimeName}://${current.id}` &&
    old.resources !== undefined;
  const keep = (list: 'limits' | 'requests', name: string): void => {
    const value = sameRunning ? old.resources?.[list]?.[name] : undefined;
    const target = resources[list];
    if (value !== undefined && target !== undefined) target[name] = value;
  };
  const limits = resources.limits;
  if (limits !== undefined) {
    if (have?.cpuLimit !== undefined) {
      const mine = limits['cpu'] === undefined ? 0 : milliCpu(limits['cpu']);
      if (have.cpuLimit > MIN_MILLI_CPU_LIMIT || mine > MIN_MILLI_CPU_LIMIT)
        limits['cpu'] = formatMilliCpu(have.cpuLimit);
    } else keep('limits', 'cpu');
    if (have?.memoryLimit !== undefined) limits['memory'] = formatBytes(have.memoryLimit);
    else keep('limits', 'memory');
  }
  const requests = resources.requests;
  if (requests !== undefined) {
    if (have?.cpuRequest !== undefined) {
      const mine = requests['cpu'] === undefined ? 0 : milliCpu(requests['cpu']);
      if (have.cpuRequest > MIN_SHARES || mine > MIN_SHARES)
        requests['cpu'] = formatMilliCpu(have.cpuRequest);
    } else keep('requests', 'cpu');
    if (have?.memoryRequest !== undefined) requests['memory'] = formatBytes(have.memoryRequest);
    else keep('requests', 'memory');
  }
  return { resources, ...allocatedRequests };
}

/** A container with no runtime record: waiting, or what the previous status said. */
function withoutRuntime(
  spec: Container,
  kind: ContainerKind,
  ctx: ContainerStatusContext,
): ContainerStatus {
  const waiting = ctx.waiting.get(spec.name);
  const old = previousOf(ctx.previous, kind, spec.name);
  if (ctx.podRestarting === true && old !== undefined && old.state?.waiting === undefined) {
    // Removed to restart the pod in place: it will run again.
    return {
      ...old,
      ready: false,
      started: false,
      state: { waiting: { reason: RESTARTING_ALL_CONTAINERS, message: RESTARTING_ALL_MESSAGE } },
      lastState: {
        terminated: {
          exitCode: 137,
          reason: RESTARTING_ALL_CONTAINERS,
          message: RESTARTING_ALL_MESSAGE,
        },
      },
      restartCount: old.restartCount + 1,
    };
  }
  if (old?.state?.terminated !== undefined && waiting === undefined) {
    // Removed after it ended: its termination is still the truth.
    return { ...old, ready: kind === 'init' && old.state.terminated.exitCode === 0 };
  }
  const status: ContainerStatus = {
    name: spec.name,
    image: spec.image ?? '',
    imageID: '',
    restartCount: old?.restartCount ?? 0,
    ready: false,
    started: false,
    state: {
      waiting: {
        reason: waiting?.reason ?? ctx.defaultWaiting,
        ...(waiting !== undefined && { message: waiting.message }),
      },
    },
    ...(old?.lastState !== undefined && { lastState: old.lastState }),
  };
  if (old?.state?.running !== undefined && waiting === undefined && old.lastState === undefined) {
    // It ran and is gone without a trace: say so, so the pod is not Pending again.
    return {
      ...status,
      lastState: {
        terminated: {
          exitCode: 137,
          reason: STATUS_UNKNOWN,
          message:
            'The container could not be located when the pod was deleted.  The container used to be Running',
        },
      },
      restartCount: ctx.deleting ? status.restartCount : status.restartCount + 1,
    };
  }
  return status;
}

/**
 * The last termination when the runtime has no earlier instance (upstream, with
 * RestartAllContainersOnContainerExits): the previous status's termination of another
 * instance, else its last termination.
 */
function carriedLastState(
  old: ContainerStatus | undefined,
  containerID: string,
): { lastState?: NonNullable<ContainerStatus['lastState']> } {
  if (old?.state?.terminated !== undefined && old.containerID !== containerID)
    return { lastState: { terminated: old.state.terminated } };
  if (old?.lastState?.terminated !== undefined)
    return { lastState: { terminated: old.lastState.terminated } };
  return {};
}

/** Upstream's readiness for a running container of `kind`. */
function readyWhileRunning(
  spec: Container,
  kind: ContainerKind,
  started: boolean,
  ctx: ContainerStatusContext,
): boolean {
  if (kind === 'init' || !started) return false;
  return ctx.readiness?.(spec.name) ?? true;
}

export function containerStatus(
  spec: Container,
  kind: ContainerKind,
  ctx: ContainerStatusContext,
): ContainerStatus {
  const [current, previous] = attempts(ctx.runtime, spec.name);
  if (current === undefined) return withoutRuntime(spec, kind, ctx);
  const waiting = ctx.waiting.get(spec.name);
  const old = previousOf(ctx.previous, kind, spec.name);
  const containerID = `${ctx.runtimeName}://${current.id}`;
  const status: ContainerStatus = {
    name: spec.name,
    image: spec.image ?? '',
    imageID: current.imageRef,
    containerID,
    // Never lower than reported: a restart of all containers removes the earlier instances.
    restartCount: Math.max(current.attempt, old?.restartCount ?? 0),
    ready: false,
    started: false,
    ...resourcesOf(spec, current, ctx, old),
  };
  const lastState: { lastState?: NonNullable<ContainerStatus['lastState']> } =
    previous !== undefined && previous.state === 'exited'
      ? { lastState: terminatedState(previous, ctx.runtimeName) }
      : carriedLastState(old, containerID);
  if (current.state === 'running') {
    const started = ctx.started?.(spec.name) ?? true;
    // Running again after a termination the runtime no longer has (upstream's rule).
    const restarted =
      old?.state?.terminated !== undefined && old.restartCount >= current.attempt
        ? { restartCount: old.restartCount + 1 }
        : {};
    return {
      ...status,
      ...restarted,
      ready: readyWhileRunning(spec, kind, started, ctx),
      started,
      state: { running: { startedAt: apiTime(current.startedAt ?? current.createdAt) } },
      ...lastState,
    };
  }
  // Only a restart being held back overrides an exit; other reasons (a failed start)
  // are already in the runtime's terminated state.
  if (current.state === 'exited' && waiting?.reason === 'CrashLoopBackOff') {
    // Waiting to be restarted (CrashLoopBackOff): the exit just seen becomes lastState.
    return {
      ...status,
      state: { waiting: { reason: waiting.reason, message: waiting.message } },
      lastState: terminatedState(current, ctx.runtimeName),
    };
  }
  if (current.state === 'exited') {
    const state = terminatedState(current, ctx.runtimeName);
    return {
      ...status,
      ready: kind === 'init' && state.terminated?.exitCode === 0,
      state,
      ...lastState,
    };
  }
  return {
    ...status,
    state: {
      waiting: {
        reason: waiting?.reason ?? ctx.defaultWaiting,
        ...(waiting !== undefined && { message: waiting.message }),
      },
    },
  };
}

/**
 * Upstream's TerminatePod: once a pod is terminal, a container still without a
 * termination (it never reported one) is marked failed, so that nothing of a stopped
 * pod looks like it might still run. App containers only once the pod initialized;
 * init containers up to the last one that ever started.
 */
export function terminateStatuses(
  init: readonly ContainerStatus[],
  app: readonly ContainerStatus[],
  initialized: boolean,
): { init: ContainerStatus[]; app: ContainerStatus[] } {
  const unknown = (s: ContainerStatus): ContainerStatus =>
    s.state?.terminated !== undefined
      ? s
      : {
          ...s,
          ready: false,
          state: {
            terminated: {
              exitCode: 137,
              reason: STATUS_UNKNOWN,
              message: 'The container could not be located when the pod was terminated',
            },
          },
        };
  let lastStarted = 0;
  init.forEach((s, i) => {
    if (s.state?.waiting === undefined || s.lastState?.terminated !== undefined) lastStarted = i;
  });
  return {
    init: init.map((s, i) => (i <= lastStarted ? unknown(s) : s)),
    app: initialized ? app.map(unknown) : [...app],
  };
}
