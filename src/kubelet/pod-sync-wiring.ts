/**
 * What the composition root gives the kubelet level of a pod sync (PodSync): the image
 * manager, the image pull and crash back-offs (upstream's: 10 s doubling to 5 min, reset
 * after 10 min idle), the pod environment, the managed /etc/hosts and the CRI configs.
 * Kept apart from kubelet.ts so the root reads as the list of managers and their order.
 */
import type { NodeStatus } from 'kubernetes-types/core/v1.js';
import type { PodCgroups } from '../cm/pod-cgroups.ts';
import type { CriClient } from '../cri/index.ts';
import type { EventRecorder } from '../events/types.ts';
import { ImageManager } from '../images/manager.ts';
import type { KubeClient } from '../kube/types.ts';
import type { NodeAllocatable } from '../kuberuntime/downward.ts';
import { podHostsFile } from '../kuberuntime/hosts-file.ts';
import type { PodResizer } from '../kuberuntime/resizer.ts';
import type { RuntimeStatusReader } from '../kuberuntime/runtime-status.ts';
import type { ContainerLogManager } from '../logs/index.ts';
import type { KubeletMetrics } from '../metrics/registry.ts';
import type { RelistPleg } from '../pleg/generic.ts';
import type { ProbeManager } from '../prober/types.ts';
import type { PodStatusManager } from '../status/types.ts';
import type { UserNamespaceManager } from '../userns/types.ts';
import { Backoff } from '../util/backoff.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import type { VolumeManager } from '../volumes/types.ts';
import { readNodeHosts } from './kubelet-util.ts';
import type { KubeletOptions } from './options.ts';
import { PodEnvironment } from './pod-env.ts';
import { PodSync } from './pod-sync.ts';
import type { ServiceLister } from './service-lister.ts';
import { runtimeConfigOf } from './wiring.ts';
import type { LogSymlinks } from '../kuberuntime/log-symlinks.ts';

const POD_BACKOFF = { initialMs: 10_000, maxMs: 300_000, resetAfterMs: 600_000 } as const;

export interface PodSyncWiring {
  readonly kube: KubeClient;
  readonly cri: CriClient;
  readonly recorder: EventRecorder;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: KubeletMetrics | undefined;
  readonly pleg: RelistPleg;
  readonly reader: RuntimeStatusReader;
  readonly status: PodStatusManager;
  readonly prober: ProbeManager;
  readonly volumes: VolumeManager;
  readonly services: ServiceLister;
  readonly nodeAllocatable: () => NodeAllocatable;
  readonly nodeStatus: () => NodeStatus | undefined;
  readonly podCgroups: PodCgroups | undefined;
  readonly cgroupVersion: 'v1' | 'v2' | undefined;
  readonly containerLogs: ContainerLogManager | undefined;
  readonly logSymlinks: LogSymlinks | undefined;
  readonly resizer: PodResizer;
  /** User namespace ranges of hostUsers: false pods. */
  readonly userns: UserNamespaceManager;
  /** The runtime's name as its Version call reported it (known once the kubelet started). */
  readonly runtimeName: () => string;
  /** The pod's containers, sandboxes and volumes are gone (drop per-pod caches). */
  readonly onPodGone: (uid: string) => void;
}

/** The pod syncer the pod workers run, and the back-offs housekeeping garbage-collects. */
export function podSyncOf(
  options: KubeletOptions,
  w: PodSyncWiring,
): { readonly sync: PodSync; readonly backoffs: readonly Backoff[] } {
  const { kube, cri, recorder, clock, logger, metrics } = w;
  const imageBackoff = new Backoff(clock, POD_BACKOFF);
  const crashBackoff = new Backoff(clock, POD_BACKOFF);
  const nodeHosts = readNodeHosts(options.nodeHostsFile ?? '/etc/hosts');
  const images = new ImageManager({
    images: cri.image,
    recorder,
    clock,
    logger: logger.child({ component: 'images' }),
    backoff: imageBackoff,
    maxParallelPulls: options.maxParallelImagePulls,
    ...(options.registryPull !== undefined && { pullRate: options.registryPull }),
    ...(metrics !== undefined && { metrics }),
  });
  const sync = new PodSync({
    ...{ cri, kube, pleg: w.pleg, reader: w.reader, images, status: w.status },
    ...{ recorder, clock, logger, crashBackoff },
    runtimeConfig: runtimeConfigOf(options, recorder, w.nodeStatus, w.podCgroups, w.cgroupVersion),
    runtimeName: w.runtimeName,
    hostIPs: options.nodeIPs,
    prober: w.prober,
    rootDir: options.rootDir,
    volumes: w.volumes,
    env: new PodEnvironment({
      kube,
      services: w.services,
      hostIPs: options.nodeIPs,
      nodeAllocatable: w.nodeAllocatable,
      recorder,
    }),
    hostsFile: (pod, podIPs) => podHostsFile(pod, podIPs, options, nodeHosts),
    ...(w.podCgroups !== undefined && { podCgroups: w.podCgroups }),
    ...(metrics !== undefined && { metrics }),
    ...(w.containerLogs !== undefined && { containerLogs: w.containerLogs }),
    ...(w.logSymlinks !== undefined && { logSymlinks: w.logSymlinks }),
    resize: w.resizer,
    userns: w.userns,
    onPodGone: w.onPodGone,
  });
  return { sync, backoffs: [crashBackoff, imageBackoff] };
}
