/**
 * CsiNodeClient on a driver's unix socket: the node service RPCs upstream's csiClient
 * (pkg/volume/csi/csi_client.go) makes, each with the caller's signal and a deadline
 * (csiTimeout, 2 min, unless the caller's signal ends sooner). gRPC failures become
 * CsiError with the driver's message kept; the caller's abort rejects with an AbortError.
 */
import { checkedNodeInfo, csiErrorOf } from './errors.ts';
import * as csi from './gen/csi/v1/csi.ts';
import {
  type CsiAccessMode,
  type CsiExpandRequest,
  type CsiNodeCapabilities,
  type CsiNodeClient,
  type CsiNodeInfo,
  type CsiPublishRequest,
  type CsiStageRequest,
  type CsiVolumeCapability,
  type CsiVolumeStats,
  type CsiVolumeUsage,
} from './types.ts';
import {
  callUnary,
  DEFAULT_CSI_TIMEOUT_MS,
  DEFAULT_MAX_MESSAGE_BYTES,
  H2UnaryChannel,
  socketPathOf,
  type UnaryMethod,
} from './unary.ts';

export interface GrpcCsiNodeClientOptions {
  /** Deadline of each call in ms (upstream csiTimeout: 2 min). */
  readonly timeoutMs?: number;
  readonly maxMessageBytes?: number;
}

/** A CsiNodeClient that owns a connection: close() when the driver deregisters. */
export interface ClosableCsiNodeClient extends CsiNodeClient, Disposable {
  readonly endpoint: string;
  /** Stops new calls; calls in flight finish. Idempotent. */
  close(): void;
}

const MODES: Readonly<Record<CsiAccessMode, csi.VolumeCapability_AccessMode_Mode>> = {
  SINGLE_NODE_WRITER: csi.VolumeCapability_AccessMode_Mode.SINGLE_NODE_WRITER,
  SINGLE_NODE_READER_ONLY: csi.VolumeCapability_AccessMode_Mode.SINGLE_NODE_READER_ONLY,
  MULTI_NODE_READER_ONLY: csi.VolumeCapability_AccessMode_Mode.MULTI_NODE_READER_ONLY,
  MULTI_NODE_SINGLE_WRITER: csi.VolumeCapability_AccessMode_Mode.MULTI_NODE_SINGLE_WRITER,
  MULTI_NODE_MULTI_WRITER: csi.VolumeCapability_AccessMode_Mode.MULTI_NODE_MULTI_WRITER,
  SINGLE_NODE_SINGLE_WRITER: csi.VolumeCapability_AccessMode_Mode.SINGLE_NODE_SINGLE_WRITER,
  SINGLE_NODE_MULTI_WRITER: csi.VolumeCapability_AccessMode_Mode.SINGLE_NODE_MULTI_WRITER,
};

export function capabilityToProto(c: CsiVolumeCapability): csi.VolumeCapability {
  const accessMode = { mode: MODES[c.accessMode] };
  if (c.accessType.kind === 'block') return { block: {}, mount: undefined, accessMode };
  return {
    block: undefined,
    mount: {
      fsType: c.accessType.fsType,
      mountFlags: [...c.accessType.mountFlags],
      volumeMountGroup: c.accessType.volumeMountGroup ?? '',
    },
    accessMode,
  };
}

/** NodeServiceCapability.RPC.Type VOLUME_CONDITION of CSI <= 1.13. */
const VOLUME_CONDITION = 4;

const UNITS: Readonly<Record<number, CsiVolumeUsage['unit']>> = {
  [csi.VolumeUsage_Unit.BYTES]: 'BYTES',
  [csi.VolumeUsage_Unit.INODES]: 'INODES',
};

export class GrpcCsiNodeClient implements ClosableCsiNodeClient {
  readonly driverName: string;
  readonly endpoint: string;
  readonly #channel: H2UnaryChannel;
  readonly #timeoutMs: number;

