/**
 * The fake runtime's memory: sandboxes and containers, their state machines, and the
 * CRI messages that describe them.
 *
 * Sandbox: READY --stop/kill--> NOTREADY --remove--> (gone). Stopping releases the IP.
 * Container: CREATED --start--> RUNNING --exit/stop--> EXITED --remove--> (gone); a
 * failed start goes CREATED -> EXITED (128, "StartError"); stopping a CREATED container
 * leaves it CREATED, as containerd does. Every transition publishes the event containerd
 * 2.x would (the caller decides whether the flavour has an event stream at all).
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import * as api from '../gen/runtime/v1/api.ts';
import type { Clock } from '../../util/clock.ts';
import type { EventHub } from './events.ts';
import type { FlavorTraits } from './flavor.ts';
import type { FakeImageStore } from './images.ts';
import { ContainerLog } from './logs.ts';
import { failed } from './rpc-failure.ts';
import type { FakeContainerInfo, FakeExecHandler, FakeStartHandler, FakeUsage } from './types.ts';

/** Exit code of a process killed with SIGKILL (128 + 9). */
export const KILLED_EXIT_CODE = 137;
/** Exit code of a process that dies of SIGTERM (128 + 15). */
export const TERMINATED_EXIT_CODE = 143;

/** A sandbox as the fake keeps it; `config` is the decoded RunPodSandbox config. */
export interface SandboxRecord {
  readonly id: string;
  readonly config: api.PodSandboxConfig;
  readonly runtimeHandler: string;
  readonly createdAt: bigint;
  readonly reservedName: string;
  state: api.PodSandboxState;
  ip: string;
}

/** A container as the fake keeps it (see the state machine above). */
export interface ContainerRecord {
  readonly id: string;
  readonly sandboxId: string;
  readonly config: api.ContainerConfig;
  readonly imageId: string;
  /** ContainerStatus.image.image: the reference used, else the image's first tag. */
  readonly imageName: string;
  /** ContainerStatus.imageRef: a repo digest when the image has one, else its id. */
  readonly imageRef: string;
  readonly reservedName: string;
  readonly logPath: string;
  readonly log: ContainerLog;
  readonly createdAt: bigint;
  state: api.ContainerState;
  startedAt: bigint;
  finishedAt: bigint;
  exitCode: number;
  reason: string;
  message: string;
  resources: api.LinuxContainerResources;
  stopExitCode: number;
  usage: FakeUsage;
}

/** Picks pod IPs from a /N subnet like host-local IPAM: in order, skipping the gateway. */
class IpPool {
  readonly #base: number;
  readonly #size: number;
  readonly #inUse = new Set<number>();
  #next = 2;
  readonly subnet: string;

  constructor(subnet: string) {
    const match = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(subnet);
    const bits = Number(match?.[5] ?? NaN);
    if (match === null || !(bits >= 8 && bits <= 30))
      throw new Error(`Cannot use pod subnet ${subnet}: expected a.b.c.d/N with 8 <= N <= 30`);
    const octets = match.slice(1, 5).map(Number);
    const address = octets.reduce((acc, o) => acc * 256 + o, 0);
    this.#size = 2 ** (32 - bits);
    this.#base = address - (address % this.#size);
    this.subnet = subnet;
  }

