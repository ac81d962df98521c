/** The CsiError of a failed call, shared by the gRPC client and the fake so both fail alike. */
import { status as GrpcStatus } from '@grpc/grpc-js';
import { CsiError, type CsiNodeInfo } from './types.ts';
import { GrpcStatusError } from './unary.ts';

/** gRPC code names as Go's codes.Code prints them, which upstream's event texts carry. */
const GO_CODE_NAMES: readonly string[] = [
  'OK',
  'Canceled',
  'Unknown',
  'InvalidArgument',
  'DeadlineExceeded',
  'NotFound',
  'AlreadyExists',
  'PermissionDenied',
  'ResourceExhausted',
  'FailedPrecondition',
  'Aborted',
  'OutOfRange',
  'Unimplemented',
  'Internal',
  'Unavailable',
  'DataLoss',
  'Unauthenticated',
];

/**
 * A gRPC status as a CsiError, keeping the driver's message and the status code. The
 * message is what Go's status error prints (`rpc error: code = NotFound desc = …`), as
 * upstream's FailedMount events show it; callers add the operation.
 */
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
  const name = GO_CODE_NAMES[err.code] ?? `Code(${String(err.code)})`;
  const what = `rpc error: code = ${name} desc = ${err.details}`;
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
