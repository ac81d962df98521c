/**
 * The normalized kubelet configuration berth runs with: a KubeletConfiguration
 * (kubelet.config.k8s.io/v1beta1) after upstream's defaults and the command-line
 * overrides. Field names are upstream's, except that durations are milliseconds with an
 * `Ms` suffix (`syncFrequency: 1m` -> `syncFrequencyMs: 60000`) and strings upstream
 * leaves empty for "not set" are null. Everything is deeply readonly (and frozen).
 */
import type { Taint } from './names.ts';

/** A string-keyed map that cannot be changed. */
export type Dict<V> = Readonly<Record<string, V>>;

export type CgroupDriver = 'cgroupfs' | 'systemd';
export type LoggingFormat = 'text' | 'json';
export type AuthorizationMode = 'AlwaysAllow' | 'Webhook';
export type HairpinMode = 'promiscuous-bridge' | 'hairpin-veth' | 'none';
export type ChangeDetectionStrategy = 'Get' | 'Cache' | 'Watch';
export type TopologyManagerPolicy = 'none' | 'best-effort' | 'restricted' | 'single-numa-node';
export type TopologyManagerScope = 'container' | 'pod';
export type MemoryReservationPolicy = 'None' | 'TieredReservation';
export type ImagePullCredentialsVerificationPolicy =
  'NeverVerify' | 'NeverVerifyPreloadedImages' | 'NeverVerifyAllowlistedImages' | 'AlwaysVerify';

/** How requests to the kubelet's server are authenticated. */
export interface KubeletAuthentication {
  readonly x509: {
    /** CA bundle for client certificates; null disables x509 authentication. */
    readonly clientCAFile: string | null;
  };
  readonly webhook: {
    /** Bearer tokens checked with TokenReview. Default true. */
    readonly enabled: boolean;
    /** Default 2m. */
    readonly cacheTTLMs: number;
  };
  readonly anonymous: {
    /** Default false. */
    readonly enabled: boolean;
  };
}

/** How requests to the kubelet's server are authorized. */
export interface KubeletAuthorization {
  /** Default Webhook (SubjectAccessReview). */
  readonly mode: AuthorizationMode;
  readonly webhook: {
    /** Default 5m. */
    readonly cacheAuthorizedTTLMs: number;
    /** Default 30s. */
    readonly cacheUnauthorizedTTLMs: number;
  };
}

/** Per-format logging options (upstream alpha). */
export interface OutputRoutingOptions {
  readonly splitStream: boolean;
  /** A quantity; "0" disables buffering. */
  readonly infoBufferSize: string;
}

/** component-base's LoggingConfiguration. */
export interface LoggingConfig {
  /** Default text. */
  readonly format: LoggingFormat;
  /** Default 5s. The file may give nanoseconds as a number, as upstream allows. */
  readonly flushFrequencyMs: number;
  /** klog verbosity. Default 0. */
  readonly verbosity: number;
  readonly vmodule: readonly { readonly filePattern: string; readonly verbosity: number }[];
  readonly options: {
    readonly text: OutputRoutingOptions;
    readonly json: OutputRoutingOptions;
  };
}

/** A shutdown grace period for pods at or above a priority. */
export interface ShutdownGracePeriodByPodPriority {
  readonly priority: number;
  readonly shutdownGracePeriodSeconds: number;
}

/** Memory reserved on one NUMA node (memory manager). */
export interface MemoryReservation {
  readonly numaNode: number;
  readonly limits: Dict<string>;
}

/** OpenTelemetry tracing. */
export interface TracingConfig {
  readonly endpoint: string | null;
  readonly samplingRatePerMillion: number | null;
}

