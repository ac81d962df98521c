/**
 * The parts of the composition root that only translate the kubelet's options into a
 * manager's: the CRI runtime config (DNS, seccomp, hugepages, cgroup parent), the node
 * status manager, and the kubelet API server with its stats provider. Kept apart from kubelet.ts so the root
 * reads as the list of managers and their order.
 */
import { join } from 'node:path';
import type { NodeStatus, Pod } from 'kubernetes-types/core/v1.js';
import type { PodCgroups } from '../cm/pod-cgroups.ts';
import type { CriClient } from '../cri/index.ts';
import { podTarget } from '../events/targets.ts';
import type { EventRecorder } from '../events/types.ts';
import type { KubeClient } from '../kube/types.ts';
import type { RuntimeCache } from '../pleg/types.ts';
import type { KubeletMetrics } from '../metrics/registry.ts';
import { NodeStatusManager } from '../nodestatus/manager.ts';
import { declaredFeatures } from '../nodestatus/build.ts';
import type { HostInfoProvider } from '../nodestatus/host-info.ts';
import type { ServingCertificateSource } from '../server/options.ts';
import { KubeletServer } from '../server/server.ts';
import { CriStatsProvider } from '../stats/cri-provider.ts';
import { ProcHostStats } from '../stats/host.ts';
import type { VolumeStatsSource } from '../stats/types.ts';
import { diskUsernsHost } from '../userns/host.ts';
import { UsernsManager } from '../userns/manager.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import { parseQuantity } from '../util/quantity.ts';
import { podDnsConfig, readResolvConf } from './dns.ts';
import type { KubeletOptions } from './options.ts';
import type { UnifiedOptions } from '../kuberuntime/memory-qos.ts';
import type { RuntimeConfigOptions } from '../kuberuntime/runtime-config.ts';

const bytes = (q: string | undefined): number | undefined =>
  q === undefined ? undefined : Math.floor(parseQuantity(q));

/**
 * The settings of each container's CRI `unified` map (kuberuntime/memory-qos.ts), read
 * when a container is created or resized; undefined off cgroup v2, where none is set.
 */
export function unifiedOf(
  options: KubeletOptions,
  nodeStatus: () => NodeStatus | undefined,
  cgroupVersion: 'v1' | 'v2' | undefined,
): (() => UnifiedOptions) | undefined {
  if (cgroupVersion !== 'v2') return undefined;
  // MemoryQoS is beta and on by default in v1.37; it only acts on cgroup v2.
  const memoryQos = options.featureGates?.['MemoryQoS'] !== false;
  return () => ({
    cgroupV2: true,
    singleProcessOOMKill: options.singleProcessOOMKill ?? null,
    ...(memoryQos && {
      memoryQos: {
        throttlingFactor: options.memoryThrottlingFactor ?? 0.9,
        allocatableMemoryBytes: bytes(nodeStatus()?.allocatable?.['memory']),
      },
    }),
  });
}

/** The runtime config PodSync builds CRI sandbox and container configs with. */
export function runtimeConfigOf(
  options: KubeletOptions,
  recorder: EventRecorder,
  nodeStatus: () => NodeStatus | undefined,
  podCgroups: PodCgroups | undefined,
  cgroupVersion: 'v1' | 'v2' | undefined,
): RuntimeConfigOptions {
  const unified = unifiedOf(options, nodeStatus, cgroupVersion);
  const hostResolv = readResolvConf(options.resolvConf);
  // Upstream's nodeRef: the node's name doubles as its UID.
  const nodeTarget = { kind: 'Node', name: options.nodeName, uid: options.nodeName } as const;
  return {
    podLogsDir: options.podLogsDir,
    cgroupRoot: options.cgroupRoot,
    cgroupsPerQOS: options.cgroupsPerQOS,
    nodeName: options.nodeName,
    clusterDomain: options.clusterDomain,
    dns: (pod: Pod) =>
      podDnsConfig(pod, {
        host: hostResolv,
        clusterDNS: options.clusterDNS,
        clusterDomain: options.clusterDomain,
        events: {
          pod: (reason, message) => {
            recorder.event(podTarget(pod), 'Warning', reason, message);
          },
          node: (reason, message) => {
            recorder.event(nodeTarget, 'Warning', reason, message);
          },
        },
      }),
    seccompProfileRoot: join(options.rootDir, 'seccomp'),
    seccompDefault: options.seccompDefault ?? false,
    hugePageSizes: () =>
      Object.keys(nodeStatus()?.capacity ?? {}).filter((k) => k.startsWith('hugepages-')),
    memoryCapacityBytes: () => bytes(nodeStatus()?.capacity?.['memory']),
    ...(unified !== undefined && { unified }),
    ...(podCgroups !== undefined && {
      cgroupParent: (pod: Pod) => podCgroups.cgroupParent(pod),
    }),
  };
}

