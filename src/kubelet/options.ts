/**
 * What the composition root (src/cmd/berth.ts) hands the Kubelet: its settings from the
 * KubeletConfiguration and flags, the clients and managers it is built on, and the
 * documented states of its life.
 */
import type { Taint } from 'kubernetes-types/core/v1.js';
import type { CgroupManager } from '../cm/types.ts';
import type { CriClient } from '../cri/index.ts';
import type { EventRecorder } from '../events/types.ts';
import type { KubeClient } from '../kube/types.ts';
import type { LogRotatePolicy } from '../logs/index.ts';
import type { KubeletMetrics } from '../metrics/registry.ts';
import type { NodeReserved } from '../nodestatus/build.ts';
import type { HostInfoProvider } from '../nodestatus/host-info.ts';
import type { KubeletServerOptions, ServingCertificateSource } from '../server/options.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import type { KmsgSource } from '../oom/types.ts';
import type { Mounter } from '../volumes/mounter.ts';
import type { EvictionOptions } from './eviction-wiring.ts';
import type { NodeShutdownWiringOptions } from './node-shutdown.ts';
import type { StaticPodOptions } from './static-pods.ts';

export interface KubeletOptions {
  readonly nodeName: string;
  readonly nodeIPs: readonly string[];
  readonly nodeLabels: Readonly<Record<string, string>>;
  readonly registerWithTaints: readonly Taint[];
  readonly providerID?: string;
  readonly podLogsDir: string;
  readonly cgroupRoot: string;
  readonly cgroupsPerQOS: boolean;
  readonly maxPods: number;
  readonly kubeletPort: number;
  readonly syncFrequencyMs: number;
  /**
   * Where the container log links go (--container-log-symlink-dir, upstream's fixed
   * /var/log/containers); undefined: no links (tests of the kubelet alone).
   */
  readonly containerLogSymlinkDir?: string;
  /** volumeStatsAggPeriod: how often pod volumes are measured; zero or less: never (default 1 min). */
  readonly volumeStatsAggPeriodMs?: number;
  readonly nodeStatusUpdateFrequencyMs: number;
  readonly nodeStatusReportFrequencyMs: number;
  readonly nodeStatusMaxImages: number;
  readonly nodeLeaseDurationSeconds: number;
  readonly maxParallelImagePulls: number;
  /** registryPullQPS / registryBurst (upstream 5 / 10); absent or qps 0: unthrottled. */
  readonly registryPull?: { readonly qps: number; readonly burst: number };
  readonly evictionMemoryBytes: number;
  readonly evictionNodefsFraction: number;
  /** kubeReserved + systemReserved, held back from allocatable. */
  readonly reserved?: NodeReserved;
  readonly clusterDNS: readonly string[];
  readonly clusterDomain: string;
  readonly resolvConf: string;
  /** --root-dir: per-pod volumes and files live under <rootDir>/pods. */
  readonly rootDir: string;
  /** The configured cgroup driver (used when the runtime does not say). */
  readonly cgroupDriver: 'cgroupfs' | 'systemd';
  readonly podPidsLimit: number;
  readonly allowedUnsafeSysctls?: readonly string[];
  /** containerLogMaxSize and friends; undefined: logs are never rotated. */
  readonly logRotation?: LogRotatePolicy;
  /** seccompDefault: RuntimeDefault for containers that set no profile. */
  readonly seccompDefault?: boolean;
  /** The node's hosts file, copied for hostNetwork pods (default /etc/hosts). */
  readonly nodeHostsFile?: string;
  /** The kubelet API (:10250) and healthz; undefined: not served (enableServer false). */
  readonly server?: Omit<KubeletServerOptions, 'nodeName' | 'podLogsDir'>;
  /** staticPodPath, staticPodURL and their check frequencies. */
  readonly staticPods?: StaticPodOptions;
  /** No API server (no --kubeconfig): static pods only, no registration, no API calls. */
  readonly standalone?: boolean;
  /** Graceful node shutdown; undefined or no periods: off (berth never touches D-Bus). */
  readonly nodeShutdown?: NodeShutdownWiringOptions;
  /** Node-pressure eviction and image GC; undefined: neither (unit tests). */
  readonly eviction?: EvictionOptions;
  /** memoryThrottlingFactor (MemoryQoS's memory.high on cgroup v2); default 0.9. */
  readonly memoryThrottlingFactor?: number;
  /** singleProcessOOMKill; null or absent: upstream's default (false on cgroup v2). */
  readonly singleProcessOOMKill?: boolean | null;
  /** featureGates as configured; a gate left out has upstream's v1.37 default. */
  readonly featureGates?: Readonly<Record<string, boolean | undefined>>;
  /** userNamespaces.idsPerPod: the IDs of each hostUsers: false pod; absent: 65536. */
  readonly userNamespacesIdsPerPod?: number | null;
}

export interface KubeletDeps {
  readonly kube: KubeClient;
  readonly cri: CriClient;
  readonly recorder: EventRecorder;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly host: HostInfoProvider;
  readonly metrics?: KubeletMetrics;
  /** The cgroup filesystem; without it berth makes no QoS or pod cgroups (unit tests). */
  readonly cgroups?: CgroupManager;
  /** The systemd driver's slices (cm/systemd.ts); without it they are left to the runtime. */
  readonly systemdCgroups?: CgroupManager;
  /** mount(8)/umount(8) by default. */
  readonly mounter?: Mounter;
  /** The rotating :10250 serving certificate (serverTLSBootstrap). */
  readonly servingCertificate?: ServingCertificateSource;
  /** The kernel log the OOM watcher follows (SystemOOM events); undefined: no watcher. */
  readonly kmsg?: KmsgSource;
}

export type KubeletState = 'NEW' | 'STARTING' | 'RUNNING' | 'STOPPING' | 'STOPPED' | 'FAILED';
