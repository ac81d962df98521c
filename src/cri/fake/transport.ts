/**
 * The fake runtime's "socket": what makes a call into the fake behave like a gRPC call
 * to containerd. Requests and responses pass through the protobuf codecs (defaults
 * filled in, nothing shared with the caller); the runtime sees a request on a later
 * tick, so an abort right after the call wins; failures become the real client's typed
 * errors with the caller's stack; a closed transport answers CriUnavailableError. Tests
 * inject failures and hold calls here, and every request is recorded.
 */
import { status as GrpcStatus } from '@grpc/grpc-js';
import * as api from '../gen/runtime/v1/api.ts';
import { CriError, criErrorFrom } from '../errors.ts';
import type { CriCallOptions, UnaryApi } from '../types.ts';
import type { Clock } from '../../util/clock.ts';
import type { EventHub } from './events.ts';
import type { FlavorTraits } from './flavor.ts';
import { RpcFailure } from './rpc-failure.ts';
import type { CriMethod, FakeCall, FakeFailure } from './types.ts';

/** A call stopped on its way into the fake runtime (see FakeCriClient.holdNext). */
export interface FakeHold {
  /** Resolves when the held call arrives. */
  readonly arrived: Promise<void>;
  /** Lets the call through; the runtime then applies it even if the caller gave up. */
  release(): void;
}

/** What a test may inject: an Error thrown as given, or a status made into a typed error. */
export type Failure = Error | FakeFailure;

interface HoldEntry {
  readonly arrive: () => void;
  readonly released: Promise<void>;
}

/** The codecs of one generated RPC, enough to pass a message over "the wire". */
interface WireMethod {
  readonly path: string;
  readonly responseStream: boolean;
  readonly requestSerialize: (value: never) => Buffer;
  readonly requestDeserialize: (value: Buffer) => unknown;
  readonly responseSerialize: (value: never) => Buffer;
  readonly responseDeserialize: (value: Buffer) => unknown;
}

type Handler = (request: never) => unknown;

const EVENTS: CriMethod = 'RuntimeService/GetContainerEvents';
// As in the real client: pulls are bounded by the caller's signal alone.
const NO_DEFAULT_DEADLINE: ReadonlySet<CriMethod> = new Set(['ImageService/PullImage']);

/** Carries an injected error past the conversion that handlers' errors get. */
class InjectedFailure extends Error {
  readonly error: Error;
  constructor(error: Error) {
    super(error.message);
    this.error = error;
  }
}

function isAborted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
}

/** What FakeTransport is built from. */
export interface TransportOptions {
  readonly clock: Clock;
  readonly traits: FlavorTraits;
  readonly events: EventHub;
  /** Deadline of a held call in ms when the caller gives none; 0 = none. */
  readonly defaultTimeoutMs: number;
}

/** Calls into the fake runtime, with the semantics of calls over a socket. */
export class FakeTransport {
  readonly calls: FakeCall[] = [];
  readonly #clock: Clock;
  readonly #traits: FlavorTraits;
  readonly #hub: EventHub;
  readonly #defaultTimeoutMs: number;
  readonly #failures = new Map<CriMethod, Failure[]>();
  readonly #holds = new Map<CriMethod, HoldEntry[]>();
  readonly #inflight = new Set<() => void>();
  #closed = false;

