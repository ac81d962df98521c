/**
 * The kubelet's Prometheus metrics, named, typed, labelled and bucketed as upstream's
 * pkg/kubelet/metrics, pkg/kubelet/server/metrics and pkg/kubelet/prober, so existing
 * dashboards and alerts work against berth unchanged.
 *
 * Two registries, one per endpoint as upstream: `registry` for /metrics and
 * `probesRegistry` for /metrics/probes. Nothing here is global: the composition root
 * builds one KubeletMetrics and hands it to each manager; a manager given none records
 * nothing (every recording helper accepts `undefined`).
 */
import { Counter, Gauge, Histogram, Registry, type LabelValues } from 'prom-client';
import type { CriMetrics } from '../cri/metrics.ts';
import type { ProberMetrics, ProbeMetricsSample } from '../prober/worker.ts';
import type { PodVolumeStats, VolumeStats } from '../stats/types.ts';

/** Prometheus' DefBuckets (also prom-client's default), used by most kubelet histograms. */
export const DEFAULT_BUCKETS: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

/** `count` buckets from `start`, each `factor` times the previous (Prometheus' ExponentialBuckets). */
export function exponentialBuckets(start: number, factor: number, count: number): number[] {
  const out: number[] = [];
  for (let i = 0, b = start; i < count; i++, b *= factor) out.push(Number(b.toPrecision(12)));
  return out;
}

const POD_START_BUCKETS = [
  0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800,
  2700, 3600,
];
const IMAGE_PULL_BUCKETS = [
  1, 5, 10, 20, 30, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600,
];
const STATUS_SYNC_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 20, 30, 45, 60];

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
/** Lower bounds (exclusive) of upstream's image_size_in_bytes label values. */
const IMAGE_SIZE_BUCKETS: readonly (readonly [number, string])[] = [
  [0, '0-10MB'],
  [10 * MiB, '10MB-100MB'],
  [100 * MiB, '100MB-500MB'],
  [500 * MiB, '500MB-1GB'],
  [1 * GiB, '1GB-5GB'],
  [5 * GiB, '5GB-10GB'],
  [10 * GiB, '10GB-20GB'],
  [20 * GiB, '20GB-30GB'],
  [30 * GiB, '30GB-40GB'],
  [40 * GiB, '40GB-60GB'],
  [60 * GiB, '60GB-100GB'],
  [100 * GiB, 'GT100GB'],
];

/** The image_size_in_bytes label of kubelet_image_pull_duration_seconds ("N/A" when unknown). */
export function imageSizeBucket(sizeBytes: number): string {
  if (!(sizeBytes > 0)) return 'N/A';
  for (let i = IMAGE_SIZE_BUCKETS.length - 1; i >= 0; i--) {
    const bucket = IMAGE_SIZE_BUCKETS[i];
    if (bucket !== undefined && sizeBytes > bucket[0]) return bucket[1];
  }
  return 'N/A';
}

/** What the prober reports after each probe; the prober owns the shape (src/prober/worker.ts). */
export type { ProberMetrics };
export type ProbeObservation = ProbeMetricsSample;

/** The state of the runtime the running_pods / running_containers gauges report. */
export interface RuntimeCounts {
  /** Pods with a ready sandbox. */
  readonly runningPods: number;
  /** Containers by upstream container_state: running, exited, created, unknown. */
  readonly containers: Readonly<Record<'running' | 'exited' | 'created' | 'unknown', number>>;
}

export interface KubeletMetricsOptions {
  /** Sets kubelet_node_name{node} 1, as upstream does at start-up. */
  readonly nodeName?: string;
}

/** Every kubelet metric berth records, in the /metrics and /metrics/probes registries. */
export class KubeletMetrics {
  /** Served on /metrics. */
  readonly registry = new Registry();
  /** Served on /metrics/probes. */
  readonly probesRegistry = new Registry();

