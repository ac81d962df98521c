/**
 * Upstream's v1beta1 defaulting (SetDefaults_KubeletConfiguration), applied to a type-
 * checked file, or to nothing when berth runs without --config. Upstream treats a zero
 * value as "not set" for non-pointer fields (`syncFrequency: 0s` becomes 1m, `maxPods: 0`
 * becomes 110) while pointer fields keep an explicit zero (`registryPullQPS: 0` means
 * unlimited); `orDefault` and `??` below mirror which is which.
 *
 * berth differs on purpose in one place: without --config, upstream starts from
 * "legacy" flag defaults (anonymous auth on, webhook authn off, AlwaysAllow, read-only
 * port 10255). berth always uses the v1beta1 defaults, which are the secure ones.
 */
import { isAbsolute, resolve } from 'node:path';
import type { KubeletConfigurationFile } from './schema.ts';
import type { Dict, KubeletConfig, OutputRoutingOptions } from './types.ts';
import type { Taint, TaintEffect } from './names.ts';

const SECOND = 1000;
const MINUTE = 60 * SECOND;

/** Linux hard-eviction thresholds used when the file sets no evictionHard. */
export const DEFAULT_EVICTION_HARD: Dict<string> = Object.freeze({
  'memory.available': '100Mi',
  'nodefs.available': '10%',
  'nodefs.inodesFree': '5%',
  'imagefs.available': '15%',
});

/** Upstream's default for containerRuntimeEndpoint on Linux. */
export const DEFAULT_CONTAINER_RUNTIME_ENDPOINT = 'unix:///run/containerd/containerd.sock';

/** A non-pointer upstream field: zero (or absent) means "use the default". */
function orDefault(value: number | undefined, fallback: number): number {
  return value === undefined || value === 0 ? fallback : value;
}

/** A string field: absent or "" means the default. */
function strOr<T extends string>(value: T | '' | undefined, fallback: T): T {
  return value === undefined || value === '' ? fallback : value;
}

/** A string field without a default: absent or "" is null. */
function strOrNull<T extends string>(value: T | '' | undefined): T | null {
  return value === undefined || value === '' ? null : value;
}

function routing(
  o: { splitStream?: boolean | undefined; infoBufferSize?: string | undefined } | undefined,
): OutputRoutingOptions {
  return { splitStream: o?.splitStream ?? false, infoBufferSize: o?.infoBufferSize ?? '0' };
}

/**
 * Upstream resolves these path fields against the config file's directory, so a file
 * can say `staticPodPath: manifests` next to itself.
 */
function pathFrom(dir: string | null, value: string | undefined): string | undefined {
  if (value === undefined || value === '' || dir === null || isAbsolute(value)) return value;
  return resolve(dir, value);
}

/**
 * Defaults a type-checked KubeletConfiguration into berth's normalized form.
 * @param file the parsed file, or null for "no --config"
 * @param configDir the file's directory, for relative paths (null: leave them)
 */
