/**
 * RuntimeService's container RPCs. What a container does once started comes from the
 * test's onStart handler (print, exit, fail to start); ExecSync answers from its onExec
 * handler. State errors use the gRPC codes containerd uses (Unknown for "wrong state",
 * NotFound for unknown ids), so the real client's classification applies unchanged.
 */
import { status as GrpcStatus } from '@grpc/grpc-js';
import * as api from '../gen/runtime/v1/api.ts';
import { CriError } from '../errors.ts';
import { RpcFailure, failed, notFound } from './rpc-failure.ts';
import {
  TERMINATED_EXIT_CODE,
  containerStateName,
  labelsMatch,
  type ContainerRecord,
  type RuntimeContext,
} from './state.ts';
import type { FakeExecOutcome, FakeStartOutcome, RuntimeHandlers } from './types.ts';

type ContainerHandlers = Pick<
  RuntimeHandlers,
  | 'createContainer'
  | 'startContainer'
  | 'stopContainer'
  | 'removeContainer'
  | 'listContainers'
  | 'containerStatus'
  | 'updateContainerResources'
  | 'reopenContainerLog'
  | 'execSync'
  | 'exec'
  | 'attach'
  | 'portForward'
>;

/** containerd's exit code and reason for a container whose process never started. */
const START_ERROR_EXIT_CODE = 128;

function toBuffer(data: string | Uint8Array | undefined): Buffer {
  if (data === undefined) return Buffer.alloc(0);
  return typeof data === 'string' ? Buffer.from(data) : Buffer.from(data);
}

