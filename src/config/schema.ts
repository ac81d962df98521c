/**
 * The zod schema of a KubeletConfiguration file (kubelet.config.k8s.io/v1beta1) as
 * written: every upstream field, all optional, every object strict so that a misspelled
 * field is an error instead of a silently ignored setting. Durations are parsed to
 * milliseconds here; defaults and cross-field rules come later (defaults.ts,
 * validation.ts), after the command-line overrides, as upstream orders them.
 *
 * Types follow upstream's Go types: durations must be strings (metav1.Duration),
 * quantities in maps must be strings, int32 fields must fit 32 bits.
 */
import { z } from 'zod';
import { parseGoDuration } from './duration.ts';
import { isQuantity } from '../util/quantity.ts';

/** Describes a decoded YAML value for messages: `"abc"`, `5`, `a list`, `a mapping`. */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return String(value);
  }
  if (typeof value === 'object') return 'a mapping';
  return typeof value;
}

const DURATION_HINT = 'expected a Go duration such as "1m0s", "10s", "1h30m" or "100ms"';

function durationFrom(text: string, ctx: z.RefinementCtx): number {
  try {
    return parseGoDuration(text);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: `${(err as Error).message} (${DURATION_HINT})` });
    return z.NEVER;
  }
}

const int32 = z
  .int()
  .min(-(2 ** 31))
  .max(2 ** 31 - 1);
const uint32 = z
  .int()
  .min(0)
  .max(2 ** 32 - 1);
const int64 = z.int();
const str = z.string();
const bool = z.boolean();
const strings = z.array(z.string());
const stringMap = z.record(z.string(), z.string());
/** metav1.Duration: a Go duration string, in milliseconds after parsing. */
const duration = z.string().transform(durationFrom);

const quantity = z.string().superRefine((text, ctx) => {
  if (!isQuantity(text)) {
    ctx.addIssue({
      code: 'custom',
      message: `invalid quantity ${JSON.stringify(text)} (expected e.g. "10Mi", "512Ki" or "1G")`,
    });
  }
});

/** resource.QuantityValue accepts a JSON number as well as a string. */
const quantityValue = z.unknown().transform((value, ctx): string => {
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value === 'string' && isQuantity(value)) return value;
  ctx.addIssue({
    code: 'custom',
    message: `expected a quantity such as "0" or "64Ki", got ${describeValue(value)}`,
  });
  return z.NEVER;
});

/** logging.flushFrequency: a duration string, or a number of nanoseconds. */
const timeOrDuration = z.unknown().transform((value, ctx): number => {
  if (typeof value === 'number' && Number.isInteger(value)) return value / 1e6;
  if (typeof value === 'string') return durationFrom(value, ctx);
  ctx.addIssue({
    code: 'custom',
    message: `expected a duration string or a number of nanoseconds, got ${describeValue(value)}`,
  });
  return z.NEVER;
});

/** A string enum where "" means "not set", as upstream's defaulting treats it. */
function oneOf<const V extends string>(...values: V[]): z.ZodEnum<{ [K in V | '']: K }> {
  return z.enum(['', ...values]);
}

const outputRouting = z.strictObject({
  splitStream: bool.optional(),
  infoBufferSize: quantityValue.optional(),
});

const logging = z.strictObject({
  format: oneOf('text', 'json').optional(),
  flushFrequency: timeOrDuration.optional(),
  verbosity: uint32.optional(),
  vmodule: z.array(z.strictObject({ filePattern: str, verbosity: uint32 })).optional(),
  options: z
    .strictObject({ text: outputRouting.optional(), json: outputRouting.optional() })
    .optional(),
});

const taint = z.strictObject({
  key: str,
  value: str.optional(),
  effect: str,
  // Upstream rejects it too: the API server stamps timeAdded itself.
  timeAdded: z
    .unknown()
    .superRefine((value, ctx) => {
      if (value !== undefined) {
        ctx.addIssue({ code: 'custom', message: 'must not be set (the API server sets it)' });
      }
    })
    .optional(),
});