  /** `endpoint` is the driver's socket, `/path` or `unix:///path`. Connects on the first call. */
  constructor(driverName: string, endpoint: string, options: GrpcCsiNodeClientOptions = {}) {
    this.driverName = driverName;
    this.endpoint = endpoint;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_CSI_TIMEOUT_MS;
    this.#channel = new H2UnaryChannel(socketPathOf(endpoint), {
      maxMessageBytes: options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
    });
  }

  close(): void {
    this.#channel.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  async #call<Req, Res>(
    rpc: string,
    method: UnaryMethod<Req, Res>,
    request: Req,
    signal: AbortSignal,
  ): Promise<Res> {
    try {
      return await callUnary(this.#channel, method, request, signal, this.#timeoutMs);
    } catch (err) {
      if (err instanceof DOMException) throw err;
      throw csiErrorOf(this.driverName, rpc, err);
    }
  }

  async nodeGetCapabilities(signal: AbortSignal): Promise<CsiNodeCapabilities> {
    const res = await this.#call(
      'NodeGetCapabilities',
      csi.NodeService.nodeGetCapabilities,
      {},
      signal,
    );
    const types = new Set<number | undefined>(res.capabilities.map((c) => c.rpc?.type));
    const T = csi.NodeServiceCapability_RPC_Type;
    return {
      stageUnstageVolume: types.has(T.STAGE_UNSTAGE_VOLUME),
      getVolumeStats: types.has(T.GET_VOLUME_STATS),
      expandVolume: types.has(T.EXPAND_VOLUME),
      // VOLUME_CONDITION (4) left the spec in 1.14 (its number is reserved); a driver built
      // on an older spec still sends it.
      volumeCondition: types.has(VOLUME_CONDITION),
      singleNodeMultiWriter: types.has(T.SINGLE_NODE_MULTI_WRITER),
      volumeMountGroup: types.has(T.VOLUME_MOUNT_GROUP),
    };
  }

  async nodeGetInfo(signal: AbortSignal): Promise<CsiNodeInfo> {
    const res = await this.#call(
      'NodeGetInfo',
      csi.NodeService.nodeGetInfo,
      csi.NodeGetInfoRequest.create(),
      signal,
    );
    // Upstream's node info manager refuses an empty ID; refusing it here keeps every
    // consumer from checking.
    return checkedNodeInfo(this.driverName, {
      nodeId: res.nodeId,
      maxVolumesPerNode: Number(res.maxVolumesPerNode),
      accessibleTopology: { ...(res.accessibleTopology?.segments ?? {}) },
    });
  }

  async nodeStageVolume(req: CsiStageRequest, signal: AbortSignal): Promise<void> {
    await this.#call(
      'NodeStageVolume',
      csi.NodeService.nodeStageVolume,
      {
        volumeId: req.volumeId,
        publishContext: { ...req.publishContext },
        stagingTargetPath: req.stagingTargetPath,
        volumeCapability: capabilityToProto(req.volumeCapability),
        secrets: { ...req.secrets },
        volumeContext: { ...req.volumeContext },
      },
      signal,
    );
  }

  async nodeUnstageVolume(
    volumeId: string,
    stagingTargetPath: string,
    signal: AbortSignal,
  ): Promise<void> {
    await this.#call(
      'NodeUnstageVolume',
      csi.NodeService.nodeUnstageVolume,
      { volumeId, stagingTargetPath },
      signal,
    );
  }

  async nodePublishVolume(req: CsiPublishRequest, signal: AbortSignal): Promise<void> {
    await this.#call(
      'NodePublishVolume',
      csi.NodeService.nodePublishVolume,
      {
        volumeId: req.volumeId,
        publishContext: { ...req.publishContext },
        stagingTargetPath: req.stagingTargetPath,
        targetPath: req.targetPath,
        volumeCapability: capabilityToProto(req.volumeCapability),
        readonly: req.readonly,
        secrets: { ...req.secrets },
        volumeContext: { ...req.volumeContext },
      },
      signal,
    );
  }

  async nodeUnpublishVolume(
    volumeId: string,
    targetPath: string,
    signal: AbortSignal,
  ): Promise<void> {
    await this.#call(
      'NodeUnpublishVolume',
      csi.NodeService.nodeUnpublishVolume,
      { volumeId, targetPath },
      signal,
    );
  }

  async nodeGetVolumeStats(
    volumeId: string,
    volumePath: string,
    stagingTargetPath: string,
    signal: AbortSignal,
  ): Promise<CsiVolumeStats> {
    const res = await this.#call(
      'NodeGetVolumeStats',
      csi.NodeService.nodeGetVolumeStats,
      { volumeId, volumePath, stagingTargetPath },
      signal,
    );
    return {
      usage: res.usage.map((u) => ({
        unit: UNITS[u.unit] ?? 'UNKNOWN',
        available: u.available,
        total: u.total,
        used: u.used,
      })),
      // CSI 1.14 removed VolumeCondition from this response (field 2 is reserved).
      condition: undefined,
    };
  }

  async nodeExpandVolume(req: CsiExpandRequest, signal: AbortSignal): Promise<bigint> {
    const res = await this.#call(
      'NodeExpandVolume',
      csi.NodeService.nodeExpandVolume,
      {
        volumeId: req.volumeId,
        volumePath: req.volumePath,
        capacityRange: { requiredBytes: req.requiredBytes, limitBytes: 0n },
        stagingTargetPath: req.stagingTargetPath,
        volumeCapability: capabilityToProto(req.volumeCapability),
        secrets: {},
      },
      signal,
    );
    return res.capacityBytes;
  }
}
