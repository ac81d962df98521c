/**
 * The /stats/summary document (upstream's statsapi.Summary, kubelet stats v1alpha1) and
 * the StatsProvider that builds it. Field names are the JSON names metrics-server,
 * `kubectl top`'s older paths and the eviction manager read. Times are RFC 3339 strings
 * (metav1.Time); byte and nanosecond counts are plain numbers, as Go marshals uint64.
 */

export interface CPUStats {
  readonly time: string;
  /** Average usage over the last sampling interval, in nanocores (1e9 = one core). */
  readonly usageNanoCores?: number;
  /** Cumulative CPU time, in core-nanoseconds. */
  readonly usageCoreNanoSeconds?: number;
}

export interface MemoryStats {
  readonly time: string;
  readonly availableBytes?: number;
  readonly usageBytes?: number;
  readonly workingSetBytes?: number;
  readonly rssBytes?: number;
  readonly pageFaults?: number;
  readonly majorPageFaults?: number;
}

export interface InterfaceStats {
  readonly name: string;
  readonly rxBytes?: number;
  readonly rxErrors?: number;
  readonly txBytes?: number;
  readonly txErrors?: number;
}

/** The default interface's counters inline (as upstream embeds them), plus every interface. */
export interface NetworkStats extends InterfaceStats {
  readonly time: string;
  readonly interfaces: readonly InterfaceStats[];
}

export interface FsStats {
  readonly time: string;
  readonly availableBytes?: number;
  readonly capacityBytes?: number;
  readonly usedBytes?: number;
  readonly inodesFree?: number;
  readonly inodes?: number;
  readonly inodesUsed?: number;
}

export interface RuntimeStats {
  readonly imageFs?: FsStats;
  readonly containerFs?: FsStats;
}

export interface RlimitStats {
  readonly time: string;
  readonly maxpid?: number;
  readonly curproc?: number;
}

export interface NodeStats {
  readonly nodeName: string;
  readonly startTime: string;
  readonly cpu?: CPUStats;
  readonly memory?: MemoryStats;
  readonly network?: NetworkStats;
  readonly fs?: FsStats;
  readonly runtime?: RuntimeStats;
  readonly rlimit?: RlimitStats;
}

export interface ContainerStats {
  readonly name: string;
  readonly startTime: string;
  readonly cpu?: CPUStats;
  readonly memory?: MemoryStats;
  readonly rootfs?: FsStats;
  readonly logs?: FsStats;
}

export interface PodReference {
  readonly name: string;
  readonly namespace: string;
  readonly uid: string;
}

export interface VolumeStats extends FsStats {
  readonly name: string;
  readonly pvcRef?: { readonly name: string; readonly namespace: string };
}

export interface PodStats {
  readonly podRef: PodReference;
  readonly startTime: string;
  readonly containers: readonly ContainerStats[];
  readonly cpu?: CPUStats;
  readonly memory?: MemoryStats;
  readonly network?: NetworkStats;
  readonly volume?: readonly VolumeStats[];
  readonly 'ephemeral-storage'?: FsStats;
  readonly process_stats?: { readonly process_count?: number };
}

export interface Summary {
  readonly node: NodeStats;
  readonly pods: readonly PodStats[];
}

export interface SummaryOptions {
  /** /stats/summary?only_cpu_and_memory=true and /metrics/resource: skip fs, network, logs. */
  readonly onlyCpuAndMemory?: boolean;
  readonly signal?: AbortSignal;
}

/** Builds the node's stats summary; rejects when the runtime cannot be read. */
export interface StatsProvider {
  summary(options?: SummaryOptions): Promise<Summary>;
}

/**
 * One pod's volume usage as last measured (upstream's PodVolumeStats), split as upstream
 * splits it: only the `ephemeral` volumes (emptyDir on disk, configMap, gitRepo:
 * upstream's IsLocalEphemeralVolume) count towards the pod's ephemeral-storage; both
 * lists make up the summary's `volume`.
 */
export interface PodVolumeStats {
  readonly ephemeral: readonly VolumeStats[];
  readonly persistent: readonly VolumeStats[];
}

/**
 * The cached volume usage of one pod (src/volumes/stats.ts, measured every
 * volumeStatsAggPeriod); undefined while the pod has none measured yet.
 */
export type VolumeStatsSource = (podUID: string) => PodVolumeStats | undefined;