/** The user namespace manager over the root directory's pods and the runtime's handlers. */
export function usernsManagerOf(
  options: KubeletOptions,
  cri: CriClient,
  logger: Logger,
): UsernsManager {
  return new UsernsManager({
    host: diskUsernsHost({
      rootDir: options.rootDir,
      runtime: cri.runtime,
      maxPods: options.maxPods,
    }),
    idsPerPod: options.userNamespacesIdsPerPod ?? null,
    logger: logger.child({ component: 'userns' }),
  });
}

export interface ServerWiring {
  readonly kube: KubeClient;
  readonly cri: CriClient;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics?: KubeletMetrics;
  readonly servingCertificate?: ServingCertificateSource;
  readonly pods: () => ReadonlyMap<string, Pod>;
  readonly runtimeCache: RuntimeCache;
  readonly syncLoopHealth: () => string | undefined;
  /** The pods' measured volumes (the volume stats collector's cache). */
  readonly volumes?: VolumeStatsSource;
}

/** The kubelet API (:10250 and healthz), or undefined when the server is turned off. */
export function kubeletServerOf(
  options: KubeletOptions,
  w: ServerWiring,
): KubeletServer | undefined {
  if (options.server === undefined) return undefined;
  const { kube, cri, clock, logger, metrics } = w;
  return new KubeletServer(
    { ...options.server, nodeName: options.nodeName, podLogsDir: options.podLogsDir },
    {
      kube,
      cri,
      clock,
      logger: logger.child({ component: 'server' }),
      pods: w.pods,
      runtimeCache: w.runtimeCache,
      ...(metrics !== undefined && { metrics }),
      stats: new CriStatsProvider({
        cri,
        host: new ProcHostStats(),
        clock,
        logger: logger.child({ component: 'stats' }),
        nodeName: options.nodeName,
        rootDir: options.rootDir,
        podLogsDir: options.podLogsDir,
        ...(w.volumes !== undefined && { volumes: w.volumes }),
      }),
      syncLoopHealth: w.syncLoopHealth,
      ...(w.servingCertificate !== undefined && { certificate: w.servingCertificate }),
    },
  );
}

/** What the node status manager reads from the other managers. */
export interface NodeStatusWiring {
  readonly kube: KubeClient;
  readonly cri: CriClient;
  readonly recorder: EventRecorder;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly host: HostInfoProvider;
  /** Eviction's node conditions (MemoryPressure, DiskPressure, PIDPressure). */
  readonly pressure: () => readonly string[];
  readonly volumesInUse: () => readonly string[];
  /** PLEG, pod source and node shutdown problems: each one makes the Node NotReady. */
  readonly healthProblems: () => readonly string[];
}

/** The node status manager (registration, status, images) for the kubelet's options. */
export function nodeStatusManagerOf(
  options: KubeletOptions,
  w: NodeStatusWiring,
): NodeStatusManager {
  return new NodeStatusManager({
    client: w.kube,
    clock: w.clock,
    logger: w.logger.child({ component: 'node-status' }),
    host: w.host,
    runtime: w.cri.runtime,
    images: w.cri.image,
    maxImages: options.nodeStatusMaxImages,
    recorder: w.recorder,
    nodeName: options.nodeName,
    labels: options.nodeLabels,
    taints: options.registerWithTaints,
    ...(options.providerID !== undefined && { providerID: options.providerID }),
    nodeIPs: options.nodeIPs,
    kubeletPort: options.kubeletPort,
    declaredFeatures: declaredFeatures(options.featureGates),
    maxPods: options.maxPods,
    updateFrequencyMs: options.nodeStatusUpdateFrequencyMs,
    reportFrequencyMs: options.nodeStatusReportFrequencyMs,
    evictionMemoryBytes: options.evictionMemoryBytes,
    evictionNodefsFraction: options.evictionNodefsFraction,
    ...(options.reserved !== undefined && { reserved: options.reserved }),
    pressure: w.pressure,
    volumesInUse: w.volumesInUse,
    healthProblems: w.healthProblems,
  });
}
