/**
 * The kubelet's side of CSI: the node service of each registered driver, reached over
 * the unix socket the driver registered through the plugin manager
 * (`<rootDir>/plugins_registry/`). The volume manager's CSI plugin consumes these
 * interfaces; the plugin manager fills the registry. Types are berth's own (not the
 * generated proto types) so fakes and callers stay small: the gRPC client maps them.
 *
 * Every call takes the caller's AbortSignal and gets its own deadline (upstream's
 * csiTimeout, 2 minutes, unless the caller's signal ends sooner).
 */
import { BerthError } from '../util/errors.ts';

/** CSI VolumeCapability.AccessMode.Mode names (csi.proto). */
export type CsiAccessMode =
  | 'SINGLE_NODE_WRITER'
  | 'SINGLE_NODE_READER_ONLY'
  | 'MULTI_NODE_READER_ONLY'
  | 'MULTI_NODE_SINGLE_WRITER'
  | 'MULTI_NODE_MULTI_WRITER'
  | 'SINGLE_NODE_SINGLE_WRITER'
  | 'SINGLE_NODE_MULTI_WRITER';

export type CsiAccessType =
  | {
      readonly kind: 'mount';
      readonly fsType: string;
      readonly mountFlags: readonly string[];
      /** Set when the driver has VOLUME_MOUNT_GROUP and the pod an fsGroup. */
      readonly volumeMountGroup?: string | undefined;
    }
  | { readonly kind: 'block' };

export interface CsiVolumeCapability {
  readonly accessType: CsiAccessType;
  readonly accessMode: CsiAccessMode;
}

/** What NodeGetCapabilities said, as flags. */
export interface CsiNodeCapabilities {
  readonly stageUnstageVolume: boolean;
  readonly getVolumeStats: boolean;
  readonly expandVolume: boolean;
  readonly volumeCondition: boolean;
  readonly singleNodeMultiWriter: boolean;
  readonly volumeMountGroup: boolean;
}

export interface CsiNodeInfo {
  readonly nodeId: string;
  /** 0: the driver sets no limit. */
  readonly maxVolumesPerNode: number;
  /** Topology segments (label key -> value); empty when the driver reports none. */
  readonly accessibleTopology: Readonly<Record<string, string>>;
}

export interface CsiStageRequest {
  readonly volumeId: string;
  readonly publishContext: Readonly<Record<string, string>>;
  readonly stagingTargetPath: string;
  readonly volumeCapability: CsiVolumeCapability;
  readonly secrets: Readonly<Record<string, string>>;
  readonly volumeContext: Readonly<Record<string, string>>;
}

export interface CsiPublishRequest {
  readonly volumeId: string;
  readonly publishContext: Readonly<Record<string, string>>;
  /** Empty when the driver does not stage. */
  readonly stagingTargetPath: string;
  readonly targetPath: string;
  readonly volumeCapability: CsiVolumeCapability;
  readonly readonly: boolean;
  readonly secrets: Readonly<Record<string, string>>;
  readonly volumeContext: Readonly<Record<string, string>>;
}

export interface CsiVolumeUsage {
  readonly unit: 'BYTES' | 'INODES' | 'UNKNOWN';
  readonly available: bigint;
  readonly total: bigint;
  readonly used: bigint;
}

export interface CsiVolumeStats {
  readonly usage: readonly CsiVolumeUsage[];
  /** VolumeCondition when the driver reports it. */
  readonly condition?: { readonly abnormal: boolean; readonly message: string } | undefined;
}

export interface CsiExpandRequest {
  readonly volumeId: string;
  readonly volumePath: string;
  readonly requiredBytes: bigint;
  /** Empty when the driver does not stage. */
  readonly stagingTargetPath: string;
  readonly volumeCapability: CsiVolumeCapability;
}

/** One driver's node service. */
export interface CsiNodeClient {
  readonly driverName: string;
  nodeGetCapabilities(signal: AbortSignal): Promise<CsiNodeCapabilities>;
  nodeGetInfo(signal: AbortSignal): Promise<CsiNodeInfo>;
  nodeStageVolume(req: CsiStageRequest, signal: AbortSignal): Promise<void>;
  nodeUnstageVolume(
    volumeId: string,
    stagingTargetPath: string,
    signal: AbortSignal,
  ): Promise<void>;
  nodePublishVolume(req: CsiPublishRequest, signal: AbortSignal): Promise<void>;
  nodeUnpublishVolume(volumeId: string, targetPath: string, signal: AbortSignal): Promise<void>;
  nodeGetVolumeStats(
    volumeId: string,
    volumePath: string,
    stagingTargetPath: string,
    signal: AbortSignal,
  ): Promise<CsiVolumeStats>;
  /** Returns the capacity the driver reports (0n when it reports none). */
  nodeExpandVolume(req: CsiExpandRequest, signal: AbortSignal): Promise<bigint>;
}

/** The registered CSI drivers, filled by the plugin manager's CSI handler. */
export interface CsiDriverRegistry {
  /** The node client of a registered driver; undefined when none is registered by that name. */
  client(driverName: string): CsiNodeClient | undefined;
  /** Names of the registered drivers, sorted. */
  drivers(): readonly string[];
}

export type CsiErrorCode =
  /** No driver of that name is registered on this node. */
  | 'BERTH_CSI_DRIVER_NOT_FOUND'
  /** The socket cannot be reached (driver gone, socket removed). */
  | 'BERTH_CSI_UNAVAILABLE'
  /** The call's deadline passed. */
  | 'BERTH_CSI_DEADLINE'
  /** The driver answered with a gRPC error (see grpcCode). */
  | 'BERTH_CSI_CALL_FAILED'
  /** The driver's answer breaks the CSI spec (e.g. an empty node ID). */
  | 'BERTH_CSI_BAD_REPLY';

export class CsiError extends BerthError {
  declare readonly code: CsiErrorCode;
  /** The gRPC status code when the driver answered with one. */
  readonly grpcCode: number | undefined;
  constructor(
    code: CsiErrorCode,
    message: string,
    options?: { cause?: unknown; grpcCode?: number | undefined },
  ) {
    super(code, message, options);
    this.grpcCode = options?.grpcCode;
  }
}