  allocate(): string {
    // Host addresses are 1 .. size-2; 1 is the bridge's gateway.
    for (let tried = 0; tried < this.#size; tried++) {
      const offset = this.#next;
      this.#next = this.#next + 1 >= this.#size - 1 ? 2 : this.#next + 1;
      if (this.#inUse.has(offset)) continue;
      this.#inUse.add(offset);
      const n = this.#base + offset;
      return [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join('.');
    }
    throw failed(`failed to set up the pod network: no IP addresses left in ${this.subnet}`);
  }

  release(ip: string): void {
    const n = ip.split('.').reduce((acc, o) => acc * 256 + Number(o), 0);
    this.#inUse.delete(n - this.#base);
  }
}

/** Finds a record by full id or, as containerd allows, by a unique id prefix. */
function byIdOrPrefix<T>(map: ReadonlyMap<string, T>, id: string): T | undefined {
  if (id === '') return undefined;
  const exact = map.get(id);
  if (exact !== undefined) return exact;
  const matches = [...map.keys()].filter((k) => k.startsWith(id));
  const only = matches.length === 1 ? matches[0] : undefined;
  return only === undefined ? undefined : map.get(only);
}

/** CRI label selectors: every key of `selector` present with the same value. */
export function labelsMatch(
  labels: Readonly<Record<string, string>>,
  selector: Readonly<Record<string, string>>,
): boolean {
  return Object.entries(selector).every(([k, v]) => labels[k] === v);
}

/** What FakeRuntimeState is built from. */
export interface StateOptions {
  readonly clock: Clock;
  readonly traits: FlavorTraits;
  readonly events: EventHub;
  readonly images: FakeImageStore;
  readonly podSubnet: string;
}

/** Sandboxes and containers of one fake runtime. */
export class FakeRuntimeState {
  readonly sandboxes = new Map<string, SandboxRecord>();
  readonly containers = new Map<string, ContainerRecord>();
  /** Reserved sandbox and container names -> the id holding them. */
  readonly names = new Map<string, string>();
  readonly traits: FlavorTraits;
  readonly images: FakeImageStore;
  readonly #events: EventHub;
  readonly #clock: Clock;
  readonly #ips: IpPool;
  #lastNs = 0n;
  #ids = 0;

  constructor(options: StateOptions) {
    this.#clock = options.clock;
    this.traits = options.traits;
    this.#events = options.events;
    this.images = options.images;
    this.#ips = new IpPool(options.podSubnet);
  }

  /**
   * The clock in nanoseconds, strictly increasing: a fake clock that does not move
   * still orders events and timestamps, as real time always would.
   */
  nowNs(): bigint {
    const now = BigInt(Math.trunc(this.#clock.now())) * 1_000_000n;
    this.#lastNs = now > this.#lastNs ? now : this.#lastNs + 1n;
    return this.#lastNs;
  }

  /** A 64-hex id like containerd's; deterministic within one fake for reproducible tests. */
  newId(kind: 'sandbox' | 'container' | 'stream'): string {
    this.#ids += 1;
    return createHash('sha256').update(`${kind} ${this.#ids}`).digest('hex');
  }

  allocateIp(): string {
    return this.#ips.allocate();
  }

  sandbox(id: string): SandboxRecord | undefined {
    return byIdOrPrefix(this.sandboxes, id);
  }

  container(id: string): ContainerRecord | undefined {
    return byIdOrPrefix(this.containers, id);
  }

  containersOf(sandboxId: string): ContainerRecord[] {
    return [...this.containers.values()].filter((c) => c.sandboxId === sandboxId);
  }

  newContainerLog(sandbox: SandboxRecord, logPath: string): { path: string; log: ContainerLog } {
    const dir = sandbox.config.logDirectory;
    const path = dir === '' || logPath === '' ? '' : join(dir, logPath);
    return { path, log: new ContainerLog(path, dir) };
  }

  // --- transitions -------------------------------------------------------------------

  /** RUNNING -> EXITED. */
  exit(c: ContainerRecord, exitCode: number, reason?: string, message?: string): void {
    c.state = api.ContainerState.CONTAINER_EXITED;
    c.finishedAt = this.nowNs();
    c.exitCode = exitCode;
    c.reason = reason ?? (exitCode === 0 ? 'Completed' : 'Error');
    c.message = message ?? '';
    this.emitContainer(c, api.ContainerEventType.CONTAINER_STOPPED_EVENT);
  }

  /** With a grace period the process answers SIGTERM its own way; without, it is killed. */
  stopContainer(c: ContainerRecord, graceful: boolean): void {
    if (c.state !== api.ContainerState.CONTAINER_RUNNING) return;
    this.exit(c, graceful ? c.stopExitCode : KILLED_EXIT_CODE);
  }

  removeContainer(c: ContainerRecord): void {
    // Removing a running container kills it first (SIGKILL), as containerd's force removal.
    if (c.state === api.ContainerState.CONTAINER_RUNNING) this.exit(c, KILLED_EXIT_CODE);
    this.containers.delete(c.id);
    this.names.delete(c.reservedName);
    this.emitContainer(c, api.ContainerEventType.CONTAINER_DELETED_EVENT);
  }

  /** Kills the sandbox's running containers, tears down its network, marks it NOTREADY. */
  stopSandbox(sb: SandboxRecord): void {
    for (const c of this.containersOf(sb.id)) {
      if (c.state === api.ContainerState.CONTAINER_RUNNING) this.exit(c, KILLED_EXIT_CODE);
    }
    if (sb.ip !== '') this.#ips.release(sb.ip);
    sb.ip = '';
    if (sb.state === api.PodSandboxState.SANDBOX_READY) {
      sb.state = api.PodSandboxState.SANDBOX_NOTREADY;
      this.emitSandbox(sb, api.ContainerEventType.CONTAINER_STOPPED_EVENT);
    }
  }

  removeSandbox(sb: SandboxRecord): void {
    this.stopSandbox(sb);
    for (const c of this.containersOf(sb.id)) this.removeContainer(c);
    this.sandboxes.delete(sb.id);
    this.names.delete(sb.reservedName);
    this.emitSandbox(sb, api.ContainerEventType.CONTAINER_DELETED_EVENT);
  }

  // --- events ------------------------------------------------------------------------

  /** Sandbox events carry the sandbox id as containerId, as containerd's do. */
  emitSandbox(sb: SandboxRecord, type: api.ContainerEventType): void {
    this.#events.publish(
      api.ContainerEventResponse.fromPartial({
        containerId: sb.id,
        containerEventType: type,
        createdAt: this.nowNs(),
        podSandboxStatus: this.sandboxStatus(sb),
        containersStatuses: this.containersOf(sb.id).map((c) => this.containerStatus(c)),
      }),
    );
  }

  /** Container events carry the sandbox's status and all its containers' statuses. */
  emitContainer(c: ContainerRecord, type: api.ContainerEventType): void {
    const sb = this.sandboxes.get(c.sandboxId);
    this.#events.publish(
      api.ContainerEventResponse.fromPartial({
        containerId: c.id,
        containerEventType: type,
        createdAt: this.nowNs(),
        podSandboxStatus: sb === undefined ? undefined : this.sandboxStatus(sb),
        containersStatuses: this.containersOf(c.sandboxId).map((x) => this.containerStatus(x)),
      }),
    );
  }

  // --- messages ----------------------------------------------------------------------

  sandboxStatus(sb: SandboxRecord): api.PodSandboxStatus {
    const ns = sb.config.linux?.securityContext?.namespaceOptions;
    return api.PodSandboxStatus.fromPartial({
      id: sb.id,
      metadata: sb.config.metadata,
      state: sb.state,
      createdAt: sb.createdAt,
      network: { ip: sb.ip, additionalIps: [] },
      linux: {
        namespaces: {
          options: {
            network: ns?.network ?? api.NamespaceMode.POD,
            pid: ns?.pid ?? api.NamespaceMode.POD,
            ipc: ns?.ipc ?? api.NamespaceMode.POD,
            targetId: ns?.targetId ?? '',
          },
        },
      },
      labels: sb.config.labels,
      annotations: sb.config.annotations,
      runtimeHandler: sb.runtimeHandler,
    });
  }

  podSandbox(sb: SandboxRecord): api.PodSandbox {
    return api.PodSandbox.fromPartial({
      id: sb.id,
      metadata: sb.config.metadata,
      state: sb.state,
      createdAt: sb.createdAt,
      labels: sb.config.labels,
      annotations: sb.config.annotations,
      runtimeHandler: sb.runtimeHandler,
    });
  }

  containerStatus(c: ContainerRecord): api.ContainerStatus {
    const v2 = this.traits.reportsImageId;
    return api.ContainerStatus.fromPartial({
      id: c.id,
      metadata: c.config.metadata,
      state: c.state,
      createdAt: c.createdAt,
      startedAt: c.startedAt,
      finishedAt: c.finishedAt,
      exitCode: c.exitCode,
      image: { image: c.imageName },
      imageRef: c.imageRef,
      reason: c.reason,
      message: c.message,
      labels: c.config.labels,
      annotations: c.config.annotations,
      mounts: c.config.mounts,
      logPath: c.logPath,
      resources: { linux: c.resources },
      imageId: v2 ? c.imageId : '',
      user: v2 ? { linux: { uid: 0n, gid: 0n, supplementalGroups: [0n] } } : undefined,
      stopSignal: v2
        ? c.config.stopSignal === api.Signal.SIGNAL_RUNTIME_DEFAULT
          ? api.Signal.SIGNAL_SIGTERM
          : c.config.stopSignal
        : api.Signal.SIGNAL_RUNTIME_DEFAULT,
    });
  }

  containerItem(c: ContainerRecord): api.Container {
    return api.Container.fromPartial({
      id: c.id,
      podSandboxId: c.sandboxId,
      metadata: c.config.metadata,
      image: { image: c.imageId },
      imageRef: c.imageId,
      state: c.state,
      createdAt: c.createdAt,
      labels: c.config.labels,
      annotations: c.config.annotations,
      imageId: this.traits.reportsImageId ? c.imageId : '',
    });
  }

  info(c: ContainerRecord): FakeContainerInfo {
    return {
      id: c.id,
      podSandboxId: c.sandboxId,
      name: c.config.metadata?.name ?? '',
      attempt: c.config.metadata?.attempt ?? 0,
      command: [...c.config.command],
      args: [...c.config.args],
      image: c.config.image?.image ?? '',
      labels: { ...c.config.labels },
      annotations: { ...c.config.annotations },
      logPath: c.logPath,
    };
  }
}

/** The handlers installed by the test (see FakeCriClient.onStart / onExec). */
export interface Scripts {
  onStart: FakeStartHandler | undefined;
  onExec: FakeExecHandler | undefined;
}

/** What the RuntimeService handlers share. */
export interface RuntimeContext {
  readonly state: FakeRuntimeState;
  readonly scripts: Scripts;
  /** Status conditions by type, in report order. */
  readonly conditions: Map<string, api.RuntimeCondition>;
  /** Base of the URLs Exec, Attach and PortForward answer with. */
  readonly streamingUrl: string;
  /** Named runtime handlers besides the default ('') one. */
  readonly runtimeHandlers: readonly string[];
  readonly cgroupDriver: api.CgroupDriver;
  readonly runtimeVersion: string;
}

const STATE_NAMES: Readonly<Record<number, string>> = {
  [api.ContainerState.CONTAINER_CREATED]: 'CONTAINER_CREATED',
  [api.ContainerState.CONTAINER_RUNNING]: 'CONTAINER_RUNNING',
  [api.ContainerState.CONTAINER_EXITED]: 'CONTAINER_EXITED',
  [api.ContainerState.CONTAINER_UNKNOWN]: 'CONTAINER_UNKNOWN',
};

/** "CONTAINER_RUNNING" etc., for messages. */
export function containerStateName(state: api.ContainerState): string {
  return STATE_NAMES[state] ?? `state ${state}`;
}
