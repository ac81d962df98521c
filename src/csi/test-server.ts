/**
 * A FakeCsiDriver served over a real gRPC unix socket (grpc-js server with the
 * generated Node service), for the contract test and the plugin manager's tests: the
 * real client then runs against the same scripted behaviour as the fake client.
 */
import { Server, ServerCredentials, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import * as csi from './gen/csi/v1/csi.ts';
import type { CsiCall, FakeCsiDriver } from './fake.ts';
import type { CsiVolumeUsage } from './types.ts';

type Callback<Res> = (err: Partial<ServiceError> | null, value?: Res) => void;

const UNIT: Readonly<Record<CsiVolumeUsage['unit'], csi.VolumeUsage_Unit>> = {
  BYTES: csi.VolumeUsage_Unit.BYTES,
  INODES: csi.VolumeUsage_Unit.INODES,
  UNKNOWN: csi.VolumeUsage_Unit.UNKNOWN,
};

function accessTypeOf(c: csi.VolumeCapability | undefined): 'mount' | 'block' | undefined {
  if (c?.block !== undefined) return 'block';
  if (c?.mount !== undefined) return 'mount';
  return undefined;
}

/** Serves `driver` on `socketPath` until close(). */
export class FakeCsiDriverServer {
  readonly socketPath: string;
  readonly driver: FakeCsiDriver;
  readonly #server = new Server();

  constructor(driver: FakeCsiDriver, socketPath: string) {
    this.driver = driver;
    this.socketPath = socketPath;
  }

  async start(): Promise<void> {
    const answer = <Res>(call: CsiCall, cb: Callback<Res>, build: () => Res): void => {
      const outcome = this.driver.receive(call);
      if (outcome === 'hang') return;
      if (outcome === 'ok') cb(null, build());
      else cb({ code: outcome.code, details: outcome.details });
    };
    const impl: csi.NodeServer = {
      nodeGetCapabilities: (_call, cb) => {
        answer({ rpc: 'NodeGetCapabilities' }, cb, () => {
          const c = this.driver.state.capabilities;
          const T = csi.NodeServiceCapability_RPC_Type;
          const types: csi.NodeServiceCapability_RPC_Type[] = [];
          if (c.stageUnstageVolume) types.push(T.STAGE_UNSTAGE_VOLUME);
          if (c.getVolumeStats) types.push(T.GET_VOLUME_STATS);
          if (c.expandVolume) types.push(T.EXPAND_VOLUME);
          if (c.singleNodeMultiWriter) types.push(T.SINGLE_NODE_MULTI_WRITER);
          if (c.volumeMountGroup) types.push(T.VOLUME_MOUNT_GROUP);
          return { capabilities: types.map((type) => ({ rpc: { type } })) };
        });
      },
      nodeGetInfo: (_call, cb) => {
        answer({ rpc: 'NodeGetInfo' }, cb, () => {
          const i = this.driver.state.info;
          return {
            nodeId: i.nodeId,
            maxVolumesPerNode: BigInt(i.maxVolumesPerNode),
            accessibleTopology: { segments: { ...i.accessibleTopology } },
          };
        });
      },
      nodeStageVolume: (call, cb) => {
        const r = call.request;
        const c = {
          rpc: 'NodeStageVolume' as const,
          volumeId: r.volumeId,
          path: r.stagingTargetPath,
        };
        const accessType = accessTypeOf(r.volumeCapability);
        answer(accessType === undefined ? c : { ...c, accessType }, cb, () => ({}));
      },
      nodeUnstageVolume: (call, cb) => {
        const r = call.request;
        answer(
          { rpc: 'NodeUnstageVolume', volumeId: r.volumeId, path: r.stagingTargetPath },
          cb,
          () => ({}),
        );
      },
      nodePublishVolume: (call, cb) => {
        const r = call.request;
        const c = {
          rpc: 'NodePublishVolume' as const,
          volumeId: r.volumeId,
          path: r.targetPath,
          readonly: r.readonly,
        };
        const accessType = accessTypeOf(r.volumeCapability);
        answer(accessType === undefined ? c : { ...c, accessType }, cb, () => ({}));
      },
      nodeUnpublishVolume: (call, cb) => {
        const r = call.request;
        answer(
          { rpc: 'NodeUnpublishVolume', volumeId: r.volumeId, path: r.targetPath },
          cb,
          () => ({}),
        );
      },
      nodeGetVolumeStats: (call, cb) => {
        const r = call.request;
        answer({ rpc: 'NodeGetVolumeStats', volumeId: r.volumeId, path: r.volumePath }, cb, () => ({
          usage: this.driver.state.stats.usage.map((u) => ({
            available: u.available,
            total: u.total,
            used: u.used,
            unit: UNIT[u.unit],
          })),
        }));
      },
      nodeExpandVolume: (call, cb) => {
        const r = call.request;
        const requiredBytes = r.capacityRange?.requiredBytes ?? 0n;
        answer(
          { rpc: 'NodeExpandVolume', volumeId: r.volumeId, path: r.volumePath, requiredBytes },
          cb,
          () => ({ capacityBytes: this.driver.state.expandedBytes ?? requiredBytes }),
        );
      },
    };
    this.#server.addService(csi.NodeService, impl);
    await new Promise<void>((resolve, reject) => {
      this.#server.bindAsync(
        `unix://${this.socketPath}`,
        ServerCredentials.createInsecure(),
        (err) => {
          if (err === null) resolve();
          else reject(err);
        },
      );
    });
  }

  /** Stops serving at once; calls in flight (hanging ones too) end with UNAVAILABLE. */
  close(): void {
    this.#server.forceShutdown();
  }
}

export { GrpcStatus };
