/**
 * Cross-field and range checks on the final configuration (file, then defaults, then
 * flags), the rules of upstream's ValidateKubeletConfiguration plus a few berth adds
 * where upstream would fail later or misbehave (marked "berth:"). Checks that depend on
 * upstream feature gates are not made: berth has no feature-gate registry, so
 * `featureGates` is carried, not interpreted, except that a gate upstream locks to its
 * default cannot be set otherwise.
 */
import { isAbsolute, normalize } from 'node:path';
import { checkIP, checkTaint } from './names.ts';
import { isPercentage, isQuantity } from '../util/quantity.ts';
import type { KubeletConfig } from './types.ts';

/** One failed rule; `path` is the field as the file spells it. */
export interface ValidationIssue {
  readonly path: readonly (string | number)[];
  readonly message: string;
}

/** Eviction signals the kubelet understands on Linux. */
export const EVICTION_SIGNALS: ReadonlySet<string> = new Set([
  'memory.available',
  'allocatableMemory.available',
  'nodefs.available',
  'nodefs.inodesFree',
  'imagefs.available',
  'imagefs.inodesFree',
  'containerfs.available',
  'containerfs.inodesFree',
  'pid.available',
]);

const ENFORCEMENT_KEYS = [
  'pods',
  'system-reserved',
  'system-reserved-compressible',
  'kube-reserved',
  'kube-reserved-compressible',
  'none',
] as const;

const CPUSET = /^\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*$/;

type Issues = ValidationIssue[];

/**
 * Gates upstream v1.37 locks to their default (LockToDefault): setting one otherwise
 * fails at start there, so it does here too, with upstream's message.
 */
const LOCKED_FEATURE_GATES: Readonly<Record<string, boolean>> = {
  // GA in v1.36: image volumes (kuberuntime/image-volumes.ts) cannot be turned off.
  ImageVolume: true,
  // GA in v1.36: user namespaces (src/userns) and procMount Unmasked.
  UserNamespacesSupport: true,
  ProcMountType: true,
};

/**
 * Gates berth implements only in their default state (upstream lets them be turned off):
 * turning one off is refused at start rather than accepted and ignored.
 */
const UNSWITCHABLE_FEATURE_GATES: Readonly<Record<string, boolean>> = {
  // Beta and on since v1.34: QoS, pod requests, pod cgroups and container limits read
  // spec.resources (container/pod-level.ts) unconditionally.
  PodLevelResources: true,
  // Beta and on since v1.36: a RestartAllContainers rule restarts the pod in place
  // (kuberuntime/restart-all.ts), and the node declares it.
  RestartAllContainersOnContainerExits: true,
};

function check(issues: Issues, ok: boolean, path: string, message: string): void {
  if (!ok) issues.push({ path: path.split('.'), message });
}

function nonNegative(issues: Issues, value: number, path: string): void {
  check(issues, value >= 0, path, `must not be negative, got ${value}`);
}

function inRange(issues: Issues, value: number, min: number, max: number, path: string): void {
  check(issues, value >= min && value <= max, path, `must be from ${min} to ${max}, got ${value}`);
}

function zeroOrAtLeastASecond(issues: Issues, ms: number, path: string): void {
  check(issues, ms === 0 || ms >= 1000, path, `must be 0 or at least 1s, got ${ms}ms`);
}

function evictionMap(
  issues: Issues,
  map: Readonly<Record<string, string>>,
  field: string,
  allowPercent: boolean,
): void {
  for (const [signal, value] of Object.entries(map)) {
    if (!EVICTION_SIGNALS.has(signal)) {
      issues.push({
        path: [field, signal],
        message: `unknown eviction signal ${JSON.stringify(signal)}; expected one of ${[...EVICTION_SIGNALS].join(', ')}`,
      });
    } else if (!(isQuantity(value) || (allowPercent && isPercentage(value)))) {
      issues.push({
        path: [field, signal],
        message: `invalid threshold ${JSON.stringify(value)} (expected a quantity such as "100Mi" or a percentage such as "10%")`,
      });
    }
  }
}

function quantities(issues: Issues, map: Readonly<Record<string, string>>, field: string): void {
  for (const [name, value] of Object.entries(map)) {
    if (!isQuantity(value)) {
      issues.push({ path: [field, name], message: `invalid quantity ${JSON.stringify(value)}` });
    }
  }
}

