/**
 * FakeCriClient: an in-memory CRI runtime behind the same CriClient interface as the
 * gRPC client, for the unit tests of the pod workers, the sync loop and the PLEG. It
 * passes the same contract suite (test/contract/cri-runtime.contract.ts) as containerd
 * 2.x and 1.6, and answers like the flavour it is configured as.
 *
 * Calls behave like calls over a socket (see transport.ts): codecs both ways, answers on
 * a later tick, the real client's typed errors, CriUnavailableError once closed. Tests
 * script containers with onStart/onExec and steer the runtime with exitContainer,
 * failNext, holdNext and the injected clock; nothing ever sleeps for real.
 */
import { status as GrpcStatus } from '@grpc/grpc-js';
import * as api from '../gen/runtime/v1/api.ts';
import { IMAGE_REQUESTS, RUNTIME_REQUESTS } from '../request-codecs.ts';
import type { CriCallOptions, CriClient, ImageService, RuntimeService } from '../types.ts';
import { systemClock, type Clock } from '../../util/clock.ts';
import { containerHandlers } from './container-handlers.ts';
import { EventHub } from './events.ts';
import { flavorTraits } from './flavor.ts';
import { FakeImageStore } from './images.ts';
import { runtimeInfoHandlers } from './runtime-info.ts';
import { sandboxHandlers } from './sandbox-handlers.ts';
import {
  FakeRuntimeState,
  containerStateName,
  type ContainerRecord,
  type RuntimeContext,
  type Scripts,
} from './state.ts';
import { FakeTransport, type FakeHold } from './transport.ts';
import type {
  CriMethod,
  FakeCall,
  FakeExecHandler,
  FakeFailure,
  FakeImageOptions,
  FakeImageRef,
  FakeRuntimeFlavor,
  FakeStartHandler,
  FakeUsage,
} from './types.ts';

/** How to build a FakeCriClient; every option has a default that suits most unit tests. */
export interface FakeCriClientOptions {
  /** Which containerd to behave like (default containerd2). */
  readonly flavor?: FakeRuntimeFlavor;
  /** Source of every timestamp, and of held calls' deadlines (default: the system clock). */
  readonly clock?: Clock;
  /** Pod IPs come from here, from .2 upwards (default 10.88.0.0/24). */
  readonly podSubnet?: string;
  /** CriClient.endpoint (default fake://<flavor>). */
  readonly endpoint?: string;
  /** Preloaded (and, on 2.x, pinned) like the pause image (default registry.k8s.io/pause:3.10). */
  readonly sandboxImage?: string;
  /** Deadline of a held call in ms, as the real client's default (120 000); 0 = none. */
  readonly defaultTimeoutMs?: number;
  /** Base of Exec/Attach/PortForward URLs (default http://127.0.0.1:10010). */
  readonly streamingUrl?: string;
  /** Named runtime handlers besides the default one (default ["runc"]). */
  readonly runtimeHandlers?: readonly string[];
  /** What RuntimeConfig reports (default cgroupfs, like the test cluster). */
  readonly cgroupDriver?: api.CgroupDriver;
  /** Version.runtimeVersion (default per flavour, e.g. v2.4.2-berth-fake). */
  readonly runtimeVersion?: string;
  /** Mount point ImageFsInfo and writable-layer stats report. */
  readonly imageFsMountpoint?: string;
}

const EVENTS: CriMethod = 'RuntimeService/GetContainerEvents';

/** An in-memory CRI runtime that behaves like containerd 2.x or 1.6. */
export class FakeCriClient implements CriClient {
  readonly endpoint: string;
  readonly runtime: RuntimeService;
  readonly image: ImageService;
  readonly flavor: FakeRuntimeFlavor;
  readonly #state: FakeRuntimeState;
  readonly #hub = new EventHub();
  readonly #transport: FakeTransport;
  readonly #scripts: Scripts = { onStart: undefined, onExec: undefined };
  readonly #conditions = new Map<string, api.RuntimeCondition>();