/** The KubeletConfiguration, defaulted and normalized. See the file comment. */
export interface KubeletConfig {
  /** Serve the authenticated kubelet API. Default true. */
  readonly enableServer: boolean;
  /** Directory (or single file) of static pod manifests; null: none. */
  readonly staticPodPath: string | null;
  /** Default /var/log/pods. */
  readonly podLogsDir: string;
  /** Pod resync period. Default 1m. */
  readonly syncFrequencyMs: number;
  /** Static pod directory re-read period. Default 20s. */
  readonly fileCheckFrequencyMs: number;
  /** Static pod URL re-read period. Default 20s. */
  readonly httpCheckFrequencyMs: number;
  readonly staticPodURL: string | null;
  readonly staticPodURLHeader: Dict<readonly string[]>;
  /** Default 0.0.0.0. */
  readonly address: string;
  /** Default 10250. */
  readonly port: number;
  /** Unauthenticated read-only port; 0 (the default) disables it. */
  readonly readOnlyPort: number;
  readonly tlsCertFile: string | null;
  readonly tlsPrivateKeyFile: string | null;
  readonly tlsCipherSuites: readonly string[];
  readonly tlsCurvePreferences: readonly number[];
  readonly tlsMinVersion: string | null;
  /** Rotate the client certificate through CSRs. Default false. */
  readonly rotateCertificates: boolean;
  /** Request the serving certificate through CSRs. Default false. */
  readonly serverTLSBootstrap: boolean;
  readonly authentication: KubeletAuthentication;
  readonly authorization: KubeletAuthorization;
  /** 0 means unlimited. Default 5. */
  readonly registryPullQPS: number;
  /** Default 10. */
  readonly registryBurst: number;
  /** Null: upstream's default for the KubeletEnsureSecretPulledImages gate. */
  readonly imagePullCredentialsVerificationPolicy: ImagePullCredentialsVerificationPolicy | null;
  readonly preloadedImagesVerificationAllowlist: readonly string[];
  /** 0 means unlimited. Default 50. */
  readonly eventRecordQPS: number;
  /** Default 100. */
  readonly eventBurst: number;
  /** exec, attach, logs, port-forward, run. Default true. */
  readonly enableDebuggingHandlers: boolean;
  readonly enableContentionProfiling: boolean;
  /** 0 disables the healthz endpoint. Default 10248. */
  readonly healthzPort: number;
  /** Default 127.0.0.1. */
  readonly healthzBindAddress: string;
  /** OOM score of the kubelet process. Default -999. */
  readonly oomScoreAdj: number;
  readonly clusterDomain: string | null;
  readonly clusterDNS: readonly string[];
  /** Default 4h. */
  readonly streamingConnectionIdleTimeoutMs: number;
  /** How often node status is computed. Default 10s. */
  readonly nodeStatusUpdateFrequencyMs: number;
  /** How often status is posted without a change. Default 5m (or nodeStatusUpdateFrequency when only that is set). */
  readonly nodeStatusReportFrequencyMs: number;
  /** Default 40. */
  readonly nodeLeaseDurationSeconds: number;
  /** Default 2m. */
  readonly imageMinimumGCAgeMs: number;
  /** 0 (the default) disables age-based image GC. */
  readonly imageMaximumGCAgeMs: number;
  /** Default 85. */
  readonly imageGCHighThresholdPercent: number;
  /** Default 80. */
  readonly imageGCLowThresholdPercent: number;
  /** Default 1m. */
  readonly volumeStatsAggPeriodMs: number;
  readonly kubeletCgroups: string | null;
  readonly systemCgroups: string | null;
  readonly cgroupRoot: string | null;
  /** Default true. */
  readonly cgroupsPerQOS: boolean;
  /** Default cgroupfs (the runtime's answer to RuntimeConfig wins when it gives one). */
  readonly cgroupDriver: CgroupDriver;
  /** Default none. */
  readonly cpuManagerPolicy: 'none' | 'static';
  /** Null: decided from the cgroup version. */
  readonly singleProcessOOMKill: boolean | null;
  readonly cpuManagerPolicyOptions: Dict<string>;
  /** Default 10s. */
  readonly cpuManagerReconcilePeriodMs: number;
  /** Default None. */
  readonly memoryManagerPolicy: 'None' | 'Static';
  /** Default none. */
  readonly topologyManagerPolicy: TopologyManagerPolicy;
  /** Default container. */
  readonly topologyManagerScope: TopologyManagerScope;
  readonly topologyManagerPolicyOptions: Dict<string>;
  readonly qosReserved: Dict<string>;
  /** Deadline of CRI calls other than pulls and streams. Default 2m. */
  readonly runtimeRequestTimeoutMs: number;
  /** Default promiscuous-bridge. */
  readonly hairpinMode: HairpinMode;
  /** Default 110. */
  readonly maxPods: number;
  readonly podCIDR: string | null;
  /** -1 (the default): no per-pod limit beyond node allocatable. */
  readonly podPidsLimit: number;
  /** Base of pod DNS configuration; "" disables host DNS lookups. Default /etc/resolv.conf. */
  readonly resolvConf: string;
  readonly runOnce: boolean;
  /** Default true. */
  readonly cpuCFSQuota: boolean;
  /** Default 100ms. */
  readonly cpuCFSQuotaPeriodMs: number;
  /** -1: no cap. Default 50. */
  readonly nodeStatusMaxImages: number;
  /** Default 1000000. */
  readonly maxOpenFiles: number;
  /** Default application/vnd.kubernetes.protobuf. */
  readonly contentType: string;
  /** Default 50. */
  readonly kubeAPIQPS: number;
  /** Default 100. */
  readonly kubeAPIBurst: number;
  /** Default true unless maxParallelImagePulls >= 2. */
  readonly serializeImagePulls: boolean;
  /** Null: no limit (when pulls are not serialized). */
  readonly maxParallelImagePulls: number | null;
  /** Signal -> threshold. Default memory.available 100Mi, nodefs.available 10%, nodefs.inodesFree 5%, imagefs.available 15%. */
  readonly evictionHard: Dict<string>;
  readonly evictionSoft: Dict<string>;
  /** Signal -> grace period. */
  readonly evictionSoftGracePeriodMs: Dict<number>;
  /** Default 5m. */
  readonly evictionPressureTransitionPeriodMs: number;
  /** Upstream evictionMaxPodGracePeriod (seconds). Default 0. */
  readonly evictionMaxPodGracePeriodSeconds: number;
  readonly evictionMinimumReclaim: Dict<string>;
  /** Default false. */
  readonly mergeDefaultEvictionSettings: boolean;
  readonly podsPerCore: number;
  /** Default true. */
  readonly enableControllerAttachDetach: boolean;
  readonly protectKernelDefaults: boolean;
  /** Default true. */
  readonly makeIPTablesUtilChains: boolean;
  /** Deprecated upstream, no effect. Default 14. */
  readonly iptablesMasqueradeBit: number;
  /** Deprecated upstream, no effect. Default 15. */
  readonly iptablesDropBit: number;
  readonly featureGates: Dict<boolean>;
  /** Refuse to start with swap on. Default true. */
  readonly failSwapOn: boolean;
  readonly memorySwap: { readonly swapBehavior: 'NoSwap' | 'LimitedSwap' | null };
  /** A quantity. Default 10Mi. */
  readonly containerLogMaxSize: string;
  /** Default 5. */
  readonly containerLogMaxFiles: number;
  /** Default 1. */
  readonly containerLogMaxWorkers: number;
  /** Default 10s. */
  readonly containerLogMonitorIntervalMs: number;
  /** Default Watch. */
  readonly configMapAndSecretChangeDetectionStrategy: ChangeDetectionStrategy;
  /** Resource -> quantity. */
  readonly systemReserved: Dict<string>;
  /** Resource -> quantity. */
  readonly kubeReserved: Dict<string>;
  readonly reservedSystemCPUs: string | null;
  readonly showHiddenMetricsForVersion: string | null;
  readonly systemReservedCgroup: string | null;
  readonly kubeReservedCgroup: string | null;
  /** Default [pods]. */
  readonly enforceNodeAllocatable: readonly string[];
  readonly allowedUnsafeSysctls: readonly string[];
  /** Default /usr/libexec/kubernetes/kubelet-plugins/volume/exec/. */
  readonly volumePluginDir: string;
  readonly providerID: string | null;
  readonly kernelMemcgNotification: boolean;
  readonly logging: LoggingConfig;
  /** Default true. */
  readonly enableSystemLogHandler: boolean;
  readonly enableSystemLogQuery: boolean;
  /** 0 (the default) disables graceful node shutdown. */
  readonly shutdownGracePeriodMs: number;
  readonly shutdownGracePeriodCriticalPodsMs: number;
  readonly shutdownGracePeriodByPodPriority: readonly ShutdownGracePeriodByPodPriority[];
  readonly crashLoopBackOff: { readonly maxContainerRestartPeriodMs: number | null };
  readonly reservedMemory: readonly MemoryReservation[];
  /** Default true. */
  readonly enableProfilingHandler: boolean;
  /** Default true. */
  readonly enableDebugFlagsHandler: boolean;
  readonly seccompDefault: boolean;
  /** Default 0.9. */
  readonly memoryThrottlingFactor: number;
  /** Default None. */
  readonly memoryReservationPolicy: MemoryReservationPolicy;
  readonly registerWithTaints: readonly Taint[];
  /** Register the Node object. Default true. */
  readonly registerNode: boolean;
  readonly tracing: TracingConfig | null;
  /** Default true. */
  readonly localStorageCapacityIsolation: boolean;
  /** Default unix:///run/containerd/containerd.sock. */
  readonly containerRuntimeEndpoint: string;
  /** Null: the containerRuntimeEndpoint serves images too. */
  readonly imageServiceEndpoint: string | null;
  /**
   * Refuse to start on cgroup v1. Upstream defaults to true (since 1.35); berth honours
   * it only when set (file or --fail-cgroupv1), so null, not set, runs on cgroup v1.
   */
  readonly failCgroupV1: boolean | null;
  readonly userNamespaces: { readonly idsPerPod: number | null };
}