function enforcement(issues: Issues, c: KubeletConfig): void {
  const list = c.enforceNodeAllocatable;
  const has = (key: string): boolean => list.includes(key);
  const field = 'enforceNodeAllocatable';
  if (has('system-reserved') && has('system-reserved-compressible')) {
    check(
      issues,
      false,
      field,
      '"system-reserved" and "system-reserved-compressible" exclude each other',
    );
  }
  if (has('kube-reserved') && has('kube-reserved-compressible')) {
    check(
      issues,
      false,
      field,
      '"kube-reserved" and "kube-reserved-compressible" exclude each other',
    );
  }
  const seen = new Set<string>();
  list.forEach((key, i) => {
    const at = [field, i];
    if (seen.has(key)) {
      issues.push({ path: at, message: `duplicate enforcement ${JSON.stringify(key)}` });
      return;
    }
    seen.add(key);
    if (!(ENFORCEMENT_KEYS as readonly string[]).includes(key)) {
      issues.push({
        path: at,
        message: `unknown enforcement ${JSON.stringify(key)}; expected one of ${ENFORCEMENT_KEYS.join(', ')}`,
      });
      return;
    }
    if (key === 'none') {
      if (list.length > 1) {
        issues.push({ path: at, message: '"none" must be the only enforcement' });
      }
      return;
    }
    if (key.startsWith('system-reserved') && c.systemReservedCgroup === null) {
      issues.push({ path: at, message: `${JSON.stringify(key)} requires systemReservedCgroup` });
    }
    if (key.startsWith('kube-reserved') && c.kubeReservedCgroup === null) {
      issues.push({ path: at, message: `${JSON.stringify(key)} requires kubeReservedCgroup` });
    }
    if (!c.cgroupsPerQOS) {
      issues.push({ path: at, message: `${JSON.stringify(key)} requires cgroupsPerQOS: true` });
    }
  });
}

function shutdown(issues: Issues, c: KubeletConfig): void {
  zeroOrAtLeastASecond(issues, c.shutdownGracePeriodMs, 'shutdownGracePeriod');
  zeroOrAtLeastASecond(
    issues,
    c.shutdownGracePeriodCriticalPodsMs,
    'shutdownGracePeriodCriticalPods',
  );
  check(
    issues,
    c.shutdownGracePeriodCriticalPodsMs <= c.shutdownGracePeriodMs,
    'shutdownGracePeriodCriticalPods',
    'must not be longer than shutdownGracePeriod',
  );
  check(
    issues,
    c.shutdownGracePeriodByPodPriority.length === 0 ||
      (c.shutdownGracePeriodMs === 0 && c.shutdownGracePeriodCriticalPodsMs === 0),
    'shutdownGracePeriodByPodPriority',
    'cannot be combined with shutdownGracePeriod or shutdownGracePeriodCriticalPods',
  );
}

function endpoint(issues: Issues, value: string, field: string): void {
  // berth runs on Linux only, where upstream supports unix sockets only.
  check(
    issues,
    value.startsWith('unix:///') || isAbsolute(value),
    field,
    `must be a unix socket such as "unix:///run/containerd/containerd.sock", got ${JSON.stringify(value)}`,
  );
}

function servingAndLimits(issues: Issues, c: KubeletConfig): void {
  inRange(issues, c.port, 1, 65535, 'port');
  inRange(issues, c.readOnlyPort, 0, 65535, 'readOnlyPort');
  inRange(issues, c.healthzPort, 0, 65535, 'healthzPort');
  for (const [field, value] of [
    ['address', c.address],
    ['healthzBindAddress', c.healthzBindAddress],
  ] as const) {
    const why = checkIP(value);
    if (why !== null) check(issues, false, field, why);
  }
  c.clusterDNS.forEach((ip, i) => {
    const why = checkIP(ip);
    if (why !== null) issues.push({ path: ['clusterDNS', i], message: why });
  });
  nonNegative(issues, c.eventBurst, 'eventBurst');
  nonNegative(issues, c.eventRecordQPS, 'eventRecordQPS');
  nonNegative(issues, c.kubeAPIBurst, 'kubeAPIBurst');
  nonNegative(issues, c.kubeAPIQPS, 'kubeAPIQPS');
  nonNegative(issues, c.registryBurst, 'registryBurst');
  nonNegative(issues, c.registryPullQPS, 'registryPullQPS');
  nonNegative(issues, c.maxOpenFiles, 'maxOpenFiles');
  nonNegative(issues, c.maxPods, 'maxPods');
  nonNegative(issues, c.podsPerCore, 'podsPerCore');
  check(
    issues,
    c.nodeLeaseDurationSeconds > 0,
    'nodeLeaseDurationSeconds',
    `must be greater than 0, got ${c.nodeLeaseDurationSeconds}`,
  );
  check(
    issues,
    c.nodeStatusMaxImages >= -1,
    'nodeStatusMaxImages',
    `must be -1 or greater, got ${c.nodeStatusMaxImages}`,
  );
  inRange(issues, c.oomScoreAdj, -1000, 1000, 'oomScoreAdj');
  inRange(issues, c.iptablesDropBit, 0, 31, 'iptablesDropBit');
  inRange(issues, c.iptablesMasqueradeBit, 0, 31, 'iptablesMasqueradeBit');
  if (c.maxParallelImagePulls !== null) {
    check(
      issues,
      c.maxParallelImagePulls >= 1,
      'maxParallelImagePulls',
      `must be at least 1, got ${c.maxParallelImagePulls}`,
    );
    check(
      issues,
      !(c.serializeImagePulls && c.maxParallelImagePulls > 1),
      'maxParallelImagePulls',
      'cannot be larger than 1 unless serializeImagePulls is false',
    );
  }
  check(issues, !c.runOnce, 'runOnce', 'run-once mode was removed upstream and must not be set');
  check(
    issues,
    c.systemCgroups === null || c.cgroupRoot !== null,
    'systemCgroups',
    'requires cgroupRoot',
  );
}