  constructor(options: TransportOptions) {
    this.#clock = options.clock;
    this.#traits = options.traits;
    this.#hub = options.events;
    this.#defaultTimeoutMs = options.defaultTimeoutMs;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Fails in-flight calls and open event streams with CriUnavailableError. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const fail of [...this.#inflight]) fail();
    this.#hub.failAll(
      criErrorFrom(EVENTS, GrpcStatus.UNAVAILABLE, 'the client was closed', undefined, undefined),
    );
  }

  failNext(method: CriMethod, failure: Failure): void {
    const queue = this.#failures.get(method) ?? [];
    queue.push(failure);
    this.#failures.set(method, queue);
  }

  holdNext(method: CriMethod): FakeHold {
    let release = (): void => undefined;
    let arrive = (): void => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const arrived = new Promise<void>((resolve) => (arrive = resolve));
    const queue = this.#holds.get(method) ?? [];
    queue.push({ arrive, released });
    this.#holds.set(method, queue);
    return { arrived, release };
  }

  /** A test's failure as the error a call of `method` rejects with. */
  injectedError(method: CriMethod, failure: Failure, stack?: string): Error {
    if (failure instanceof Error) return failure;
    const details = failure.details ?? 'injected failure';
    return criErrorFrom(method, failure.grpcCode, details, undefined, stack);
  }

  /** Builds one service's method table from its generated definition and the handlers. */
  bind<S extends Record<string, WireMethod>>(
    service: S,
    codecs: { readonly [K in keyof S]: api.MessageFns<unknown> },
    handlers: Readonly<Record<string, Handler>>,
  ): UnaryApi<S> {
    const out: Record<string, unknown> = {};
    for (const [name, def] of Object.entries(service)) {
      if (def.responseStream) continue;
      const codec = codecs[name];
      const handler = handlers[name];
      if (codec === undefined || handler === undefined)
        throw new Error(`Cannot bind fake CRI method ${name}: no codec or handler`);
      const method = def.path.slice('/runtime.v1.'.length) as CriMethod;
      out[name] = (request: unknown, opts?: CriCallOptions) =>
        this.#unary(method, def, codec.fromPartial(request as never), handler, opts);
    }
    // One entry per unary key of S, as UnaryApi<S> describes (the handler maps are typed).
    return out as UnaryApi<S>;
  }

  /** GetContainerEvents: subscribes on the first next(), as the real stream opens then. */
  events(opts: CriCallOptions | undefined): AsyncIterable<api.ContainerEventResponse> {
    // Captured now: the generator body runs later, when the caller's frames are gone.
    const site: { stack?: string } = {};
    Error.captureStackTrace(site);
    return this.#eventStream(opts?.signal, site.stack);
  }

  /** A handler's failure as the typed error the real runtime's answer would give. */
  #toError(method: CriMethod, err: unknown, stack: string | undefined): Error {
    if (err instanceof InjectedFailure) return err.error;
    if (err instanceof CriError) return err;
    if (err instanceof RpcFailure)
      return criErrorFrom(method, err.grpcCode, err.details, undefined, stack);
    const details = err instanceof Error ? err.message : String(err);
    return criErrorFrom(method, GrpcStatus.UNKNOWN, details, err, stack);
  }

  #take<T>(map: Map<CriMethod, T[]>, method: CriMethod): T | undefined {
    const queue = map.get(method);
    const next = queue?.shift();
    if (queue?.length === 0) map.delete(method);
    return next;
  }

  #unimplemented(method: CriMethod): RpcFailure {
    return new RpcFailure(
      GrpcStatus.UNIMPLEMENTED,
      `${method} is not implemented by containerd ${this.#traits.runtimeVersion}`,
    );
  }

  #unary(
    method: CriMethod,
    def: WireMethod,
    filled: unknown,
    handler: Handler,
    opts: CriCallOptions | undefined,
  ): Promise<unknown> {
    const site: { stack?: string } = {};
    Error.captureStackTrace(site, this.#unary);
    const fail = (code: GrpcStatus, details: string, cause?: unknown): CriError =>
      criErrorFrom(method, code, details, cause, site.stack);
    if (this.#closed)
      return Promise.reject(fail(GrpcStatus.UNAVAILABLE, 'the fake runtime client is closed'));
    const signal = opts?.signal;
    if (signal?.aborted === true)
      return Promise.reject(fail(GrpcStatus.CANCELLED, 'aborted before the call', signal.reason));
    const request = def.requestDeserialize(def.requestSerialize(filled as never));
    this.calls.push({ method, request });
    const timeoutMs =
      opts?.timeoutMs ?? (NO_DEFAULT_DEADLINE.has(method) ? 0 : this.#defaultTimeoutMs);

    return new Promise((resolve, reject) => {
      let settled = false;
      const deadline = new AbortController();
      const finish = (err: Error | undefined, value?: unknown): void => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener('abort', onAbort);
        this.#inflight.delete(onClose);
        deadline.abort();
        if (err === undefined) resolve(value);
        else reject(err);
      };
      const onAbort = (): void => {
        finish(fail(GrpcStatus.CANCELLED, 'the call was cancelled', signal?.reason));
      };
      const onClose = (): void => {
        finish(fail(GrpcStatus.UNAVAILABLE, 'the client was closed during the call'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#inflight.add(onClose);

      const serve = async (): Promise<unknown> => {
        // The runtime sees the request on a later tick, so an abort right after the call wins.
        await Promise.resolve();
        if (settled) return undefined;
        if (this.#traits.unimplemented.has(method)) throw this.#unimplemented(method);
        const injected = this.#take(this.#failures, method);
        if (injected !== undefined)
          throw new InjectedFailure(this.injectedError(method, injected, site.stack));
        const hold = this.#take(this.#holds, method);
        if (hold !== undefined) {
          hold.arrive();
          // Only a held call can be slow, so only a held call needs a deadline timer.
          if (timeoutMs > 0) {
            this.#clock.sleep(timeoutMs, deadline.signal).then(
              () => {
                finish(fail(GrpcStatus.DEADLINE_EXCEEDED, 'context deadline exceeded'));
              },
              () => undefined, // the call settled first and cancelled the timer
            );
          }
          await hold.released;
        }
        const response = await handler(request as never);
        return def.responseDeserialize(def.responseSerialize(response as never));
      };
      serve().then(
        (value) => {
          finish(undefined, value);
        },
        (err: unknown) => {
          finish(this.#toError(method, err, site.stack));
        },
      );
    });
  }

  async *#eventStream(
    signal: AbortSignal | undefined,
    stack: string | undefined,
  ): AsyncGenerator<api.ContainerEventResponse, void, undefined> {
    // As the real client: an already aborted signal ends the stream before it is opened.
    if (signal?.aborted === true) return;
    if (this.#closed)
      throw criErrorFrom(EVENTS, GrpcStatus.UNAVAILABLE, 'the client is closed', undefined, stack);
    this.calls.push({ method: EVENTS, request: api.GetEventsRequest.create() });
    if (this.#traits.unimplemented.has(EVENTS)) {
      const { grpcCode, details } = this.#unimplemented(EVENTS);
      throw criErrorFrom(EVENTS, grpcCode, details, undefined, stack);
    }
    const injected = this.#take(this.#failures, EVENTS);
    if (injected !== undefined) throw this.injectedError(EVENTS, injected, stack);
    const sub = this.#hub.subscribe();
    try {
      for (;;) {
        const event = await sub.next(signal);
        if (event === undefined) return;
        yield api.ContainerEventResponse.decode(api.ContainerEventResponse.encode(event).finish());
      }
    } catch (err) {
      // Re-read: the signal may have fired while the stream was open.
      if (isAborted(signal)) return;
      // Only close() and breakEventStreams end a subscription, each with its final error.
      throw err;
    } finally {
      this.#hub.unsubscribe(sub);
    }
  }
}
