/**
 * Builds the volume manager with everything it reads from: the watch-based cache of
 * referenced configMaps and secrets, the service-account token manager (TokenRequest),
 * the downward API resolver and the ClusterTrustBundles of projections. The kubelet
 * owns the returned parts: it registers pods with the cache, runs the token manager and
 * the trust bundles, and stops them.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { CsiDriverRegistry } from '../csi/types.ts';
import type { KubeletMetrics } from '../metrics/registry.ts';
import type { KubeClient } from '../kube/types.ts';
import type { EventRecorder } from '../events/types.ts';
import { HostDownwardResolver, type NodeAllocatable } from '../kuberuntime/downward.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import { CsiVolumePlugin } from '../volumes/csi/plugin.ts';
import { HostVolumeManager } from '../volumes/manager.ts';
import { SystemMounter, type Mounter } from '../volumes/mounter.ts';
import {
  ApiVolumeSources,
  DisabledPodCertificates,
  DisabledTrustBundles,
  PodCertificateManager,
  podObjectRefs,
  projectsTrustBundle,
  TokenManager,
  TrustBundleCache,
  WatchingObjectCache,
} from '../volumes/sources/index.ts';
import { VolumeStatsCollector } from '../volumes/stats.ts';
import type { VolumeManager } from '../volumes/types.ts';

export interface VolumeStackOptions {
  readonly kube: KubeClient;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly rootDir: string;
  readonly hostIPs: readonly string[];
  readonly nodeAllocatable: () => NodeAllocatable;
  /** Default: the system's mount(8)/umount(8). */
  readonly mounter?: Mounter;
  readonly nodeName: string;
  /** The CSI drivers the plugin manager registered (CSI volumes go through them). */
  readonly csiDrivers: CsiDriverRegistry;
  /** The pods whose volumes are measured, every volumeStatsAggPeriodMs (default 1 min). */
  readonly pods: () => Iterable<Pod>;
  readonly volumeStatsAggPeriodMs?: number | undefined;
  readonly metrics?: KubeletMetrics | undefined;
  /** Gate ClusterTrustBundleProjection (GA in v1.37, default on); off in standalone mode. */
  readonly clusterTrustBundleProjection: boolean;
  /** Gate PodCertificateRequest (GA in v1.37, default on); off in standalone mode. */
  readonly podCertificates: boolean;
  /** For podCertificate events (Denied, Failed, CertificateExpired, ...). */
  readonly recorder: EventRecorder;
  /** The registered Node's uid (PodCertificateRequests name it). */
  readonly nodeUID: () => string | undefined;
}

export interface VolumeStack {
  readonly volumes: VolumeManager;
  readonly objects: WatchingObjectCache;
  readonly tokens: TokenManager;
  /** ClusterTrustBundles for projections; undefined when the gate is off (nothing to run). */
  readonly trustBundles: TrustBundleCache | undefined;
  /** podCertificate credentials; undefined when the gate is off (nothing to run). */
  readonly podCertificates: PodCertificateManager | undefined;
  /** Volume usage for /stats/summary, eviction and kubelet_volume_stats_*; the kubelet runs it. */
  readonly stats: VolumeStatsCollector;
}

export function createVolumeStack(o: VolumeStackOptions): VolumeStack {
  const logger = o.logger.child({ component: 'volumes' });
  const objects = new WatchingObjectCache({ kube: o.kube, clock: o.clock, logger });
  const tokens = new TokenManager({ kube: o.kube, clock: o.clock, logger });
  const downward = new HostDownwardResolver({
    hostIPs: () => o.hostIPs,
    podIPs: (pod: Pod) =>
      pod.spec?.hostNetwork === true
        ? o.hostIPs
        : (pod.status?.podIPs ?? []).map((p) => p.ip ?? '').filter((ip) => ip !== ''),
    nodeAllocatable: o.nodeAllocatable,
  });
  const trustBundles = o.clusterTrustBundleProjection
    ? new TrustBundleCache({ kube: o.kube, clock: o.clock, logger })
    : undefined;
  const podCertificates = o.podCertificates
    ? new PodCertificateManager({
        kube: o.kube,
        nodeName: o.nodeName,
        nodeUID: o.nodeUID,
        pods: o.pods,
        recorder: o.recorder,
        clock: o.clock,
        logger,
      })
    : undefined;
  const sources = new ApiVolumeSources({
    kube: o.kube,
    cache: objects,
    tokens,
    downward,
    logger,
    trustBundles: trustBundles ?? new DisabledTrustBundles(),
    podCertificates: podCertificates ?? new DisabledPodCertificates(),
  });
  const mounter = o.mounter ?? new SystemMounter();
  const csi = new CsiVolumePlugin({
    rootDir: o.rootDir,
    nodeName: o.nodeName,
    registry: o.csiDrivers,
    kube: o.kube,
    mounter,
    logger: logger.child({ plugin: 'kubernetes.io/csi' }),
    clock: o.clock,
    tokens,
  });
  const volumes = new HostVolumeManager({
    rootDir: o.rootDir,
    mounter,
    sources,
    logger,
    clock: o.clock,
    kube: o.kube,
    csi,
  });
  const metrics = o.metrics;
  const stats = new VolumeStatsCollector({
    rootDir: o.rootDir,
    periodMs: o.volumeStatsAggPeriodMs ?? 60_000,
    pods: o.pods,
    kube: o.kube,
    csi: o.csiDrivers,
    clock: o.clock,
    logger: o.logger.child({ component: 'volume-stats' }),
    ...(metrics !== undefined && {
      recorder: {
        collected: (source: string, seconds: number) => {
          metrics.volumeStatCalDuration.observe({ metric_source: source }, seconds);
        },
      },
    }),
  });
  metrics?.observeVolumes(() => stats.all());
  return { volumes, objects, tokens, trustBundles, podCertificates, stats };
}

/**
 * The pods whose volume sources changed are synced again at once, so their files follow:
 * a referenced configMap or secret, a ClusterTrustBundle they project (upstream waits
 * for the next periodic sync), a podCertificate credential issued, renewed or denied.
 */
export function syncPodsOnSourceChange(
  stack: VolumeStack,
  pods: () => ReadonlyMap<string, Pod>,
  sync: (pod: Pod) => void,
): void {
  stack.objects.onChange((kind, namespace, name) => {
    for (const pod of pods().values()) {
      if ((pod.metadata?.namespace ?? 'default') !== namespace) continue;
      const refs = podObjectRefs(pod);
      if ((kind === 'configmap' ? refs.configMaps : refs.secrets).has(name)) sync(pod);
    }
  });
  stack.trustBundles?.onChange(() => {
    for (const pod of pods().values()) if (projectsTrustBundle(pod)) sync(pod);
  });
  stack.podCertificates?.onChange((uid) => {
    const pod = pods().get(uid);
    if (pod !== undefined) sync(pod);
  });
}
