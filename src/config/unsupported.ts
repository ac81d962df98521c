/**
 * KubeletConfiguration settings berth parses but does not act on (yet). Each is accepted
 * only at the value whose behaviour berth has — upstream's default, or the value that
 * turns the feature off — and any other value is refused at start, naming the field,
 * so that an operator never gets a setting that is silently dropped (a CPU manager that
 * pins nothing, a node that registers although told not to).
 *
 * Settings still being built elsewhere (eviction, image GC, graceful node shutdown) are
 * not listed here: their managers act on them (volumeStatsAggPeriod too: the volume
 * stats collector measures at that period, and zero or less turns it off as upstream).
 * Logging and profiling knobs whose defaults berth cannot honour either way
 * (enableProfilingHandler) are listed in
 * ARCHITECTURE.md's deliberate differences instead, since refusing their defaults
 * would refuse every config.
 */
import type { KubeletConfig } from './types.ts';

interface Setting {
  /** The field as the file spells it. */
  readonly path: string;
  /** What berth does instead, for the message. */
  readonly berth: string;
  /** Whether the configured value is one berth behaves like. */
  readonly ok: (c: KubeletConfig) => boolean;
  /** The value, for the message. */
  readonly value: (c: KubeletConfig) => unknown;
}

const empty = (v: object | null | undefined): boolean =>
  v === null || v === undefined || Object.keys(v).length === 0;
const unset = (v: string | null): boolean => v === null || v === '';
/** "0", "0Mi", "0.0": a quantity of zero (no buffer). */
const ZERO_QUANTITY = /^[+-]?0*(\.0*)?([eE][+-]?\d+|[a-zA-Z]*)$/;
const DEFAULT_VOLUME_PLUGIN_DIRS = new Set([
  '/usr/libexec/kubernetes/kubelet-plugins/volume/exec/',
  '/usr/libexec/kubernetes/kubelet-plugins/volume/exec',
]);