function images(issues: Issues, c: KubeletConfig): void {
  inRange(issues, c.imageGCHighThresholdPercent, 0, 100, 'imageGCHighThresholdPercent');
  inRange(issues, c.imageGCLowThresholdPercent, 0, 100, 'imageGCLowThresholdPercent');
  check(
    issues,
    c.imageGCLowThresholdPercent < c.imageGCHighThresholdPercent,
    'imageGCLowThresholdPercent',
    `must be less than imageGCHighThresholdPercent (${c.imageGCHighThresholdPercent}), got ${c.imageGCLowThresholdPercent}`,
  );
  nonNegative(issues, c.imageMinimumGCAgeMs, 'imageMinimumGCAge');
  nonNegative(issues, c.imageMaximumGCAgeMs, 'imageMaximumGCAge');
  check(
    issues,
    c.imageMaximumGCAgeMs === 0 || c.imageMaximumGCAgeMs > c.imageMinimumGCAgeMs,
    'imageMaximumGCAge',
    'must be greater than imageMinimumGCAge',
  );
  const policy = c.imagePullCredentialsVerificationPolicy;
  check(
    issues,
    c.preloadedImagesVerificationAllowlist.length === 0 ||
      policy === 'NeverVerifyAllowlistedImages',
    'preloadedImagesVerificationAllowlist',
    'requires imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages',
  );
}

function logsAndPaths(issues: Issues, c: KubeletConfig): void {
  check(
    issues,
    c.containerLogMaxFiles > 1,
    'containerLogMaxFiles',
    `must be greater than 1, got ${c.containerLogMaxFiles}`,
  );
  check(
    issues,
    c.containerLogMaxWorkers >= 1,
    'containerLogMaxWorkers',
    `must be at least 1, got ${c.containerLogMaxWorkers}`,
  );
  check(
    issues,
    c.containerLogMonitorIntervalMs >= 3000,
    'containerLogMonitorInterval',
    'must be at least 3s',
  );
  const dir = c.podLogsDir;
  check(
    issues,
    isAbsolute(dir),
    'podLogsDir',
    `must be an absolute path, got ${JSON.stringify(dir)}`,
  );
  // The directory appears in metrics labels, hence ASCII and normalized.
  check(
    issues,
    normalize(dir).replace(/(.)\/$/, '$1') === dir.replace(/(.)\/$/, '$1'),
    'podLogsDir',
    `must be a normalized path, got ${JSON.stringify(dir)}`,
  );
  check(issues, /^[\x20-\x7e]*$/.test(dir), 'podLogsDir', 'must contain ASCII characters only');
  c.logging.vmodule.forEach((item, i) => {
    if (item.filePattern === '' || /[,=]/.test(item.filePattern)) {
      issues.push({
        path: ['logging', 'vmodule', i, 'filePattern'],
        message: 'must be non-empty and contain no "," or "="',
      });
    }
  });
  check(
    issues,
    c.enableSystemLogHandler || !c.enableSystemLogQuery,
    'enableSystemLogQuery',
    'requires enableSystemLogHandler',
  );
  if (c.showHiddenMetricsForVersion !== null) {
    check(
      issues,
      /^\d+\.\d+$/.test(c.showHiddenMetricsForVersion),
      'showHiddenMetricsForVersion',
      'must be <major>.<minor>, e.g. "1.36"',
    );
  }
}