/** The fields of a KubeletConfiguration, as upstream's v1beta1 Go type declares them. */
export const kubeletConfigurationSchema = z.strictObject({
  apiVersion: str,
  kind: str,
  enableServer: bool.optional(),
  staticPodPath: str.optional(),
  podLogsDir: str.optional(),
  syncFrequency: duration.optional(),
  fileCheckFrequency: duration.optional(),
  httpCheckFrequency: duration.optional(),
  staticPodURL: str.optional(),
  staticPodURLHeader: z.record(z.string(), strings).optional(),
  address: str.optional(),
  port: int32.optional(),
  readOnlyPort: int32.optional(),
  tlsCertFile: str.optional(),
  tlsPrivateKeyFile: str.optional(),
  tlsCipherSuites: strings.optional(),
  tlsCurvePreferences: z.array(int32).optional(),
  tlsMinVersion: str.optional(),
  rotateCertificates: bool.optional(),
  serverTLSBootstrap: bool.optional(),
  authentication: z
    .strictObject({
      x509: z.strictObject({ clientCAFile: str.optional() }).optional(),
      webhook: z
        .strictObject({ enabled: bool.optional(), cacheTTL: duration.optional() })
        .optional(),
      anonymous: z.strictObject({ enabled: bool.optional() }).optional(),
    })
    .optional(),
  authorization: z
    .strictObject({
      mode: oneOf('AlwaysAllow', 'Webhook').optional(),
      webhook: z
        .strictObject({
          cacheAuthorizedTTL: duration.optional(),
          cacheUnauthorizedTTL: duration.optional(),
        })
        .optional(),
    })
    .optional(),
  registryPullQPS: int32.optional(),
  registryBurst: int32.optional(),
  imagePullCredentialsVerificationPolicy: oneOf(
    'NeverVerify',
    'NeverVerifyPreloadedImages',
    'NeverVerifyAllowlistedImages',
    'AlwaysVerify',
  ).optional(),
  preloadedImagesVerificationAllowlist: strings.optional(),
  eventRecordQPS: int32.optional(),
  eventBurst: int32.optional(),
  enableDebuggingHandlers: bool.optional(),
  enableContentionProfiling: bool.optional(),
  healthzPort: int32.optional(),
  healthzBindAddress: str.optional(),
  oomScoreAdj: int32.optional(),
  clusterDomain: str.optional(),
  clusterDNS: strings.optional(),
  streamingConnectionIdleTimeout: duration.optional(),
  nodeStatusUpdateFrequency: duration.optional(),
  nodeStatusReportFrequency: duration.optional(),
  nodeLeaseDurationSeconds: int32.optional(),
  imageMinimumGCAge: duration.optional(),
  imageMaximumGCAge: duration.optional(),
  imageGCHighThresholdPercent: int32.optional(),
  imageGCLowThresholdPercent: int32.optional(),
  volumeStatsAggPeriod: duration.optional(),
  kubeletCgroups: str.optional(),
  systemCgroups: str.optional(),
  cgroupRoot: str.optional(),
  cgroupsPerQOS: bool.optional(),
  cgroupDriver: oneOf('cgroupfs', 'systemd').optional(),
  cpuManagerPolicy: oneOf('none', 'static').optional(),
  singleProcessOOMKill: bool.optional(),
  cpuManagerPolicyOptions: stringMap.optional(),
  cpuManagerReconcilePeriod: duration.optional(),
  memoryManagerPolicy: oneOf('None', 'Static').optional(),
  topologyManagerPolicy: oneOf('none', 'best-effort', 'restricted', 'single-numa-node').optional(),
  topologyManagerScope: oneOf('container', 'pod').optional(),
  topologyManagerPolicyOptions: stringMap.optional(),
  qosReserved: stringMap.optional(),
  runtimeRequestTimeout: duration.optional(),
  hairpinMode: oneOf('promiscuous-bridge', 'hairpin-veth', 'none').optional(),
  maxPods: int32.optional(),
  podCIDR: str.optional(),
  podPidsLimit: int64.optional(),
  resolvConf: str.optional(),
  runOnce: bool.optional(),
  cpuCFSQuota: bool.optional(),
  cpuCFSQuotaPeriod: duration.optional(),
  nodeStatusMaxImages: int32.optional(),
  maxOpenFiles: int64.optional(),
  contentType: str.optional(),
  kubeAPIQPS: int32.optional(),
  kubeAPIBurst: int32.optional(),
  serializeImagePulls: bool.optional(),
  maxParallelImagePulls: int32.optional(),
  evictionHard: stringMap.optional(),
  evictionSoft: stringMap.optional(),
  evictionSoftGracePeriod: z.record(z.string(), duration).optional(),
  evictionPressureTransitionPeriod: duration.optional(),
  evictionMaxPodGracePeriod: int32.optional(),
  evictionMinimumReclaim: stringMap.optional(),
  mergeDefaultEvictionSettings: bool.optional(),
  podsPerCore: int32.optional(),
  enableControllerAttachDetach: bool.optional(),
  protectKernelDefaults: bool.optional(),
  makeIPTablesUtilChains: bool.optional(),
  iptablesMasqueradeBit: int32.optional(),
  iptablesDropBit: int32.optional(),
  featureGates: z.record(z.string(), bool).optional(),
  failSwapOn: bool.optional(),
  memorySwap: z
    .strictObject({ swapBehavior: oneOf('NoSwap', 'LimitedSwap').optional() })
    .optional(),
  containerLogMaxSize: quantity.optional(),
  containerLogMaxFiles: int32.optional(),
  containerLogMaxWorkers: int32.optional(),
  containerLogMonitorInterval: duration.optional(),
  configMapAndSecretChangeDetectionStrategy: oneOf('Get', 'Cache', 'Watch').optional(),
  systemReserved: stringMap.optional(),
  kubeReserved: stringMap.optional(),
  reservedSystemCPUs: str.optional(),
  showHiddenMetricsForVersion: str.optional(),
  systemReservedCgroup: str.optional(),
  kubeReservedCgroup: str.optional(),
  enforceNodeAllocatable: strings.optional(),
  allowedUnsafeSysctls: strings.optional(),
  volumePluginDir: str.optional(),
  providerID: str.optional(),
  kernelMemcgNotification: bool.optional(),
  logging: logging.optional(),
  enableSystemLogHandler: bool.optional(),
  enableSystemLogQuery: bool.optional(),
  shutdownGracePeriod: duration.optional(),
  shutdownGracePeriodCriticalPods: duration.optional(),
  shutdownGracePeriodByPodPriority: z
    .array(z.strictObject({ priority: int32, shutdownGracePeriodSeconds: int64 }))
    .optional(),
  crashLoopBackOff: z.strictObject({ maxContainerRestartPeriod: duration.optional() }).optional(),
  reservedMemory: z.array(z.strictObject({ numaNode: int32, limits: stringMap })).optional(),
  enableProfilingHandler: bool.optional(),
  enableDebugFlagsHandler: bool.optional(),
  seccompDefault: bool.optional(),
  memoryThrottlingFactor: z.number().optional(),
  memoryReservationPolicy: oneOf('None', 'TieredReservation').optional(),
  registerWithTaints: z.array(taint).optional(),
  registerNode: bool.optional(),
  tracing: z
    .strictObject({ endpoint: str.optional(), samplingRatePerMillion: int32.optional() })
    .optional(),
  localStorageCapacityIsolation: bool.optional(),
  containerRuntimeEndpoint: str.optional(),
  imageServiceEndpoint: str.optional(),
  failCgroupV1: bool.optional(),
  userNamespaces: z.strictObject({ idsPerPod: int64.optional() }).optional(),
});

/** A KubeletConfiguration file after type checking: durations in ms, nothing defaulted. */
export type KubeletConfigurationFile = z.output<typeof kubeletConfigurationSchema>;

/**
 * The field names a strict object accepts at `path` in the schema, for "did you mean"
 * suggestions. Empty when the path does not lead to an object.
 */
export function knownFields(path: readonly PropertyKey[]): readonly string[] {
  let schema: z.ZodType = kubeletConfigurationSchema;
  for (const segment of [...path, null]) {
    // Look through wrappers: optional fields, transforms, arrays (numeric segments).
    for (;;) {
      if (schema instanceof z.ZodOptional) schema = schema.unwrap() as z.ZodType;
      else if (schema instanceof z.ZodPipe) schema = schema.in as z.ZodType;
      else break;
    }
    if (segment === null) break;
    if (typeof segment === 'number' && schema instanceof z.ZodArray) {
      schema = schema.element as z.ZodType;
    } else if (schema instanceof z.ZodObject && typeof segment === 'string') {
      const next = (schema.shape as Record<string, z.ZodType | undefined>)[segment];
      if (next === undefined) return [];
      schema = next;
    } else {
      return [];
    }
  }
  return schema instanceof z.ZodObject ? Object.keys(schema.shape) : [];
}