const SETTINGS: readonly Setting[] = [
  {
    path: 'cpuManagerPolicy',
    berth: 'runs every container on the shared CPU pool, as the "none" policy',
    ok: (c) => c.cpuManagerPolicy === 'none',
    value: (c) => c.cpuManagerPolicy,
  },
  {
    path: 'cpuManagerPolicyOptions',
    berth: 'has no CPU manager policy options',
    ok: (c) => empty(c.cpuManagerPolicyOptions),
    value: (c) => c.cpuManagerPolicyOptions,
  },
  {
    path: 'reservedSystemCPUs',
    berth: 'reserves no CPUs for the system (no static CPU manager)',
    ok: (c) => unset(c.reservedSystemCPUs),
    value: (c) => c.reservedSystemCPUs,
  },
  {
    path: 'memoryManagerPolicy',
    berth: 'pins no memory to NUMA nodes, as the "None" policy',
    ok: (c) => c.memoryManagerPolicy === 'None',
    value: (c) => c.memoryManagerPolicy,
  },
  {
    path: 'reservedMemory',
    berth: 'has no static memory manager to reserve NUMA memory for',
    ok: (c) => c.reservedMemory.length === 0,
    value: (c) => c.reservedMemory,
  },
  {
    path: 'topologyManagerPolicy',
    berth: 'aligns no resources, as the "none" policy',
    ok: (c) => c.topologyManagerPolicy === 'none',
    value: (c) => c.topologyManagerPolicy,
  },
  {
    path: 'topologyManagerPolicyOptions',
    berth: 'has no topology manager policy options',
    ok: (c) => empty(c.topologyManagerPolicyOptions),
    value: (c) => c.topologyManagerPolicyOptions,
  },
  {
    path: 'qosReserved',
    berth: 'reserves no memory across QoS tiers (the alpha QOSReserved feature)',
    ok: (c) => empty(c.qosReserved),
    value: (c) => c.qosReserved,
  },
  {
    path: 'cpuCFSQuota',
    berth: 'always enforces CPU limits with CFS quota',
    ok: (c) => c.cpuCFSQuota,
    value: (c) => c.cpuCFSQuota,
  },
  {
    path: 'cpuCFSQuotaPeriod',
    berth: 'uses the 100ms CFS period',
    ok: (c) => c.cpuCFSQuotaPeriodMs === 100,
    value: (c) => `${String(c.cpuCFSQuotaPeriodMs)}ms`,
  },
  {
    path: 'crashLoopBackOff.maxContainerRestartPeriod',
    berth: 'caps the restart back-off at 300s',
    ok: (c) =>
      c.crashLoopBackOff.maxContainerRestartPeriodMs === null ||
      c.crashLoopBackOff.maxContainerRestartPeriodMs === 300_000,
    value: (c) => `${String(c.crashLoopBackOff.maxContainerRestartPeriodMs)}ms`,
  },
  {
    path: 'runOnce',
    berth: 'always runs as a long-lived node agent',
    ok: (c) => !c.runOnce,
    value: (c) => c.runOnce,
  },
  {
    path: 'registerNode',
    berth: 'always registers its Node',
    ok: (c) => c.registerNode,
    value: (c) => c.registerNode,
  },
  {
    path: 'enableControllerAttachDetach',
    berth: 'leaves attach and detach to the controller',
    ok: (c) => c.enableControllerAttachDetach,
    value: (c) => c.enableControllerAttachDetach,
  },
  {
    path: 'enforceNodeAllocatable',
    berth: 'enforces allocatable on the pods cgroup only',
    ok: (c) => c.enforceNodeAllocatable.length === 1 && c.enforceNodeAllocatable[0] === 'pods',
    value: (c) => c.enforceNodeAllocatable,
  },
  {
    path: 'kubeletCgroups',
    berth: 'stays in the cgroup it was started in',
    ok: (c) => unset(c.kubeletCgroups),
    value: (c) => c.kubeletCgroups,
  },
  {
    path: 'systemCgroups',
    berth: 'moves no system processes',
    ok: (c) => unset(c.systemCgroups),
    value: (c) => c.systemCgroups,
  },
  {
    path: 'kubeReservedCgroup',
    berth: 'enforces no kube-reserved cgroup',
    ok: (c) => unset(c.kubeReservedCgroup),
    value: (c) => c.kubeReservedCgroup,
  },
  {
    path: 'systemReservedCgroup',
    berth: 'enforces no system-reserved cgroup',
    ok: (c) => unset(c.systemReservedCgroup),
    value: (c) => c.systemReservedCgroup,
  },
  {
    // TieredReservation also protects the pod and QoS cgroups and the reserved ones
    // (memory.min/low); berth sets only the containers' MemoryQoS keys.
    path: 'memoryReservationPolicy',
    berth: 'protects no memory with memory.min/low, as the "None" policy',
    ok: (c) => c.memoryReservationPolicy === 'None',
    value: (c) => c.memoryReservationPolicy,
  },
  {
    path: 'memorySwap.swapBehavior',
    berth: 'gives containers no swap, as NoSwap',
    ok: (c) => c.memorySwap.swapBehavior === null || c.memorySwap.swapBehavior === 'NoSwap',
    value: (c) => c.memorySwap.swapBehavior,
  },
  {
    // Upstream's default is off too; on, it arms a cgroup v1 memory.usage_in_bytes
    // eventfd through cgroup.event_control, which Node cannot create without a native
    // addon. berth's eviction manager sees memory pressure at its monitoring period.
    path: 'kernelMemcgNotification',
    berth:
      'detects memory pressure at evictionMonitoringPeriod only, without the kernel memcg notification',
    ok: (c) => !c.kernelMemcgNotification,
    value: (c) => c.kernelMemcgNotification,
  },
  {
    path: 'imageServiceEndpoint',
    berth: 'pulls images through containerRuntimeEndpoint',
    ok: (c) =>
      unset(c.imageServiceEndpoint) || c.imageServiceEndpoint === c.containerRuntimeEndpoint,
    value: (c) => c.imageServiceEndpoint,
  },
  {
    path: 'preloadedImagesVerificationAllowlist',
    berth: 'does not verify pull credentials of cached images',
    ok: (c) => c.preloadedImagesVerificationAllowlist.length === 0,
    value: (c) => c.preloadedImagesVerificationAllowlist,
  },
  {
    path: 'imagePullCredentialsVerificationPolicy',
    // Unset and NeverVerifyPreloadedImages are upstream's default, which berth does not
    // honour either (ARCHITECTURE.md, deliberate differences): refusing them would
    // refuse every config.
    berth: 'does not verify pull credentials of cached images, as NeverVerify',
    ok: (c) =>
      c.imagePullCredentialsVerificationPolicy === null ||
      c.imagePullCredentialsVerificationPolicy === 'NeverVerify' ||
      c.imagePullCredentialsVerificationPolicy === 'NeverVerifyPreloadedImages',
    value: (c) => c.imagePullCredentialsVerificationPolicy,
  },
  {
    path: 'configMapAndSecretChangeDetectionStrategy',
    berth: 'reads configMaps and secrets through a watch-based cache, as Watch',
    ok: (c) => c.configMapAndSecretChangeDetectionStrategy === 'Watch',
    value: (c) => c.configMapAndSecretChangeDetectionStrategy,
  },
  {
    // Upstream probes FlexVolume drivers in this directory; berth has no FlexVolume
    // support, so no directory changes anything (the default is a deliberate difference).
    path: 'volumePluginDir',
    berth: 'runs no FlexVolume drivers',
    ok: (c) => DEFAULT_VOLUME_PLUGIN_DIRS.has(c.volumePluginDir),
    value: (c) => c.volumePluginDir,
  },
  {
    path: 'enableContentionProfiling',
    berth: 'has no block profiling (no /debug/pprof handler)',
    ok: (c) => !c.enableContentionProfiling,
    value: (c) => c.enableContentionProfiling,
  },
  ...(['text', 'json'] as const).flatMap((format): Setting[] => [
    {
      path: `logging.options.${format}.splitStream`,
      berth: 'writes every log record to stderr',
      ok: (c) => !c.logging.options[format].splitStream,
      value: (c) => c.logging.options[format].splitStream,
    },
    {
      path: `logging.options.${format}.infoBufferSize`,
      berth: 'writes every log record at once, unbuffered',
      ok: (c) => ZERO_QUANTITY.test(c.logging.options[format].infoBufferSize),
      value: (c) => c.logging.options[format].infoBufferSize,
    },
  ]),
  {
    path: 'showHiddenMetricsForVersion',
    berth: 'has no hidden metrics to show',
    ok: (c) => unset(c.showHiddenMetricsForVersion),
    value: (c) => c.showHiddenMetricsForVersion,
  },
  {
    path: 'tracing',
    berth: 'exports no OpenTelemetry traces',
    ok: (c) => c.tracing === null,
    value: (c) => c.tracing,
  },
  {
    path: 'logging.vmodule',
    berth: 'logs at one verbosity for every module',
    ok: (c) => c.logging.vmodule.length === 0,
    value: (c) => c.logging.vmodule,
  },
  {
    path: 'tlsMinVersion',
    berth: 'serves TLS 1.2 at least (VersionTLS12, the default, or VersionTLS13)',
    ok: (c) =>
      c.tlsMinVersion === null ||
      c.tlsMinVersion === 'VersionTLS12' ||
      c.tlsMinVersion === 'VersionTLS13',
    value: (c) => c.tlsMinVersion,
  },
  {
    path: 'tlsCipherSuites',
    berth: "serves with OpenSSL's default TLS 1.2 suites and every TLS 1.3 suite",
    ok: (c) => c.tlsCipherSuites.length === 0,
    value: (c) => c.tlsCipherSuites,
  },
  {
    path: 'tlsCurvePreferences',
    berth: "offers OpenSSL's default key-exchange groups",
    ok: (c) => c.tlsCurvePreferences.length === 0,
    value: (c) => c.tlsCurvePreferences,
  },
];

/** Upstream's refusal (validateKubeletOSConfiguration), word for word. */
export const CGROUP_V1_MESSAGE =
  'kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release';

/**
 * Why berth must not start on this host given failCgroupV1, or undefined. Only an
 * explicit true refuses: upstream's default (true) would refuse every cgroup v1 host,
 * and berth supports v1 (ARCHITECTURE.md, deliberate differences).
 */
export function cgroupV1Problem(c: KubeletConfig, cgroupVersion: 'v1' | 'v2'): string | undefined {
  return c.failCgroupV1 === true && cgroupVersion === 'v1' ? CGROUP_V1_MESSAGE : undefined;
}

/** A refusal per setting set to a value berth would not honour (shaped as a validation issue). */
export function unsupportedSettings(
  c: KubeletConfig,
): { readonly path: readonly string[]; readonly message: string }[] {
  return SETTINGS.filter((s) => !s.ok(c)).map((s) => ({
    path: s.path.split('.'),
    message: `${JSON.stringify(s.value(c))} is not supported by berth yet: berth ${s.berth}; remove the field or set it to its default`,
  }));
}
