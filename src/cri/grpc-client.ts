/**
 * CriClient on the runtime's unix socket. Unary calls of both services share one
 * HTTP/2 connection (H2UnaryChannel, the hot path: see h2-unary.ts); the event stream
 * uses grpc-js, which has no AbortSignal support, so it bridges the caller's signal to
 * call.cancel() and always removes its listener. Each unary call gets a deadline
 * (runtimeRequestTimeout, 2 min by default, as upstream).
 */
import {
  Client,
  Metadata,
  credentials,
  status as GrpcStatus,
  type ServiceError,
} from '@grpc/grpc-js';
import * as api from './gen/runtime/v1/api.ts';
import { criErrorFrom } from './errors.ts';
import { GrpcStatusError, H2UnaryChannel } from './h2-unary.ts';
import type { CriMetrics } from './metrics.ts';
import { IMAGE_REQUESTS, RUNTIME_REQUESTS } from './request-codecs.ts';
import type {
  CriCallOptions,
  CriClient,
  ImageService,
  MethodDefinition,
  RuntimeService,
  UnaryApi,
} from './types.ts';

export interface GrpcCriClientOptions {
  /** Default deadline of a call in ms (upstream runtimeRequestTimeout: 2m). 0 = none. */
  readonly defaultTimeoutMs?: number;
  /** Largest message either way; upstream raises gRPC's 4 MiB to 16 MiB. */
  readonly maxMessageBytes?: number;
  /**
   * Records kubelet_runtime_operations_total / _duration_seconds / _errors_total per
   * unary call, and kubelet_run_podsandbox_duration_seconds / _errors_total.
   */
  readonly metrics?: CriMetrics;
}

/**
 * Upstream's operation_type of a CRI method: snake case, "PodSandbox" as one word
 * (run_podsandbox, list_podsandbox_stats), UpdateContainerResources as update_container.
 */
export function criOperationType(method: string): string {
  if (method === 'UpdateContainerResources') return 'update_container';
  return method
    .replace(/PodSandbox/g, 'Podsandbox')
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toLowerCase();
}

const DEFAULT_TIMEOUT_MS = 120_000;
const DEFAULT_MAX_MESSAGE = 16 * 1024 * 1024;

// Pulls are bounded by the caller's signal alone: a large image on a slow registry
// legitimately takes longer than any fixed request timeout.
const NO_DEFAULT_DEADLINE: ReadonlySet<string> = new Set(['/runtime.v1.ImageService/PullImage']);

interface CallSite {
  stack?: string;
}

function isAborted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
}

function isServiceError(err: unknown): err is ServiceError {
  return err instanceof Error && typeof (err as Partial<ServiceError>).code === 'number';
}

export class GrpcCriClient implements CriClient {
  readonly endpoint: string;
  readonly runtime: RuntimeService;
  readonly image: ImageService;
  /** The event stream's channel; grpc-js handles streaming (see h2-unary.ts for why unary is not). */
  readonly #client: Client;
  readonly #channel: H2UnaryChannel;
  readonly #defaultTimeoutMs: number;
  readonly #metrics: CriMetrics | undefined;
  /** upstream's operation_type per method, computed once. */
  readonly #operationTypes = new Map<string, string>();
  #closed = false;

