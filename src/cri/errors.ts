/**
 * Typed CRI errors. Every failed CRI call surfaces as a CriError subclass that keeps
 * the gRPC status code, the method, the runtime's own message and the stack of the
 * code that made the call (gRPC callbacks lose it otherwise).
 */
import { status as GrpcStatus } from '@grpc/grpc-js';

export type CriErrorCode =
  | 'BERTH_CRI_UNAVAILABLE'
  | 'BERTH_CRI_DEADLINE_EXCEEDED'
  | 'BERTH_CRI_ABORTED'
  | 'BERTH_CRI_NOT_FOUND'
  | 'BERTH_CRI_UNAUTHENTICATED'
  | 'BERTH_CRI_INVALID_ARGUMENT'
  | 'BERTH_CRI_ALREADY_EXISTS'
  | 'BERTH_CRI_UNIMPLEMENTED'
  | 'BERTH_CRI_RESOURCE_EXHAUSTED'
  | 'BERTH_CRI_FAILED';

export interface CriErrorOptions {
  /** The RPC, e.g. "RuntimeService/RunPodSandbox". */
  readonly method: string;
  readonly grpcCode: GrpcStatus;
  /** The runtime's message, without gRPC's "N CODE:" prefix. */
  readonly details: string;
  readonly cause?: unknown;
}

export class CriError extends Error {
  readonly code: CriErrorCode = 'BERTH_CRI_FAILED';
  readonly method: string;
  readonly grpcCode: GrpcStatus;
  readonly details: string;

  constructor(message: string, options: CriErrorOptions) {
    super(message, { cause: options.cause });
    this.name = new.target.name;
    this.method = options.method;
    this.grpcCode = options.grpcCode;
    this.details = options.details;
  }
}

/** The runtime socket cannot be reached (not listening, refused, runtime restarting). */
export class CriUnavailableError extends CriError {
  override readonly code = 'BERTH_CRI_UNAVAILABLE';
}
/** The call's deadline passed before the runtime answered. */
export class CriDeadlineExceededError extends CriError {
  override readonly code = 'BERTH_CRI_DEADLINE_EXCEEDED';
}
/** The caller's AbortSignal fired; a normal outcome during shutdown, not a failure. */
export class CriAbortedError extends CriError {
  override readonly code = 'BERTH_CRI_ABORTED';
}
/** The sandbox, container or image does not exist (or the registry has no such image). */
export class CriNotFoundError extends CriError {
  override readonly code = 'BERTH_CRI_NOT_FOUND';
}
/** The registry refused the pull credentials (or demanded some and none were given). */
export class CriUnauthenticatedError extends CriError {
  override readonly code = 'BERTH_CRI_UNAUTHENTICATED';
}
export class CriInvalidArgumentError extends CriError {
  override readonly code = 'BERTH_CRI_INVALID_ARGUMENT';
}
export class CriAlreadyExistsError extends CriError {
  override readonly code = 'BERTH_CRI_ALREADY_EXISTS';
}
/** The runtime does not implement this RPC (e.g. RuntimeConfig on containerd 1.6). */
export class CriUnimplementedError extends CriError {
  override readonly code = 'BERTH_CRI_UNIMPLEMENTED';
}
export class CriResourceExhaustedError extends CriError {
  override readonly code = 'BERTH_CRI_RESOURCE_EXHAUSTED';
}

type CriErrorClass = new (message: string, options: CriErrorOptions) => CriError;

const BY_STATUS: ReadonlyMap<GrpcStatus, CriErrorClass> = new Map<GrpcStatus, CriErrorClass>([
  [GrpcStatus.UNAVAILABLE, CriUnavailableError],
  [GrpcStatus.DEADLINE_EXCEEDED, CriDeadlineExceededError],
  [GrpcStatus.CANCELLED, CriAbortedError],
  [GrpcStatus.NOT_FOUND, CriNotFoundError],
  [GrpcStatus.UNAUTHENTICATED, CriUnauthenticatedError],
  [GrpcStatus.PERMISSION_DENIED, CriUnauthenticatedError],
  [GrpcStatus.INVALID_ARGUMENT, CriInvalidArgumentError],
  [GrpcStatus.ALREADY_EXISTS, CriAlreadyExistsError],
  [GrpcStatus.UNIMPLEMENTED, CriUnimplementedError],
  [GrpcStatus.RESOURCE_EXHAUSTED, CriResourceExhaustedError],
]);

// Runtimes report registry failures of PullImage as code Unknown (containerd) with the
// registry's answer in the text, so pulls are classified by message as well. Auth is
// checked first: a registry that wants credentials often also says "not found".
const PULL_AUTH =
  /\b401\b|\b403\b|unauthori[sz]ed|authorization failed|authentication required|no basic auth credentials|access denied|denied:/i;
const PULL_NOT_FOUND = /not found|manifest unknown|name unknown|\b404\b/i;

function classFor(method: string, grpcCode: GrpcStatus, details: string): CriErrorClass {
  if (
    method.endsWith('/PullImage') &&
    (grpcCode === GrpcStatus.UNKNOWN || grpcCode === GrpcStatus.NOT_FOUND)
  ) {
    if (PULL_AUTH.test(details)) return CriUnauthenticatedError;
    if (PULL_NOT_FOUND.test(details)) return CriNotFoundError;
  }
  return BY_STATUS.get(grpcCode) ?? CriError;
}

/** Builds the typed error for a failed call; `stack` is the caller's stack, captured at call time. */
export function criErrorFrom(
  method: string,
  grpcCode: GrpcStatus,
  details: string,
  cause: unknown,
  stack: string | undefined,
): CriError {
  const Class = classFor(method, grpcCode, details);
  const err = new Class(`CRI ${method} failed: ${details}`, { method, grpcCode, details, cause });
  if (stack !== undefined)
    err.stack = `${err.name}: ${err.message}\n${stack.split('\n').slice(1).join('\n')}`;
  return err;
}
