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
import type { Container, ContainerStatus, PodStatus } from 'kubernetes-types/core/v1.js';
import type { RuntimeContainer, RuntimePodStatus } from '../kuberuntime/runtime-state.ts';

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
}

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

/**
 * The resources a container runs with. Until in-place resize (issue #30) can change
 * them, what was allocated is the spec, which is also what upstream reports for a
 * container whose runtime status carries no resources.
 */
function resourcesOf(spec: Container): Pick<ContainerStatus, 'resources' | 'allocatedResources'> {
  const r = spec.resources;
  if (r === undefined) return {};
  const out: Pick<ContainerStatus, 'resources' | 'allocatedResources'> = {
    resources: {
      ...(r.limits !== undefined && { limits: { ...r.limits } }),
      ...(r.requests !== undefined && { requests: { ...r.requests } }),
    },
  };
  return r.requests !== undefined ? { ...out, allocatedResources: { ...r.requests } } : out;
}

/** A container with no runtime record: waiting, or what the previous status said. */
function withoutRuntime(
  spec: Container,
  kind: ContainerKind,
  ctx: ContainerStatusContext,
): ContainerStatus {
  const waiting = ctx.waiting.get(spec.name);
  const old = previousOf(ctx.previous, kind, spec.name);
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
  const status: ContainerStatus = {
    name: spec.name,
    image: spec.image ?? '',
    imageID: current.imageRef,
    containerID: `${ctx.runtimeName}://${current.id}`,
    restartCount: current.attempt,
    ready: false,
    started: false,
    ...resourcesOf(spec),
  };
  const lastState =
    previous !== undefined && previous.state === 'exited'
      ? { lastState: terminatedState(previous, ctx.runtimeName) }
      : {};
  if (current.state === 'running') {
    const started = ctx.started?.(spec.name) ?? true;
    return {
      ...status,
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
