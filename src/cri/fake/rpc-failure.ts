/**
 * How the fake's handlers fail: a gRPC status and the runtime's message, turned into the
 * same typed CriError the real client produces (criErrorFrom) at the call boundary, where
 * the caller's stack is known.
 */
import { status as GrpcStatus } from '@grpc/grpc-js';

/** A failed RPC inside the fake, before it becomes a CriError. */
export class RpcFailure extends Error {
  readonly grpcCode: GrpcStatus;
  readonly details: string;

  constructor(grpcCode: GrpcStatus, details: string) {
    super(details);
    this.name = 'RpcFailure';
    this.grpcCode = grpcCode;
    this.details = details;
  }
}

/** NotFound for an id or name the runtime does not know. */
export function notFound(what: string): RpcFailure {
  return new RpcFailure(GrpcStatus.NOT_FOUND, `cannot find ${what}: not found`);
}

/** Unknown: what containerd answers for most refused operations (wrong state, start failures). */
export function failed(details: string): RpcFailure {
  return new RpcFailure(GrpcStatus.UNKNOWN, details);
}