  constructor(options: FakeCriClientOptions = {}) {
    this.flavor = options.flavor ?? 'containerd2';
    this.endpoint = options.endpoint ?? `fake://${this.flavor}`;
    const traits = flavorTraits(this.flavor);
    const clock = options.clock ?? systemClock;
    this.#transport = new FakeTransport({
      clock,
      traits,
      events: this.#hub,
      defaultTimeoutMs: options.defaultTimeoutMs ?? 120_000,
    });
    const images = new FakeImageStore(
      options.imageFsMountpoint ?? '/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs',
      () => this.#state.nowNs(),
    );
    this.#state = new FakeRuntimeState({
      clock,
      traits,
      events: this.#hub,
      images,
      podSubnet: options.podSubnet ?? '10.88.0.0/24',
    });
    const sandboxImage = options.sandboxImage ?? 'registry.k8s.io/pause:3.10';
    images.add(sandboxImage, { preloaded: true, uid: 65535n, sizeBytes: 320_000 });
    if (traits.pinsSandboxImage) images.pin(sandboxImage);
    for (const type of ['RuntimeReady', 'NetworkReady']) this.setCondition(type, true);

    const ctx: RuntimeContext = {
      state: this.#state,
      scripts: this.#scripts,
      conditions: this.#conditions,
      streamingUrl: options.streamingUrl ?? 'http://127.0.0.1:10010',
      runtimeHandlers: options.runtimeHandlers ?? ['runc'],
      cgroupDriver: options.cgroupDriver ?? api.CgroupDriver.CGROUPFS,
      runtimeVersion: options.runtimeVersion ?? traits.runtimeVersion,
    };
    const runtime = this.#transport.bind(api.RuntimeServiceService, RUNTIME_REQUESTS, {
      ...sandboxHandlers(ctx),
      ...containerHandlers(ctx),
      ...runtimeInfoHandlers(ctx),
    });
    this.runtime = {
      ...runtime,
      getContainerEvents: (opts?: CriCallOptions) => this.#transport.events(opts),
    };
    this.image = this.#transport.bind(api.ImageServiceService, IMAGE_REQUESTS, images.handlers());
  }

  /** Fails in-flight calls and open event streams with CriUnavailableError. Idempotent. */
  close(): void {
    this.#transport.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  get closed(): boolean {
    return this.#transport.closed;
  }

  // --- test controls -----------------------------------------------------------------

  /** Every request received, in order (after the closed/aborted checks). */
  get calls(): readonly FakeCall[] {
    return this.#transport.calls;
  }

  /** The requests one method received, e.g. callsTo('RuntimeService/StopContainer'). */
  callsTo(method: CriMethod): unknown[] {
    return this.#transport.calls.filter((c) => c.method === method).map((c) => c.request);
  }

  clearCalls(): void {
    this.#transport.calls.length = 0;
  }

  /** Puts an image in the fake registry (and, with `preloaded`, in the runtime's store). */
  addImage(ref: string, options?: FakeImageOptions): FakeImageRef {
    return this.#state.images.add(ref, options);
  }

  /** Decides what each started container does; undefined restores "runs until stopped". */
  onStart(handler: FakeStartHandler | undefined): void {
    this.#scripts.onStart = handler;
  }

  /** Answers ExecSync; undefined restores the default (exit 0, no output). */
  onExec(handler: FakeExecHandler | undefined): void {
    this.#scripts.onExec = handler;
  }

  /** The container's process exits: RUNNING -> EXITED with a STOPPED event. */
  exitContainer(
    containerId: string,
    exitCode: number,
    options: { readonly reason?: string; readonly message?: string } = {},
  ): void {
    const c = this.#container(containerId);
    if (c.state !== api.ContainerState.CONTAINER_RUNNING)
      throw new Error(
        `Cannot exit container ${containerId} as it is not running: current state is ${containerStateName(c.state)}`,
      );
    this.#state.exit(c, exitCode, options.reason, options.message);
  }

  /** The sandbox's pause process dies: READY -> NOTREADY; its containers keep running. */
  killSandbox(podSandboxId: string): void {
    const sb = this.#state.sandbox(podSandboxId);
    if (sb === undefined) throw new Error(`Cannot kill sandbox ${podSandboxId}: no such sandbox`);
    if (sb.state !== api.PodSandboxState.SANDBOX_READY) return;
    sb.state = api.PodSandboxState.SANDBOX_NOTREADY;
    this.#state.emitSandbox(sb, api.ContainerEventType.CONTAINER_STOPPED_EVENT);
  }

  /** Appends one CRI log record per line of `text` to the container's log. */
  writeLog(containerId: string, stream: 'stdout' | 'stderr', text: string): Promise<void> {
    const c = this.#container(containerId);
    return c.log.append(this.#state.nowNs(), { stream, text });
  }

  /** The container's log so far, in CRI format (also when no file is written). */
  logText(containerId: string): string {
    return this.#container(containerId).log.text;
  }

  /** What ContainerStats and the sandbox stats report for the container from now on. */
  setUsage(containerId: string, usage: FakeUsage): void {
    const c = this.#container(containerId);
    c.usage = { ...c.usage, ...usage };
  }

  /** Sets a Status condition, e.g. setCondition('NetworkReady', false, { reason: 'NoCNI' }). */
  setCondition(
    type: string,
    status: boolean,
    options: { readonly reason?: string; readonly message?: string } = {},
  ): void {
    this.#conditions.set(type, api.RuntimeCondition.fromPartial({ type, status, ...options }));
  }

  /**
   * The next call of `method` fails (queued: one failure per call): an Error is thrown as
   * given, a FakeFailure becomes the typed error the real client makes of that status.
   */
  failNext(method: CriMethod, failure: Error | FakeFailure): void {
    this.#transport.failNext(method, failure);
  }

  /**
   * Stops the next call of `method` before the runtime acts on it, until `release()`.
   * Meanwhile the caller's signal, close() and the call's deadline (on the injected
   * clock) settle it as they would a slow runtime call. Release, abort or close() every
   * held call: with the system clock its deadline is a real timer.
   */
  holdNext(method: CriMethod): FakeHold {
    return this.#transport.holdNext(method);
  }

  /** Ends every open GetContainerEvents stream with an error, as a runtime restart does. */
  breakEventStreams(
    failure: Error | FakeFailure = {
      grpcCode: GrpcStatus.UNAVAILABLE,
      details: 'error reading from server: EOF',
    },
  ): void {
    this.#hub.failAll(this.#transport.injectedError(EVENTS, failure));
  }

  /** Open GetContainerEvents streams. */
  get eventStreams(): number {
    return this.#hub.size;
  }

  #container(id: string): ContainerRecord {
    const c = this.#state.container(id);
    if (c === undefined) throw new Error(`Cannot find container ${id} in the fake runtime`);
    return c;
  }
}