  /** `socketPath` is the runtime's unix socket, e.g. /run/containerd/containerd.sock. */
  constructor(socketPath: string, options: GrpcCriClientOptions = {}) {
    this.endpoint = `unix://${socketPath}`;
    this.#defaultTimeoutMs = options.defaultTimeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#metrics = options.metrics;
    const max = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE;
    this.#channel = new H2UnaryChannel(socketPath, { maxMessageBytes: max });
    // The channel connects lazily, on the first call: constructing does no I/O.
    this.#client = new Client(this.endpoint, credentials.createInsecure(), {
      'grpc.max_receive_message_length': max,
      'grpc.max_send_message_length': max,
      // A local socket is cheap to retry. grpc-js's default back-off grows to 120 s, which
      // would keep berth failing fast long after a restarted runtime is back.
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 2000,
    });
    const runtime = this.#bind(api.RuntimeServiceService, RUNTIME_REQUESTS);
    this.runtime = {
      ...runtime,
      getContainerEvents: (opts?: CriCallOptions) =>
        this.#stream(
          api.RuntimeServiceService.getContainerEvents,
          api.GetEventsRequest.create(),
          opts,
        ),
    };
    this.image = this.#bind(api.ImageServiceService, IMAGE_REQUESTS);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#channel.close();
    this.#client.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /** Builds the unary method table of one service from its generated definition. */
  #bind<S extends Record<string, MethodDefinition<never, unknown>>>(
    service: S,
    codecs: { readonly [K in keyof S]: api.MessageFns<unknown> },
  ): UnaryApi<S> {
    const out: Record<string, unknown> = {};
    for (const [name, def] of Object.entries(service)) {
      if (def.responseStream) continue;
      const codec = codecs[name];
      if (codec === undefined) throw new Error(`Cannot bind CRI method ${name}: no request codec`);
      const method = def as unknown as MethodDefinition<unknown, unknown>;
      out[name] = (request: unknown, opts?: CriCallOptions) =>
        this.#unary(method, codec.fromPartial(request as never), opts);
    }
    // The loop above produced one entry per unary key of S, as UnaryApi<S> describes.
    return out as UnaryApi<S>;
  }

  /** The call's absolute deadline in epoch ms, or undefined for none. */
  #deadline(path: string, opts: CriCallOptions | undefined): number | undefined {
    const ms = opts?.timeoutMs ?? (NO_DEFAULT_DEADLINE.has(path) ? 0 : this.#defaultTimeoutMs);
    return ms > 0 ? Date.now() + ms : undefined;
  }

  #unary<Req, Res>(
    def: MethodDefinition<Req, Res>,
    request: Req,
    opts?: CriCallOptions,
  ): Promise<Res> {
    const site: CallSite = {};
    Error.captureStackTrace(site, this.#unary);
    const method = def.path.slice('/runtime.v1.'.length);
    const signal = opts?.signal;
    if (this.#closed) {
      return Promise.reject(
        criErrorFrom(
          method,
          GrpcStatus.UNAVAILABLE,
          'the CRI client is closed',
          undefined,
          site.stack,
        ),
      );
    }
    if (signal?.aborted === true) {
      return Promise.reject(
        criErrorFrom(
          method,
          GrpcStatus.CANCELLED,
          'aborted before the call',
          signal.reason,
          site.stack,
        ),
      );
    }
    const deadline = this.#deadline(def.path, opts);
    const started = this.#metrics === undefined ? 0 : performance.now();
    const finish = (failed: boolean): void => {
      if (this.#metrics !== undefined) this.#record(method, started, failed, request);
    };
    let body: Buffer;
    try {
      body = def.requestSerialize(request);
    } catch (err) {
      finish(true);
      return Promise.reject(
        criErrorFrom(method, GrpcStatus.INTERNAL, String(err), err, site.stack),
      );
    }
    return this.#channel.call(def.path, body, { deadline, signal }).then(
      (message) => {
        let response: Res;
        try {
          response = def.responseDeserialize(message);
        } catch (err) {
          finish(true);
          const details = `cannot decode the response: ${String(err)}`;
          throw criErrorFrom(method, GrpcStatus.INTERNAL, details, err, site.stack);
        }
        finish(false);
        return response;
      },
      (err: unknown) => {
        finish(true);
        if (err instanceof GrpcStatusError) {
          throw criErrorFrom(method, err.code, err.details, err, site.stack);
        }
        throw criErrorFrom(method, GrpcStatus.INTERNAL, String(err), err, site.stack);
      },
    );
  }

  #record(method: string, started: number, failed: boolean, request: unknown): void {
    const m = this.#metrics;
    if (m === undefined) return;
    let operationType = this.#operationTypes.get(method);
    if (operationType === undefined) {
      operationType = criOperationType(method.slice(method.indexOf('/') + 1));
      this.#operationTypes.set(method, operationType);
    }
    const seconds = (performance.now() - started) / 1000;
    m.observeOperation(operationType, seconds, failed);
    if (method === 'RuntimeService/RunPodSandbox') {
      const handler = (request as Partial<api.RunPodSandboxRequest>).runtimeHandler ?? '';
      m.observeRunPodSandbox(handler, seconds, failed);
    }
  }

  async *#stream<Req, Res>(
    def: MethodDefinition<Req, Res>,
    request: Req,
    opts?: CriCallOptions,
  ): AsyncGenerator<Res, void, undefined> {
    const site: CallSite = {};
    Error.captureStackTrace(site, this.#stream);
    const method = def.path.slice('/runtime.v1.'.length);
    const signal = opts?.signal;
    if (signal?.aborted === true) return;
    const deadline =
      opts?.timeoutMs !== undefined && opts.timeoutMs > 0
        ? new Date(Date.now() + opts.timeoutMs)
        : undefined;
    const call = this.#client.makeServerStreamRequest(
      def.path,
      def.requestSerialize,
      def.responseDeserialize,
      request,
      new Metadata(),
      deadline === undefined ? {} : { deadline },
    );
    const onAbort = (): void => {
      call.cancel();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for await (const message of call) yield message as Res;
    } catch (err) {
      // Re-read: the signal may have fired while the stream was open.
      if (isAborted(signal)) return;
      if (isServiceError(err)) throw criErrorFrom(method, err.code, err.details, err, site.stack);
      throw err;
    } finally {
      signal?.removeEventListener('abort', onAbort);
      call.cancel();
    }
  }
}
