/**
 * RuntimeService's pod sandbox RPCs. A sandbox gets an IP from the fake pod subnet
 * (none with host networking), and its name (name, namespace, uid, attempt) is reserved
 * until it is removed, so a second RunPodSandbox for the same attempt fails as on
 * containerd. Stop and remove are idempotent; stopping an unknown id is NotFound on 1.6.
 */
import { status as GrpcStatus } from '@grpc/grpc-js';
import * as api from '../gen/runtime/v1/api.ts';
import { RpcFailure, failed, notFound } from './rpc-failure.ts';
import { labelsMatch, type RuntimeContext, type SandboxRecord } from './state.ts';
import type { RuntimeHandlers } from './types.ts';

type SandboxHandlers = Pick<
  RuntimeHandlers,
  'runPodSandbox' | 'stopPodSandbox' | 'removePodSandbox' | 'podSandboxStatus' | 'listPodSandbox'
>;

/** The sandbox RPCs over the fake's state. */
export function sandboxHandlers(ctx: RuntimeContext): SandboxHandlers {
  const { state } = ctx;

  const run = (req: api.RunPodSandboxRequest): string => {
    const config = req.config ?? api.PodSandboxConfig.create();
    const md = config.metadata;
    if (md === undefined || md.name === '')
      throw new RpcFailure(GrpcStatus.INVALID_ARGUMENT, 'sandbox config must include metadata');
    const handler = req.runtimeHandler;
    if (handler !== '' && !ctx.runtimeHandlers.includes(handler))
      throw failed(`no runtime for "${handler}" is configured`);
    const reservedName = `${md.name}_${md.namespace}_${md.uid}_${md.attempt}`;
    const holder = state.names.get(reservedName);
    if (holder !== undefined)
      throw new RpcFailure(
        state.traits.nameReserved,
        `failed to reserve sandbox name "${reservedName}": it is reserved for "${holder}"`,
      );
    const hostNetwork =
      config.linux?.securityContext?.namespaceOptions?.network === api.NamespaceMode.NODE;
    // Host-network pods get no pod IP: the kubelet reports the node's addresses instead.
    const ip = hostNetwork ? '' : state.allocateIp();
    const sb: SandboxRecord = {
      id: state.newId('sandbox'),
      config,
      runtimeHandler: handler,
      createdAt: state.nowNs(),
      reservedName,
      state: api.PodSandboxState.SANDBOX_READY,
      ip,
    };
    state.sandboxes.set(sb.id, sb);
    state.names.set(reservedName, sb.id);
    state.emitSandbox(sb, api.ContainerEventType.CONTAINER_CREATED_EVENT);
    state.emitSandbox(sb, api.ContainerEventType.CONTAINER_STARTED_EVENT);
    return sb.id;
  };

  return {
    runPodSandbox: (req) => ({ podSandboxId: run(req) }),

    stopPodSandbox: (req) => {
      const sb = state.sandbox(req.podSandboxId);
      if (sb === undefined) {
        if (state.traits.stopMissingIsNotFound) throw notFound(`sandbox "${req.podSandboxId}"`);
        return {};
      }
      state.stopSandbox(sb);
      return {};
    },

    removePodSandbox: (req) => {
      const sb = state.sandbox(req.podSandboxId);
      if (sb !== undefined) state.removeSandbox(sb);
      return {};
    },

    podSandboxStatus: (req) => {
      const sb = state.sandbox(req.podSandboxId);
      if (sb === undefined) throw notFound(`sandbox "${req.podSandboxId}"`);
      const info = req.verbose
        ? { info: JSON.stringify({ id: sb.id, runtimeHandler: sb.runtimeHandler, ip: sb.ip }) }
        : {};
      return { status: state.sandboxStatus(sb), info, containersStatuses: [], timestamp: 0n };
    },

    listPodSandbox: (req) => {
      const f = req.filter;
      let items = [...state.sandboxes.values()];
      if (f !== undefined) {
        if (f.id !== '') {
          const only = state.sandbox(f.id);
          items = only === undefined ? [] : [only];
        }
        if (f.state !== undefined) items = items.filter((sb) => sb.state === f.state?.state);
        items = items.filter((sb) => labelsMatch(sb.config.labels, f.labelSelector));
      }
      return { items: items.map((sb) => state.podSandbox(sb)) };
    },
  };
}