  readonly nodeName: Gauge<'node'>;
  readonly podWorkerDuration: Histogram<'operation_type'>;
  readonly podStartDuration: Histogram;
  readonly podStartSLIDuration: Histogram;
  readonly podStatusSyncDuration: Histogram;
  readonly plegRelistDuration: Histogram;
  readonly plegRelistInterval: Histogram;
  readonly plegLastSeen: Gauge;
  readonly plegDiscardEvents: Counter;
  readonly runningPods: Gauge;
  readonly runningContainers: Gauge<'container_state'>;
  readonly startedPodsTotal: Counter;
  readonly startedPodsErrorsTotal: Counter;
  readonly startedUserNamespacedPodsTotal: Counter;
  readonly startedUserNamespacedPodsErrorsTotal: Counter;
  readonly startedContainersTotal: Counter<'container_type'>;
  readonly startedContainersErrorsTotal: Counter<'container_type' | 'code'>;
  readonly imageVolumeRequestedTotal: Counter;
  readonly imageVolumeMountedSucceedTotal: Counter;
  readonly imageVolumeMountedErrorsTotal: Counter;
  readonly runtimeOperations: Counter<'operation_type'>;
  readonly runtimeOperationsDuration: Histogram<'operation_type'>;
  readonly runtimeOperationsErrors: Counter<'operation_type'>;
  readonly runPodSandboxDuration: Histogram<'runtime_handler'>;
  readonly runPodSandboxErrors: Counter<'runtime_handler'>;
  readonly imagePullDuration: Histogram<'image_size_in_bytes'>;
  readonly evictions: Counter<'eviction_signal'>;
  readonly evictionStatsAge: Histogram<'eviction_signal'>;
  readonly imageGarbageCollected: Counter<'reason'>;
  readonly gracefulShutdownStartTime: Gauge;
  readonly gracefulShutdownEndTime: Gauge;
  readonly httpRequests: Counter<HttpLabel>;
  readonly httpRequestsDuration: Histogram<HttpLabel>;
  readonly httpInflightRequests: Gauge<HttpLabel>;
  readonly volumeStatCalDuration: Histogram<'metric_source'>;
  /** kubelet_volume_stats_*, read from the volume stats cache at scrape time. */
  readonly volumeStatsGauges: readonly Gauge<VolumeLabel>[];
  readonly proberProbeTotal: Counter<ProbeTotalLabel>;
  readonly proberProbeDuration: Histogram<ProbeDurationLabel>;
  /** The ProberMetrics implementation over this object's probe registry. */
  readonly prober: ProberMetrics;
  /** The CRI client's metrics port (kubelet_runtime_operations_*, kubelet_run_podsandbox_*). */
  readonly cri: CriMetrics;
  #runtimeCounts: (() => RuntimeCounts) | undefined;
  #volumeStats: (() => Iterable<PodVolumeStats>) | undefined;

