/**
 * The CRI as berth's managers see it: RuntimeService and ImageService with one
 * promise-returning method per unary RPC (request fields optional, filled with proto3
 * defaults), and GetContainerEvents as an async iterable. Derived from the generated
 * service definitions, so a method added to proto/ appears here with its exact types.
 */
import type * as api from './gen/runtime/v1/api.ts';

export interface CriCallOptions {
  /** Cancels the call; the promise then rejects with CriAbortedError. */
  readonly signal?: AbortSignal;
  /** Per-call deadline in milliseconds; 0 means none. Defaults to the client's. */
  readonly timeoutMs?: number;
}

/** What grpc-js needs to make a call: the path and the two codecs. */
export interface MethodDefinition<Req, Res> {
  readonly path: string;
  readonly responseStream: boolean;
  readonly requestSerialize: (value: Req) => Buffer;
  readonly responseDeserialize: (value: Buffer) => Res;
}

export type RequestOf<D> = D extends { requestSerialize: (value: infer R) => Buffer } ? R : never;
export type ResponseOf<D> = D extends { responseDeserialize: (value: Buffer) => infer R }
  ? R
  : never;

type UnaryKeys<S> = { [K in keyof S]: S[K] extends { responseStream: false } ? K : never }[keyof S];

/** One async method per unary RPC of a generated service definition. */
export type UnaryApi<S> = {
  readonly [K in UnaryKeys<S>]: (
    request: api.DeepPartial<RequestOf<S[K]>>,
    options?: CriCallOptions,
  ) => Promise<ResponseOf<S[K]>>;
};

export type RuntimeServiceDefinition = typeof api.RuntimeServiceService;
export type ImageServiceDefinition = typeof api.ImageServiceService;

export interface RuntimeService extends UnaryApi<RuntimeServiceDefinition> {
  /**
   * Container lifecycle events (containerd >= 1.7). Ends quietly when `signal` aborts;
   * throws CriUnimplementedError on runtimes without it.
   */
  getContainerEvents(options?: CriCallOptions): AsyncIterable<api.ContainerEventResponse>;
}

export type ImageService = UnaryApi<ImageServiceDefinition>;

/** A connection to one CRI runtime endpoint. */
export interface CriClient extends Disposable {
  readonly endpoint: string;
  readonly runtime: RuntimeService;
  readonly image: ImageService;
  /** Closes the channel: later calls fail with CriUnavailableError, calls in flight finish. Idempotent. */
  close(): void;
}