function resources(issues: Issues, c: KubeletConfig): void {
  evictionMap(issues, c.evictionHard, 'evictionHard', true);
  evictionMap(issues, c.evictionSoft, 'evictionSoft', true);
  evictionMap(issues, c.evictionMinimumReclaim, 'evictionMinimumReclaim', true);
  for (const signal of Object.keys(c.evictionSoft)) {
    const grace = c.evictionSoftGracePeriodMs[signal];
    if (grace === undefined || grace <= 0) {
      issues.push({
        path: ['evictionSoftGracePeriod', signal],
        message: `a grace period must be set for the soft threshold on ${signal}`,
      });
    }
  }
  for (const signal of Object.keys(c.evictionSoftGracePeriodMs)) {
    if (!EVICTION_SIGNALS.has(signal)) {
      issues.push({
        path: ['evictionSoftGracePeriod', signal],
        message: `unknown eviction signal ${JSON.stringify(signal)}`,
      });
    }
  }
  quantities(issues, c.systemReserved, 'systemReserved');
  quantities(issues, c.kubeReserved, 'kubeReserved');
  enforcement(issues, c);
  if (c.reservedSystemCPUs !== null) {
    check(
      issues,
      CPUSET.test(c.reservedSystemCPUs),
      'reservedSystemCPUs',
      `invalid CPU list ${JSON.stringify(c.reservedSystemCPUs)} (expected e.g. "0-1,4")`,
    );
    check(
      issues,
      c.systemReservedCgroup === null && c.kubeReservedCgroup === null,
      'reservedSystemCPUs',
      'cannot be combined with systemReservedCgroup or kubeReservedCgroup',
    );
  }
  check(
    issues,
    c.memoryThrottlingFactor > 0 && c.memoryThrottlingFactor <= 1,
    'memoryThrottlingFactor',
    `must be greater than 0 and at most 1, got ${c.memoryThrottlingFactor}`,
  );
  if (c.userNamespaces.idsPerPod !== null) {
    // Upstream's three checks (validation_linux.go), in its order and words.
    const n = c.userNamespaces.idsPerPod;
    const path = 'userNamespaces.idsPerPod';
    if (n < 65536) check(issues, false, path, 'must not be less than 65536');
    else if (n % 65536 !== 0) check(issues, false, path, 'must be a multiple of 65536');
    else if (n > 2 ** 32 - 1) check(issues, false, path, `must not be more than ${2 ** 32 - 1}`);
  }
}

function timing(issues: Issues, c: KubeletConfig): void {
  // berth: a zero or negative period would spin a ticker; upstream only defaults zero.
  for (const [field, ms] of [
    ['syncFrequency', c.syncFrequencyMs],
    ['fileCheckFrequency', c.fileCheckFrequencyMs],
    ['httpCheckFrequency', c.httpCheckFrequencyMs],
    ['nodeStatusUpdateFrequency', c.nodeStatusUpdateFrequencyMs],
    ['nodeStatusReportFrequency', c.nodeStatusReportFrequencyMs],
    ['runtimeRequestTimeout', c.runtimeRequestTimeoutMs],
  ] as const) {
    check(issues, ms > 0, field, `must be a positive duration, got ${ms}ms`);
  }
  nonNegative(issues, c.evictionPressureTransitionPeriodMs, 'evictionPressureTransitionPeriod');
  inRange(issues, c.cpuCFSQuotaPeriodMs, 1, 1000, 'cpuCFSQuotaPeriod');
  const restart = c.crashLoopBackOff.maxContainerRestartPeriodMs;
  if (restart !== null) {
    check(
      issues,
      restart >= 1000 && restart <= 300_000,
      'crashLoopBackOff.maxContainerRestartPeriod',
      'must be from 1s to 300s',
    );
  }
  shutdown(issues, c);
}

/** Every rule the configuration breaks (empty when it is valid). */
export function validateKubeletConfig(c: KubeletConfig): readonly ValidationIssue[] {
  const issues: Issues = [];
  servingAndLimits(issues, c);
  images(issues, c);
  logsAndPaths(issues, c);
  resources(issues, c);
  timing(issues, c);
  endpoint(issues, c.containerRuntimeEndpoint, 'containerRuntimeEndpoint');
  if (c.imageServiceEndpoint !== null)
    endpoint(issues, c.imageServiceEndpoint, 'imageServiceEndpoint');
  c.registerWithTaints.forEach((taint, i) => {
    const why = checkTaint(taint);
    if (why !== null) issues.push({ path: ['registerWithTaints', i], message: why });
  });
  for (const [gate, value] of Object.entries(c.featureGates)) {
    const locked = LOCKED_FEATURE_GATES[gate];
    if (locked !== undefined && value !== locked) {
      issues.push({
        path: ['featureGates', gate],
        message: `cannot set feature gate ${gate} to ${String(value)}, feature is locked to ${String(locked)}`,
      });
    }
    const only = UNSWITCHABLE_FEATURE_GATES[gate];
    if (only !== undefined && value !== only) {
      issues.push({
        path: ['featureGates', gate],
        message: `berth does not support feature gate ${gate}=${String(value)} yet; leave it at its default (${String(only)})`,
      });
    }
  }
  if (c.tracing?.samplingRatePerMillion != null) {
    inRange(
      issues,
      c.tracing.samplingRatePerMillion,
      0,
      1_000_000,
      'tracing.samplingRatePerMillion',
    );
  }
  return issues;
}