  constructor(options: KubeletMetricsOptions = {}) {
    const registers = [this.registry];
    const histogram = <L extends string>(
      name: string,
      help: string,
      labelNames: readonly L[],
      buckets: readonly number[],
    ): Histogram<L> => new Histogram({ name, help, labelNames, buckets: [...buckets], registers });
    const counter = <L extends string>(
      name: string,
      help: string,
      labelNames: readonly L[] = [],
    ): Counter<L> => new Counter({ name, help, labelNames, registers });

    this.nodeName = new Gauge({
      name: 'kubelet_node_name',
      help: "The node's name. The count is always 1.",
      labelNames: ['node'],
      registers,
    });
    if (options.nodeName !== undefined) this.nodeName.set({ node: options.nodeName }, 1);
    this.podWorkerDuration = histogram(
      'kubelet_pod_worker_duration_seconds',
      'Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync',
      ['operation_type'],
      DEFAULT_BUCKETS,
    );
    this.podStartDuration = histogram(
      'kubelet_pod_start_duration_seconds',
      'Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run',
      [],
      POD_START_BUCKETS,
    );
    this.podStartSLIDuration = histogram(
      'kubelet_pod_start_sli_duration_seconds',
      'Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch',
      [],
      POD_START_BUCKETS,
    );
    this.podStatusSyncDuration = histogram(
      'kubelet_pod_status_sync_duration_seconds',
      'Duration in seconds to sync a pod status update. Measures time from detection of a change to pod status until the API is successfully updated for that pod, even if multiple intevening changes to pod status occur.',
      [],
      STATUS_SYNC_BUCKETS,
    );
    this.plegRelistDuration = histogram(
      'kubelet_pleg_relist_duration_seconds',
      'Duration in seconds for relisting pods in PLEG.',
      [],
      DEFAULT_BUCKETS,
    );
    this.plegRelistInterval = histogram(
      'kubelet_pleg_relist_interval_seconds',
      'Interval in seconds between relisting in PLEG.',
      [],
      DEFAULT_BUCKETS,
    );
    this.plegLastSeen = new Gauge({
      name: 'kubelet_pleg_last_seen_seconds',
      help: 'Timestamp in seconds when PLEG was last seen active.',
      registers,
    });
    this.plegDiscardEvents = counter(
      'kubelet_pleg_discard_events',
      'The number of discard events in PLEG.',
    );
    // The two gauges read the runtime when scraped (upstream's collector does the same),
    // so they cannot drift from what the PLEG cache holds.
    const counts = (): RuntimeCounts | undefined => this.#runtimeCounts?.();
    this.runningPods = new Gauge({
      name: 'kubelet_running_pods',
      help: 'Number of pods that have a running pod sandbox',
      registers,
      collect() {
        const c = counts();
        if (c !== undefined) this.set(c.runningPods);
      },
    });
    this.runningContainers = new Gauge({
      name: 'kubelet_running_containers',
      help: 'Number of containers currently running',
      labelNames: ['container_state'],
      registers,
      collect() {
        const c = counts();
        if (c === undefined) return;
        for (const [state, n] of Object.entries(c.containers))
          this.set({ container_state: state }, n);
      },
    });
    this.startedPodsTotal = counter(
      'kubelet_started_pods_total',
      'Cumulative number of pods started',
    );
    this.startedPodsErrorsTotal = counter(
      'kubelet_started_pods_errors_total',
      'Cumulative number of errors when starting pods',
    );
    this.startedUserNamespacedPodsTotal = counter(
      'kubelet_started_user_namespaced_pods_total',
      'Cumulative number of pods with user namespaces started. This metric will only be collected on Linux.',
    );
    this.startedUserNamespacedPodsErrorsTotal = counter(
      'kubelet_started_user_namespaced_pods_errors_total',
      'Cumulative number of errors when starting pods with user namespaces. This metric will only be collected on Linux.',
    );
    this.startedContainersTotal = counter(
      'kubelet_started_containers_total',
      'Cumulative number of containers started',
      ['container_type'],
    );
    this.startedContainersErrorsTotal = counter(
      'kubelet_started_containers_errors_total',
      'Cumulative number of errors when starting containers',
      ['container_type', 'code'],
    );
    // Registered unconditionally: their gate, ImageVolume, is locked on.
    this.imageVolumeRequestedTotal = counter(
      'kubelet_image_volume_requested_total',
      'Number of requested image volumes.',
    );
    this.imageVolumeMountedSucceedTotal = counter(
      'kubelet_image_volume_mounted_succeed_total',
      'Number of successful image volume mounts.',
    );
    this.imageVolumeMountedErrorsTotal = counter(
      'kubelet_image_volume_mounted_errors_total',
      'Number of failed image volume mounts.',
    );
    this.runtimeOperations = counter(
      'kubelet_runtime_operations_total',
      'Cumulative number of runtime operations by operation type.',
      ['operation_type'],
    );
    this.runtimeOperationsDuration = histogram(
      'kubelet_runtime_operations_duration_seconds',
      'Duration in seconds of runtime operations. Broken down by operation type.',
      ['operation_type'],
      exponentialBuckets(0.005, 2.5, 14),
    );
    this.runtimeOperationsErrors = counter(
      'kubelet_runtime_operations_errors_total',
      'Cumulative number of runtime operation errors by operation type.',
      ['operation_type'],
    );
    this.runPodSandboxDuration = histogram(
      'kubelet_run_podsandbox_duration_seconds',
      'Duration in seconds of the run_podsandbox operations. Broken down by RuntimeClass.Handler.',
      ['runtime_handler'],
      DEFAULT_BUCKETS,
    );
    this.runPodSandboxErrors = counter(
      'kubelet_run_podsandbox_errors_total',
      'Cumulative number of the run_podsandbox operation errors by RuntimeClass.Handler.',
      ['runtime_handler'],
    );
    this.imagePullDuration = histogram(
      'kubelet_image_pull_duration_seconds',
      'Duration in seconds to pull an image.',
      ['image_size_in_bytes'],
      IMAGE_PULL_BUCKETS,
    );
    this.evictions = counter(
      'kubelet_evictions',
      'Cumulative number of pod evictions by eviction signal',
      ['eviction_signal'],
    );
    this.evictionStatsAge = histogram(
      'kubelet_eviction_stats_age_seconds',
      'Time between when stats are collected, and when pod is evicted based on those stats by eviction signal',
      ['eviction_signal'],
      DEFAULT_BUCKETS,
    );
    this.imageGarbageCollected = counter(
      'kubelet_image_garbage_collected_total',
      'Total number of images garbage collected by the kubelet, whether through disk usage or image age.',
      ['reason'],
    );
    this.gracefulShutdownStartTime = new Gauge({
      name: 'kubelet_graceful_shutdown_start_time_seconds',
      help: 'Last graceful shutdown start time since unix epoch in seconds',
      registers,
    });
    this.gracefulShutdownEndTime = new Gauge({
      name: 'kubelet_graceful_shutdown_end_time_seconds',
      help: 'Last graceful shutdown end time since unix epoch in seconds',
      registers,
    });
    this.httpRequests = counter(
      'kubelet_http_requests_total',
      'Number of the http requests received since the server started',
      HTTP_LABELS,
    );
    this.httpRequestsDuration = histogram(
      'kubelet_http_requests_duration_seconds',
      'Duration in seconds to serve http requests',
      HTTP_LABELS,
      DEFAULT_BUCKETS,
    );
    this.httpInflightRequests = new Gauge({
      name: 'kubelet_http_inflight_requests',
      help: 'Number of the inflight http requests',
      labelNames: HTTP_LABELS,
      registers,
    });
    this.volumeStatCalDuration = histogram(
      'kubelet_volume_metric_collection_duration_seconds',
      'Duration in seconds to calculate volume stats',
      ['metric_source'],
      DEFAULT_BUCKETS,
    );
    // Upstream's volumeStatsCollector: one sample per claim (the first pod's numbers when
    // several pods use it), rebuilt at every scrape so a claim no pod uses disappears.
    const claims = (): Map<string, ClaimVolume> => {
      const out = new Map<string, ClaimVolume>();
      for (const pod of this.#volumeStats?.() ?? [])
        for (const v of [...pod.ephemeral, ...pod.persistent]) {
          const ref = v.pvcRef;
          if (ref === undefined) continue;
          const key = `${ref.namespace}/${ref.name}`;
          if (!out.has(key)) out.set(key, { ...v, pvcRef: ref });
        }
      return out;
    };
    this.volumeStatsGauges = VOLUME_GAUGES.map(
      ([suffix, help, field]) =>
        new Gauge({
          name: `kubelet_volume_stats_${suffix}`,
          help,
          labelNames: VOLUME_LABELS,
          registers,
          collect() {
            this.reset();
            for (const v of claims().values())
              this.set(
                { namespace: v.pvcRef.namespace, persistentvolumeclaim: v.pvcRef.name },
                v[field] ?? 0,
              );
          },
        }),
    );

    const probes = [this.probesRegistry];
    this.proberProbeTotal = new Counter({
      name: 'prober_probe_total',
      help: 'Cumulative number of a liveness, readiness or startup probe for a container by result.',
      labelNames: ['probe_type', 'result', 'container', 'pod', 'namespace', 'pod_uid'],
      registers: probes,
    });
    this.proberProbeDuration = new Histogram({
      name: 'prober_probe_duration_seconds',
      help: 'Duration in seconds for a probe response.',
      labelNames: ['probe_type', 'container', 'pod', 'namespace'],
      buckets: [...DEFAULT_BUCKETS],
      registers: probes,
    });
    // Labelled children per operation_type, so a CRI call records without label lookups.
    const operations = new Map<
      string,
      { total: { inc(): void }; errors: { inc(): void }; duration: { observe(v: number): void } }
    >();
    this.cri = {
      observeOperation: (operationType, seconds, failed) => {
        let op = operations.get(operationType);
        if (op === undefined) {
          const labels = { operation_type: operationType };
          op = {
            total: this.runtimeOperations.labels(labels),
            errors: this.runtimeOperationsErrors.labels(labels),
            duration: this.runtimeOperationsDuration.labels(labels),
          };
          operations.set(operationType, op);
        }
        op.total.inc();
        op.duration.observe(seconds);
        if (failed) op.errors.inc();
      },
      observeRunPodSandbox: (runtimeHandler, seconds, failed) => {
        this.runPodSandboxDuration.observe({ runtime_handler: runtimeHandler }, seconds);
        if (failed) this.runPodSandboxErrors.inc({ runtime_handler: runtimeHandler });
      },
    };
    // The label sets recorded per pod UID, so forgetPod can remove exactly those series.
    const probeSeries = new Map<
      string,
      Map<
        string,
        { total: LabelValues<ProbeTotalLabel>; duration: LabelValues<ProbeDurationLabel> }
      >
    >();
    this.prober = {
      record: (o) => {
        const total = {
          probe_type: o.probeType,
          result: o.result,
          container: o.container,
          pod: o.pod,
          namespace: o.namespace,
          pod_uid: o.podUID,
        };
        const duration = {
          probe_type: o.probeType,
          container: o.container,
          pod: o.pod,
          namespace: o.namespace,
        };
        this.proberProbeTotal.inc(total);
        // Upstream times only successful probes: a failure's duration is mostly its timeout.
        if (o.result === 'successful')
          this.proberProbeDuration.observe(duration, o.durationSeconds);
        let series = probeSeries.get(o.podUID);
        if (series === undefined) {
          series = new Map();
          probeSeries.set(o.podUID, series);
        }
        series.set(`${o.probeType}/${o.container}/${o.result}`, { total, duration });
      },
      forgetPod: (podUID) => {
        for (const { total, duration } of probeSeries.get(podUID)?.values() ?? []) {
          this.proberProbeTotal.remove(total);
          this.proberProbeDuration.remove(duration);
        }
        probeSeries.delete(podUID);
      },
    };
  }

  /** Where the kubelet_volume_stats_* gauges read from at scrape time (the volume stats cache). */
  observeVolumes(source: () => Iterable<PodVolumeStats>): void {
    this.#volumeStats = source;
  }

  /** Where running_pods / running_containers read from at scrape time (e.g. the PLEG cache). */
  observeRuntime(source: () => RuntimeCounts): void {
    this.#runtimeCounts = source;
  }
}

type HttpLabel = 'method' | 'path' | 'server_type' | 'long_running';
const HTTP_LABELS: readonly HttpLabel[] = ['method', 'path', 'server_type', 'long_running'];
type ProbeTotalLabel = 'probe_type' | 'result' | 'container' | 'pod' | 'namespace' | 'pod_uid';
type ProbeDurationLabel = 'probe_type' | 'container' | 'pod' | 'namespace';
/** A claim-backed volume's stats. */
type ClaimVolume = VolumeStats & { readonly pvcRef: NonNullable<VolumeStats['pvcRef']> };
type VolumeLabel = 'namespace' | 'persistentvolumeclaim';
const VOLUME_LABELS: readonly VolumeLabel[] = ['namespace', 'persistentvolumeclaim'];
type VolumeField =
  'capacityBytes' | 'availableBytes' | 'usedBytes' | 'inodes' | 'inodesFree' | 'inodesUsed';
/** Upstream's kubelet_volume_stats_* gauges: name suffix, help, and the VolumeStats field. */
const VOLUME_GAUGES: readonly (readonly [string, string, VolumeField])[] = [
  ['capacity_bytes', 'Capacity in bytes of the volume', 'capacityBytes'],
  ['available_bytes', 'Number of available bytes in the volume', 'availableBytes'],
  ['used_bytes', 'Number of used bytes in the volume', 'usedBytes'],
  ['inodes', 'Maximum number of inodes in the volume', 'inodes'],
  ['inodes_free', 'Number of free inodes in the volume', 'inodesFree'],
  ['inodes_used', 'Number of used inodes in the volume', 'inodesUsed'],
];