export function applyDefaults(
  file: KubeletConfigurationFile | null,
  configDir: string | null = null,
): KubeletConfig {
  const f: Partial<KubeletConfigurationFile> = file ?? {};
  const auth = f.authentication;
  const authz = f.authorization;
  const log = f.logging;
  const dir = configDir;
  const nodeStatusUpdateFrequencyMs = orDefault(f.nodeStatusUpdateFrequency, 10 * SECOND);
  // Upstream keeps old files working: when only the update frequency is set, status is
  // also reported that often.
  const nodeStatusReportFrequencyMs = orDefault(
    f.nodeStatusReportFrequency,
    orDefault(f.nodeStatusUpdateFrequency, 5 * MINUTE),
  );
  const maxParallelImagePulls = f.maxParallelImagePulls ?? null;
  const taints: Taint[] = (f.registerWithTaints ?? []).map((t) => ({
    key: t.key,
    value: t.value ?? '',
    // validation.ts checks the effect; the type narrows it for consumers.
    effect: t.effect as TaintEffect,
  }));
  return {
    enableServer: f.enableServer ?? true,
    staticPodPath: strOrNull(pathFrom(dir, f.staticPodPath)),
    podLogsDir: strOr(pathFrom(dir, f.podLogsDir), '/var/log/pods'),
    syncFrequencyMs: orDefault(f.syncFrequency, MINUTE),
    fileCheckFrequencyMs: orDefault(f.fileCheckFrequency, 20 * SECOND),
    httpCheckFrequencyMs: orDefault(f.httpCheckFrequency, 20 * SECOND),
    staticPodURL: strOrNull(f.staticPodURL),
    staticPodURLHeader: f.staticPodURLHeader ?? {},
    address: strOr(f.address, '0.0.0.0'),
    port: orDefault(f.port, 10250),
    readOnlyPort: f.readOnlyPort ?? 0,
    tlsCertFile: strOrNull(pathFrom(dir, f.tlsCertFile)),
    tlsPrivateKeyFile: strOrNull(pathFrom(dir, f.tlsPrivateKeyFile)),
    tlsCipherSuites: f.tlsCipherSuites ?? [],
    tlsCurvePreferences: f.tlsCurvePreferences ?? [],
    tlsMinVersion: strOrNull(f.tlsMinVersion),
    rotateCertificates: f.rotateCertificates ?? false,
    serverTLSBootstrap: f.serverTLSBootstrap ?? false,
    authentication: {
      x509: { clientCAFile: strOrNull(pathFrom(dir, auth?.x509?.clientCAFile)) },
      webhook: {
        enabled: auth?.webhook?.enabled ?? true,
        cacheTTLMs: orDefault(auth?.webhook?.cacheTTL, 2 * MINUTE),
      },
      anonymous: { enabled: auth?.anonymous?.enabled ?? false },
    },
    authorization: {
      mode: strOr(authz?.mode, 'Webhook'),
      webhook: {
        cacheAuthorizedTTLMs: orDefault(authz?.webhook?.cacheAuthorizedTTL, 5 * MINUTE),
        cacheUnauthorizedTTLMs: orDefault(authz?.webhook?.cacheUnauthorizedTTL, 30 * SECOND),
      },
    },
    registryPullQPS: f.registryPullQPS ?? 5,
    registryBurst: orDefault(f.registryBurst, 10),
    imagePullCredentialsVerificationPolicy: strOrNull(f.imagePullCredentialsVerificationPolicy),
    preloadedImagesVerificationAllowlist: f.preloadedImagesVerificationAllowlist ?? [],
    eventRecordQPS: f.eventRecordQPS ?? 50,
    eventBurst: orDefault(f.eventBurst, 100),
    enableDebuggingHandlers: f.enableDebuggingHandlers ?? true,
    enableContentionProfiling: f.enableContentionProfiling ?? false,
    healthzPort: f.healthzPort ?? 10248,
    healthzBindAddress: strOr(f.healthzBindAddress, '127.0.0.1'),
    oomScoreAdj: f.oomScoreAdj ?? -999,
    clusterDomain: strOrNull(f.clusterDomain),
    clusterDNS: f.clusterDNS ?? [],
    streamingConnectionIdleTimeoutMs: orDefault(f.streamingConnectionIdleTimeout, 240 * MINUTE),
    nodeStatusUpdateFrequencyMs,
    nodeStatusReportFrequencyMs,
    nodeLeaseDurationSeconds: orDefault(f.nodeLeaseDurationSeconds, 40),
    imageMinimumGCAgeMs: orDefault(f.imageMinimumGCAge, 2 * MINUTE),
    imageMaximumGCAgeMs: f.imageMaximumGCAge ?? 0,
    imageGCHighThresholdPercent: f.imageGCHighThresholdPercent ?? 85,
    imageGCLowThresholdPercent: f.imageGCLowThresholdPercent ?? 80,
    volumeStatsAggPeriodMs: orDefault(f.volumeStatsAggPeriod, MINUTE),
    kubeletCgroups: strOrNull(f.kubeletCgroups),
    systemCgroups: strOrNull(f.systemCgroups),
    cgroupRoot: strOrNull(f.cgroupRoot),
    cgroupsPerQOS: f.cgroupsPerQOS ?? true,
    cgroupDriver: strOr(f.cgroupDriver, 'cgroupfs'),
    cpuManagerPolicy: strOr(f.cpuManagerPolicy, 'none'),
    singleProcessOOMKill: f.singleProcessOOMKill ?? null,
    cpuManagerPolicyOptions: f.cpuManagerPolicyOptions ?? {},
    cpuManagerReconcilePeriodMs: orDefault(f.cpuManagerReconcilePeriod, 10 * SECOND),
    memoryManagerPolicy: strOr(f.memoryManagerPolicy, 'None'),
    topologyManagerPolicy: strOr(f.topologyManagerPolicy, 'none'),
    topologyManagerScope: strOr(f.topologyManagerScope, 'container'),
    topologyManagerPolicyOptions: f.topologyManagerPolicyOptions ?? {},
    qosReserved: f.qosReserved ?? {},
    runtimeRequestTimeoutMs: orDefault(f.runtimeRequestTimeout, 2 * MINUTE),
    hairpinMode: strOr(f.hairpinMode, 'promiscuous-bridge'),
    maxPods: orDefault(f.maxPods, 110),
    podCIDR: strOrNull(f.podCIDR),
    // Upstream folds every negative value into -1 ("no per-pod limit").
    podPidsLimit: f.podPidsLimit === undefined || f.podPidsLimit < 0 ? -1 : f.podPidsLimit,
    resolvConf: pathFrom(dir, f.resolvConf) ?? '/etc/resolv.conf',
    runOnce: f.runOnce ?? false,
    cpuCFSQuota: f.cpuCFSQuota ?? true,
    cpuCFSQuotaPeriodMs: f.cpuCFSQuotaPeriod ?? 100,
    nodeStatusMaxImages: f.nodeStatusMaxImages ?? 50,
    maxOpenFiles: orDefault(f.maxOpenFiles, 1_000_000),
    contentType: strOr(f.contentType, 'application/vnd.kubernetes.protobuf'),
    kubeAPIQPS: f.kubeAPIQPS ?? 50,
    kubeAPIBurst: orDefault(f.kubeAPIBurst, 100),
    serializeImagePulls:
      f.serializeImagePulls ?? (maxParallelImagePulls === null || maxParallelImagePulls < 2),
    maxParallelImagePulls,
    evictionHard: f.mergeDefaultEvictionSettings
      ? { ...DEFAULT_EVICTION_HARD, ...f.evictionHard }
      : (f.evictionHard ?? DEFAULT_EVICTION_HARD),
    evictionSoft: f.evictionSoft ?? {},
    evictionSoftGracePeriodMs: f.evictionSoftGracePeriod ?? {},
    evictionPressureTransitionPeriodMs: orDefault(f.evictionPressureTransitionPeriod, 5 * MINUTE),
    evictionMaxPodGracePeriodSeconds: f.evictionMaxPodGracePeriod ?? 0,
    evictionMinimumReclaim: f.evictionMinimumReclaim ?? {},
    mergeDefaultEvictionSettings: f.mergeDefaultEvictionSettings ?? false,
    podsPerCore: f.podsPerCore ?? 0,
    enableControllerAttachDetach: f.enableControllerAttachDetach ?? true,
    protectKernelDefaults: f.protectKernelDefaults ?? false,
    makeIPTablesUtilChains: f.makeIPTablesUtilChains ?? true,
    iptablesMasqueradeBit: f.iptablesMasqueradeBit ?? 14,
    iptablesDropBit: f.iptablesDropBit ?? 15,
    featureGates: f.featureGates ?? {},
    failSwapOn: f.failSwapOn ?? true,
    memorySwap: { swapBehavior: strOrNull(f.memorySwap?.swapBehavior) },
    containerLogMaxSize: strOr(f.containerLogMaxSize, '10Mi'),
    containerLogMaxFiles: f.containerLogMaxFiles ?? 5,
    containerLogMaxWorkers: f.containerLogMaxWorkers ?? 1,
    containerLogMonitorIntervalMs: f.containerLogMonitorInterval ?? 10 * SECOND,
    configMapAndSecretChangeDetectionStrategy: strOr(
      f.configMapAndSecretChangeDetectionStrategy,
      'Watch',
    ),
    systemReserved: f.systemReserved ?? {},
    kubeReserved: f.kubeReserved ?? {},
    reservedSystemCPUs: strOrNull(f.reservedSystemCPUs),
    showHiddenMetricsForVersion: strOrNull(f.showHiddenMetricsForVersion),
    systemReservedCgroup: strOrNull(f.systemReservedCgroup),
    kubeReservedCgroup: strOrNull(f.kubeReservedCgroup),
    enforceNodeAllocatable: f.enforceNodeAllocatable ?? ['pods'],
    allowedUnsafeSysctls: f.allowedUnsafeSysctls ?? [],
    volumePluginDir: strOr(
      pathFrom(dir, f.volumePluginDir),
      '/usr/libexec/kubernetes/kubelet-plugins/volume/exec/',
    ),
    providerID: strOrNull(f.providerID),
    kernelMemcgNotification: f.kernelMemcgNotification ?? false,
    logging: {
      format: strOr(log?.format, 'text'),
      flushFrequencyMs: orDefault(log?.flushFrequency, 5 * SECOND),
      verbosity: log?.verbosity ?? 0,
      vmodule: log?.vmodule ?? [],
      options: { text: routing(log?.options?.text), json: routing(log?.options?.json) },
    },
    enableSystemLogHandler: f.enableSystemLogHandler ?? true,
    enableSystemLogQuery: f.enableSystemLogQuery ?? false,
    shutdownGracePeriodMs: f.shutdownGracePeriod ?? 0,
    shutdownGracePeriodCriticalPodsMs: f.shutdownGracePeriodCriticalPods ?? 0,
    shutdownGracePeriodByPodPriority: f.shutdownGracePeriodByPodPriority ?? [],
    crashLoopBackOff: {
      maxContainerRestartPeriodMs: f.crashLoopBackOff?.maxContainerRestartPeriod ?? null,
    },
    reservedMemory: f.reservedMemory ?? [],
    enableProfilingHandler: f.enableProfilingHandler ?? true,
    enableDebugFlagsHandler: f.enableDebugFlagsHandler ?? true,
    seccompDefault: f.seccompDefault ?? false,
    memoryThrottlingFactor: f.memoryThrottlingFactor ?? 0.9,
    memoryReservationPolicy: strOr(f.memoryReservationPolicy, 'None'),
    registerWithTaints: taints,
    registerNode: f.registerNode ?? true,
    tracing:
      f.tracing === undefined
        ? null
        : {
            endpoint: strOrNull(f.tracing.endpoint),
            samplingRatePerMillion: f.tracing.samplingRatePerMillion ?? null,
          },
    localStorageCapacityIsolation: f.localStorageCapacityIsolation ?? true,
    containerRuntimeEndpoint: strOr(f.containerRuntimeEndpoint, DEFAULT_CONTAINER_RUNTIME_ENDPOINT),
    imageServiceEndpoint: strOrNull(f.imageServiceEndpoint),
    failCgroupV1: f.failCgroupV1 ?? null,
    userNamespaces: { idsPerPod: f.userNamespaces?.idsPerPod ?? null },
  };
}
