/**
 * The RuntimeService RPCs about the runtime itself and its measurements: Version,
 * Status, RuntimeConfig, stats and metrics. Stats exist only for running containers, as
 * on containerd, and report the usage a test set with `setUsage` (zero otherwise).
 */
import * as api from '../gen/runtime/v1/api.ts';
import { failed, notFound } from './rpc-failure.ts';
import {
  labelsMatch,
  type ContainerRecord,
  type RuntimeContext,
  type SandboxRecord,
} from './state.ts';
import type { RuntimeHandlers } from './types.ts';

type InfoHandlers = Pick<
  RuntimeHandlers,
  | 'version'
  | 'status'
  | 'runtimeConfig'
  | 'updateRuntimeConfig'
  | 'listMetricDescriptors'
  | 'listPodSandboxMetrics'
  | 'checkpointContainer'
  | 'containerStats'
  | 'listContainerStats'
  | 'podSandboxStats'
  | 'listPodSandboxStats'
>;

const METRIC_LABELS = ['pod', 'namespace', 'container', 'id', 'image'];

/** The runtime-level RPCs over the fake's state. */
export function runtimeInfoHandlers(ctx: RuntimeContext): InfoHandlers {
  const { state } = ctx;
  const isRunning = (c: ContainerRecord): boolean =>
    c.state === api.ContainerState.CONTAINER_RUNNING;

  const containerStats = (c: ContainerRecord): api.ContainerStats => {
    const at = state.nowNs();
    const u = c.usage;
    const memory = u.memoryWorkingSetBytes ?? 0n;
    return api.ContainerStats.fromPartial({
      attributes: {
        id: c.id,
        metadata: c.config.metadata,
        labels: c.config.labels,
        annotations: c.config.annotations,
      },
      cpu: { timestamp: at, usageCoreNanoSeconds: { value: u.cpuUsageCoreNanoSeconds ?? 0n } },
      memory: {
        timestamp: at,
        workingSetBytes: { value: memory },
        availableBytes: { value: 0n },
        usageBytes: { value: u.memoryUsageBytes ?? memory },
        rssBytes: { value: u.memoryRssBytes ?? 0n },
        pageFaults: { value: 0n },
        majorPageFaults: { value: 0n },
      },
      writableLayer: {
        timestamp: at,
        fsId: { mountpoint: state.images.mountpoint },
        usedBytes: { value: u.writableLayerBytes ?? 0n },
        inodesUsed: { value: 0n },
      },
    });
  };

  const sandboxStats = (sb: SandboxRecord): api.PodSandboxStats => {
    const at = state.nowNs();
    const containers = state.containersOf(sb.id).filter(isRunning);
    const sum = (pick: (c: ContainerRecord) => bigint | undefined): bigint =>
      containers.reduce((total, c) => total + (pick(c) ?? 0n), 0n);
    const eth0 = {
      name: 'eth0',
      rxBytes: { value: 0n },
      rxErrors: { value: 0n },
      txBytes: { value: 0n },
      txErrors: { value: 0n },
    };
    return api.PodSandboxStats.fromPartial({
      attributes: {
        id: sb.id,
        metadata: sb.config.metadata,
        labels: sb.config.labels,
        annotations: sb.config.annotations,
      },
      linux: {
        cpu: {
          timestamp: at,
          usageCoreNanoSeconds: { value: sum((c) => c.usage.cpuUsageCoreNanoSeconds) },
        },
        memory: {
          timestamp: at,
          workingSetBytes: { value: sum((c) => c.usage.memoryWorkingSetBytes) },
          usageBytes: {
            value: sum((c) => c.usage.memoryUsageBytes ?? c.usage.memoryWorkingSetBytes),
          },
        },
        network: { timestamp: at, defaultInterface: eth0, interfaces: [eth0] },
        // The pause process plus one per running container.
        process: { timestamp: at, processCount: { value: BigInt(containers.length + 1) } },
        containers: containers.map(containerStats),
      },
    });
  };

  const ready = (sb: SandboxRecord): boolean => sb.state === api.PodSandboxState.SANDBOX_READY;

  return {
    version: () => ({
      version: '0.1.0',
      runtimeName: 'containerd',
      runtimeVersion: ctx.runtimeVersion,
      runtimeApiVersion: 'v1',
    }),

    status: (req) => {
      const features = { recursiveReadOnlyMounts: true, userNamespaces: false };
      const v2 = state.traits.reportsHandlers;
      return {
        status: { conditions: [...ctx.conditions.values()].map((c) => ({ ...c })) },
        info: req.verbose ? { config: JSON.stringify({ runtimeVersion: ctx.runtimeVersion }) } : {},
        runtimeHandlers: v2
          ? ['', ...ctx.runtimeHandlers].map((name) =>
              api.RuntimeHandler.fromPartial({ name, features }),
            )
          : [],
        features: v2
          ? { supplementalGroupsPolicy: true, userNamespacesHostNetwork: true, mountOptions: false }
          : undefined,
      };
    },

    runtimeConfig: () => ({ linux: { cgroupDriver: ctx.cgroupDriver } }),

    updateRuntimeConfig: () => ({}),

    listMetricDescriptors: () => ({
      descriptors: [
        {
          name: 'container_cpu_usage_seconds_total',
          help: 'Cumulative CPU time consumed in seconds.',
          labelKeys: METRIC_LABELS,
        },
        {
          name: 'container_memory_working_set_bytes',
          help: 'Memory actively used by the container.',
          labelKeys: METRIC_LABELS,
        },
      ],
    }),

    listPodSandboxMetrics: () => ({
      podMetrics: [...state.sandboxes.values()].filter(ready).map((sb) => ({
        podSandboxId: sb.id,
        metrics: [],
        containerMetrics: state
          .containersOf(sb.id)
          .filter(isRunning)
          .map((c) => ({ containerId: c.id, metrics: [] })),
      })),
    }),

    checkpointContainer: (req) => {
      if (state.container(req.containerId) === undefined)
        throw notFound(`container "${req.containerId}"`);
      throw failed('failed to checkpoint container: the fake runtime has no criu');
    },

    containerStats: (req) => {
      const c = state.container(req.containerId);
      if (c === undefined) throw notFound(`container "${req.containerId}"`);
      // containerd has metrics only for a container with a live task.
      if (!isRunning(c)) throw failed(`no metrics for container "${c.id}": it is not running`);
      return { stats: containerStats(c) };
    },

    listContainerStats: (req) => {
      const f = req.filter;
      let items = [...state.containers.values()].filter(isRunning);
      if (f !== undefined) {
        if (f.id !== '') items = items.filter((c) => c.id === state.container(f.id)?.id);
        if (f.podSandboxId !== '')
          items = items.filter((c) => c.sandboxId === state.sandbox(f.podSandboxId)?.id);
        items = items.filter((c) => labelsMatch(c.config.labels, f.labelSelector));
      }
      return { stats: items.map(containerStats) };
    },

    podSandboxStats: (req) => {
      const sb = state.sandbox(req.podSandboxId);
      if (sb === undefined) throw notFound(`sandbox "${req.podSandboxId}"`);
      return { stats: sandboxStats(sb) };
    },

    listPodSandboxStats: (req) => {
      const f = req.filter;
      let items = [...state.sandboxes.values()].filter(ready);
      if (f !== undefined) {
        if (f.id !== '') items = items.filter((sb) => sb.id === state.sandbox(f.id)?.id);
        items = items.filter((sb) => labelsMatch(sb.config.labels, f.labelSelector));
      }
      return { stats: items.map(sandboxStats) };
    },
  };
}
