/**
 * The vocabulary of the fake CRI runtime: the method names it answers, the flavours of
 * containerd it imitates, and the handlers tests install to script what a container
 * does when it starts or when something is executed in it.
 */
import type { status as GrpcStatus } from '@grpc/grpc-js';
import type {
  ImageServiceDefinition,
  RequestOf,
  ResponseOf,
  RuntimeServiceDefinition,
  UnaryApi,
} from '../types.ts';

type PathOf<S> = { [K in keyof S]: S[K] extends { readonly path: infer P } ? P : never }[keyof S];
type NameOf<P> = P extends `/runtime.v1.${infer M}` ? M : never;

/** A CRI method as errors name it, e.g. "RuntimeService/ContainerStatus". */
export type CriMethod = NameOf<PathOf<RuntimeServiceDefinition> | PathOf<ImageServiceDefinition>>;

/**
 * Which real runtime the fake behaves like. They differ where berth must cope with both:
 * 1.6 has no GetContainerEvents, RuntimeConfig or metrics RPCs, answers NotFound when
 * asked to stop what does not exist, and leaves ContainerStatus.imageId empty.
 */
export type FakeRuntimeFlavor = 'containerd2' | 'containerd1';

/** An injected failure: a gRPC status the fake answers with, classified like a real one. */
export interface FakeFailure {
  readonly grpcCode: GrpcStatus;
  readonly details?: string;
}

/** What a handler learns about the container it scripts (a snapshot; changing it does nothing). */
export interface FakeContainerInfo {
  readonly id: string;
  readonly podSandboxId: string;
  /** ContainerConfig.metadata.name and .attempt. */
  readonly name: string;
  readonly attempt: number;
  readonly command: readonly string[];
  readonly args: readonly string[];
  /** The image as CreateContainer named it (a reference or an image id). */
  readonly image: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  /** Absolute log path (sandbox logDirectory + config.logPath), '' when either is empty. */
  readonly logPath: string;
}

/**
 * One line of container output, written to the CRI log as a full ("F") record; with
 * `partial`, output that did not end in a newline (`printf x`), which a runtime writes
 * as a partial ("P") record, as containerd does.
 */
export interface FakeLogLine {
  readonly stream: 'stdout' | 'stderr';
  readonly text: string;
  readonly partial?: boolean;
}

/** What a started container does; every field is optional (default: runs until stopped). */
export interface FakeStartOutcome {
  /** Lines the process prints right after it starts, in order. */
  readonly output?: readonly FakeLogLine[];
  /** The process exits right after starting (a crash, or a job that completes). */
  readonly exitCode?: number;
  /** ContainerStatus.reason on that exit; default "Completed" for 0, "Error" otherwise. */
  readonly reason?: string;
  readonly message?: string;
  /**
   * StartContainer fails with this message, as when the entrypoint does not exist: the
   * container ends EXITED with exit code 128 and reason "StartError", as containerd does.
   */
  readonly startError?: string;
  /**
   * Exit code when StopContainer stops it with a grace period (timeout > 0). Default 143:
   * the process dies of SIGTERM, as busybox `sleep` does. A process that handles SIGTERM
   * gives its own code (often 0); one that ignores it is killed at the deadline (137).
   * A stop without grace period (timeout 0) always kills it (137), as containerd does.
   */
  readonly stopExitCode?: number;
}

/** Decides what a container does when StartContainer runs; undefined means "keeps running". */
export type FakeStartHandler = (
  container: FakeContainerInfo,
) => FakeStartOutcome | undefined | Promise<FakeStartOutcome | undefined>;

/** The result of one ExecSync. */
export interface FakeExecOutcome {
  readonly stdout?: string | Uint8Array;
  readonly stderr?: string | Uint8Array;
  readonly exitCode?: number;
  /**
   * How long the command would run. Longer than the request's timeout makes ExecSync
   * fail with DeadlineExceeded, as a real runtime does, without the fake waiting at all.
   */
  readonly durationMs?: number;
}

/**
 * Answers ExecSync. Throwing a CriError fails the call with it; any other error fails
 * it like a command the runtime could not start (gRPC Unknown).
 */
export type FakeExecHandler = (
  container: FakeContainerInfo,
  cmd: readonly string[],
) => FakeExecOutcome | Promise<FakeExecOutcome>;

/** Resource usage ContainerStats reports for a running container (all default to 0). */
export interface FakeUsage {
  readonly cpuUsageCoreNanoSeconds?: bigint;
  readonly memoryWorkingSetBytes?: bigint;
  readonly memoryUsageBytes?: bigint;
  readonly memoryRssBytes?: bigint;
  readonly writableLayerBytes?: bigint;
}

/** Options of `addImage`. */
export interface FakeImageOptions {
  /** The registry refuses a pull without exactly these credentials. */
  readonly credentials?: { readonly username: string; readonly password: string };
  /** Already in the runtime's store, as if imported before berth started. */
  readonly preloaded?: boolean;
  /** The fake registry serves it (default true); false models an image that is only local. */
  readonly pullable?: boolean;
  /** Share an image id with another reference (one image under two names). */
  readonly id?: string;
  readonly sizeBytes?: number;
  /** The image config's numeric user, reported as Image.uid. */
  readonly uid?: bigint;
}

/** What `addImage` registered. */
export interface FakeImageRef {
  /** The image id, "sha256:<64 hex>", which PullImage answers as imageRef. */
  readonly id: string;
  /** "<repository>@sha256:<manifest digest>". */
  readonly repoDigest: string;
}

/** One request the fake received, in arrival order. */
export interface FakeCall {
  readonly method: CriMethod;
  /** The request with proto3 defaults filled in, as the runtime would decode it. */
  readonly request: unknown;
}

type HandlersOf<S> = {
  readonly [K in keyof UnaryApi<S> & keyof S]: (
    request: RequestOf<S[K]>,
  ) => ResponseOf<S[K]> | Promise<ResponseOf<S[K]>>;
};

/** The fake's answer to each unary RuntimeService RPC (the request already has its defaults). */
export type RuntimeHandlers = HandlersOf<RuntimeServiceDefinition>;
/** The fake's answer to each ImageService RPC. */
export type ImageHandlers = HandlersOf<ImageServiceDefinition>;
