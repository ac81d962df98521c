/**
 * One unary gRPC call over a unix-socket channel with the caller's AbortSignal and a
 * deadline, shared by the CSI node client and the plugin manager's registration client.
 * Both reuse the CRI's HTTP/2 channel (src/cri/h2-unary.ts): a driver socket is the same
 * kind of single local peer, and grpc-js would add its channel and resolver layers for
 * nothing.
 */
import { status as GrpcStatus } from '@grpc/grpc-js';
import { GrpcStatusError, type H2UnaryChannel } from '../cri/h2-unary.ts';
import { isAborted } from '../util/errors.ts';

export { GrpcStatusError, H2UnaryChannel } from '../cri/h2-unary.ts';

/** What a generated ts-proto (grpc-js) method definition provides for a unary call. */
export interface UnaryMethod<Req, Res> {
  readonly path: string;
  readonly requestSerialize: (value: Req) => Buffer;
  readonly responseDeserialize: (value: Buffer) => Res;
}

/** Upstream's csiTimeout and the plugin watcher's registration timeouts are minutes/seconds. */
export const DEFAULT_CSI_TIMEOUT_MS = 120_000;
/** Upstream keeps gRPC's 4 MiB default for driver sockets. */
export const DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

/** The rejection of a call whose caller's signal fired: an AbortError, the reason as cause. */
export function abortErrorOf(what: string, signal: AbortSignal): DOMException {
  const err = new DOMException(`${what} was aborted`, 'AbortError');
  Object.defineProperty(err, 'cause', { value: signal.reason, enumerable: false });
  return err;
}

/**
 * Sends `request` and decodes the answer. Rejects with GrpcStatusError (the peer's
 * status, or UNAVAILABLE / DEADLINE_EXCEEDED / INTERNAL from the channel) or, when
 * `signal` fired, with an AbortError.
 */
export async function callUnary<Req, Res>(
  channel: H2UnaryChannel,
  method: UnaryMethod<Req, Res>,
  request: Req,
  signal: AbortSignal,
  timeoutMs: number,
): Promise<Res> {
  if (signal.aborted) throw abortErrorOf(method.path, signal);
  let body: Buffer;
  try {
    body = method.requestSerialize(request);
  } catch (err) {
    throw new GrpcStatusError(
      GrpcStatus.INTERNAL,
      `cannot encode the request: ${String(err)}`,
      err,
    );
  }
  let message: Buffer;
  try {
    message = await channel.call(method.path, body, {
      deadline: timeoutMs > 0 ? Date.now() + timeoutMs : undefined,
      signal,
    });
  } catch (err) {
    if (isAborted(signal)) throw abortErrorOf(method.path, signal);
    if (err instanceof GrpcStatusError) throw err;
    throw new GrpcStatusError(GrpcStatus.INTERNAL, String(err), err);
  }
  try {
    return method.responseDeserialize(message);
  } catch (err) {
    throw new GrpcStatusError(
      GrpcStatus.INTERNAL,
      `cannot decode the response: ${String(err)}`,
      err,
    );
  }
}

/** A driver's endpoint as a socket path: upstream accepts `unix:///path` and `/path`. */
export function socketPathOf(endpoint: string): string {
  if (endpoint.startsWith('unix://')) return endpoint.slice('unix://'.length);
  return endpoint;
}
