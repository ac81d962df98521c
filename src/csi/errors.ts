/** The CsiError of a failed call, shared by the gRPC client and the fake so both fail alike. */
import { status as GrpcStatus } from '@grpc/grpc-js';
import { CsiError, type CsiNodeInfo } from './types.ts';
import { GrpcStatusError } from './unary.ts';

/** A gRPC status as a CsiError, keeping the driver's message and the status code. */
export function csiErrorOf(driver: string, rpc: string, err: unknown): CsiError {
  if (!(err instanceof GrpcStatusError)) {
    return new CsiError(
      'BERTH_CSI_CALL_FAILED',
      `${rpc} on CSI driver ${driver} failed: ${String(err)}`,
      {
        cause: err,
      },
    );
  }
  const code =
    err.code === GrpcStatus.UNAVAILABLE
      ? 'BERTH_CSI_UNAVAILABLE'
      : err.code === GrpcStatus.DEADLINE_EXCEEDED
        ? 'BERTH_CSI_DEADLINE'
        : 'BERTH_CSI_CALL_FAILED';
  const what = `${rpc} on CSI driver ${driver} failed: rpc error: code = ${GrpcStatus[err.code]} desc = ${err.details}`;
  return new CsiError(code, what, { cause: err, grpcCode: err.code });
}

/** NodeGetInfo's answer as both clients check it: a driver must report a node ID. */
export function checkedNodeInfo(driverName: string, info: CsiNodeInfo): CsiNodeInfo {
  if (info.nodeId === '') {
    throw new CsiError(
      'BERTH_CSI_BAD_REPLY',
      `NodeGetInfo on CSI driver ${driverName} failed: driverNodeID must not be empty`,
    );
  }
  return info;
}