// A function, not an inline comparison: the state may have changed across an await.
function isCreated(c: ContainerRecord): boolean {
  return c.state === api.ContainerState.CONTAINER_CREATED;
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The container RPCs over the fake's state. */
export function containerHandlers(ctx: RuntimeContext): ContainerHandlers {
  const { state } = ctx;

  const find = (id: string): ContainerRecord => {
    const c = state.container(id);
    if (c === undefined) throw notFound(`container "${id}"`);
    return c;
  };

  const running = (id: string, what: string): ContainerRecord => {
    const c = find(id);
    if (c.state !== api.ContainerState.CONTAINER_RUNNING)
      throw failed(`failed to ${what}: container is in ${containerStateName(c.state)} state`);
    return c;
  };

  const create = (req: api.CreateContainerRequest): string => {
    const sb = state.sandbox(req.podSandboxId);
    if (sb === undefined) throw notFound(`sandbox "${req.podSandboxId}"`);
    if (sb.state !== api.PodSandboxState.SANDBOX_READY)
      throw new RpcFailure(
        state.traits.createInStoppedSandbox,
        `sandbox "${sb.id}" is not running`,
      );
    const config = req.config ?? api.ContainerConfig.create();
    const md = config.metadata;
    if (md === undefined || md.name === '')
      throw new RpcFailure(GrpcStatus.INVALID_ARGUMENT, 'container config must include metadata');
    const requested = config.image?.image ?? '';
    const image = state.images.resolve(requested);
    if (image === undefined) throw notFound(`image "${requested}"`);
    const pod = sb.config.metadata;
    const reservedName = `${md.name}_${pod?.name ?? ''}_${pod?.namespace ?? ''}_${pod?.uid ?? ''}_${md.attempt}`;
    const holder = state.names.get(reservedName);
    if (holder !== undefined)
      throw new RpcFailure(
        state.traits.nameReserved,
        `failed to reserve container name "${reservedName}": it is reserved for "${holder}"`,
      );
    const { path, log } = state.newContainerLog(sb, config.logPath);
    const c: ContainerRecord = {
      id: state.newId('container'),
      sandboxId: sb.id,
      config,
      imageId: image.id,
      imageName: state.images.displayName(image, requested),
      imageRef: [...image.repoDigests].sort()[0] ?? image.id,
      reservedName,
      logPath: path,
      log,
      createdAt: state.nowNs(),
      state: api.ContainerState.CONTAINER_CREATED,
      startedAt: 0n,
      finishedAt: 0n,
      exitCode: 0,
      reason: '',
      message: '',
      resources: config.linux?.resources ?? api.LinuxContainerResources.create(),
      stopExitCode: TERMINATED_EXIT_CODE,
      usage: {},
    };
    state.containers.set(c.id, c);
    state.names.set(reservedName, c.id);
    state.emitContainer(c, api.ContainerEventType.CONTAINER_CREATED_EVENT);
    return c.id;
  };

  const start = async (req: api.StartContainerRequest): Promise<void> => {
    const c = find(req.containerId);
    const notCreated = (): RpcFailure =>
      failed(`failed to start container "${c.id}": it is in ${containerStateName(c.state)} state`);
    if (c.state !== api.ContainerState.CONTAINER_CREATED) throw notCreated();
    let outcome: FakeStartOutcome | undefined;
    try {
      outcome = await ctx.scripts.onStart?.(state.info(c));
    } catch (err) {
      outcome = { startError: errorMessage(err) };
    }
    // The handler may have awaited: the container can be gone or started meanwhile.
    if (state.containers.get(c.id) !== c) throw notFound(`container "${c.id}"`);
    if (!isCreated(c)) throw notCreated();
    if (outcome?.startError !== undefined) {
      // No STARTED or STOPPED event: containerd 2.x publishes none for a failed start.
      c.state = api.ContainerState.CONTAINER_EXITED;
      c.finishedAt = state.nowNs();
      c.exitCode = START_ERROR_EXIT_CODE;
      c.reason = 'StartError';
      c.message = outcome.startError;
      throw failed(outcome.startError);
    }
    c.state = api.ContainerState.CONTAINER_RUNNING;
    c.startedAt = state.nowNs();
    c.stopExitCode = outcome?.stopExitCode ?? TERMINATED_EXIT_CODE;
    state.emitContainer(c, api.ContainerEventType.CONTAINER_STARTED_EVENT);
    // Transitions happen now; only the file writes are awaited, so nothing can interleave.
    const written = (outcome?.output ?? []).map((line) => c.log.append(state.nowNs(), line));
    if (outcome?.exitCode !== undefined)
      state.exit(c, outcome.exitCode, outcome.reason, outcome.message);
    await Promise.all(written);
  };

  const execSync = async (req: api.ExecSyncRequest): Promise<api.ExecSyncResponse> => {
    const c = running(req.containerId, 'exec in container');
    if (req.cmd.length === 0)
      throw new RpcFailure(GrpcStatus.INVALID_ARGUMENT, 'exec needs a command');
    let outcome: FakeExecOutcome;
    try {
      outcome = (await ctx.scripts.onExec?.(state.info(c), [...req.cmd])) ?? {};
    } catch (err) {
      if (err instanceof CriError) throw err;
      throw failed(`failed to exec in container: ${errorMessage(err)}`);
    }
    const timeoutMs = Number(req.timeout) * 1000;
    if (timeoutMs > 0 && (outcome.durationMs ?? 0) > timeoutMs)
      throw new RpcFailure(
        GrpcStatus.DEADLINE_EXCEEDED,
        `failed to exec in container: timeout ${req.timeout}s exceeded`,
      );
    return {
      stdout: toBuffer(outcome.stdout),
      stderr: toBuffer(outcome.stderr),
      exitCode: outcome.exitCode ?? 0,
    };
  };

  const streamUrl = (kind: string): string =>
    `${ctx.streamingUrl}/${kind}/${state.newId('stream').slice(0, 8)}`;

  return {
    createContainer: (req) => ({ containerId: create(req) }),

    startContainer: async (req) => {
      await start(req);
      return {};
    },

    stopContainer: (req) => {
      const c = state.container(req.containerId);
      if (c === undefined) {
        if (state.traits.stopMissingIsNotFound) throw notFound(`container "${req.containerId}"`);
        return {};
      }
      // The grace period is not waited out: the fake's processes answer SIGTERM at once.
      state.stopContainer(c, req.timeout > 0n);
      return {};
    },

    removeContainer: (req) => {
      const c = state.container(req.containerId);
      if (c !== undefined) state.removeContainer(c);
      return {};
    },

    listContainers: (req) => {
      const f = req.filter;
      let items = [...state.containers.values()];
      if (f !== undefined) {
        if (f.id !== '') {
          const only = state.container(f.id);
          items = only === undefined ? [] : [only];
        }
        if (f.podSandboxId !== '') {
          const sandboxId = state.sandbox(f.podSandboxId)?.id;
          items = items.filter((c) => c.sandboxId === sandboxId);
        }
        if (f.state !== undefined) items = items.filter((c) => c.state === f.state?.state);
        items = items.filter((c) => labelsMatch(c.config.labels, f.labelSelector));
      }
      return { containers: items.map((c) => state.containerItem(c)) };
    },

    containerStatus: (req) => {
      const c = find(req.containerId);
      const info = req.verbose
        ? { info: JSON.stringify({ id: c.id, sandboxID: c.sandboxId, logPath: c.logPath }) }
        : {};
      return { status: state.containerStatus(c), info };
    },

    updateContainerResources: (req) => {
      const c = find(req.containerId);
      if (c.state === api.ContainerState.CONTAINER_EXITED)
        throw failed(`failed to update resources: container "${c.id}" has exited`);
      if (req.linux !== undefined) c.resources = req.linux;
      return {};
    },

    reopenContainerLog: (req) => {
      running(req.containerId, 'reopen the container log');
      return {};
    },

    execSync,

    exec: (req) => {
      running(req.containerId, 'exec in container');
      return { url: streamUrl('exec') };
    },

    attach: (req) => {
      running(req.containerId, 'attach to container');
      return { url: streamUrl('attach') };
    },

    portForward: (req) => {
      const sb = state.sandbox(req.podSandboxId);
      if (sb === undefined) throw notFound(`sandbox "${req.podSandboxId}"`);
      if (sb.state !== api.PodSandboxState.SANDBOX_READY)
        throw failed(`sandbox "${sb.id}" is not running`);
      return { url: streamUrl('portforward') };
    },
  };
}
