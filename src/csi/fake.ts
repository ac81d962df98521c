/**
 * Test doubles: FakeCsiDriver is a scripted CSI node service (answers, a call log,
 * injected failures and hangs); FakeCsiNodeClient calls it in-process, and the contract
 * test serves the same driver over a real gRPC socket, so the fake and the real client
 * are checked against one behaviour. FakeCsiDriverRegistry is a CsiDriverStore that
 * records lookups and can refuse registrations.
 */
import { status as GrpcStatus } from '@grpc/grpc-js';
import { systemClock, type Clock } from '../util/clock.ts';
import { checkedNodeInfo, csiErrorOf } from './errors.ts';
import type { CsiNodeInfoManager } from './node-info.ts';
import type { CsiDriverStore } from './registry.ts';
import {
  type CsiExpandRequest,
  type CsiNodeCapabilities,
  type CsiNodeClient,
  type CsiNodeInfo,
  type CsiPublishRequest,
  type CsiStageRequest,
  type CsiVolumeStats,
} from './types.ts';
import { abortErrorOf, DEFAULT_CSI_TIMEOUT_MS, GrpcStatusError } from './unary.ts';
import { highestSupportedVersion } from './versions.ts';

export type CsiRpc =
  | 'NodeGetCapabilities'
  | 'NodeGetInfo'
  | 'NodeStageVolume'
  | 'NodeUnstageVolume'
  | 'NodePublishVolume'
  | 'NodeUnpublishVolume'
  | 'NodeGetVolumeStats'
  | 'NodeExpandVolume';

/** One call as the driver saw it. */
export interface CsiCall {
  readonly rpc: CsiRpc;
  readonly volumeId?: string;
  /** targetPath, stagingTargetPath or volumePath, whichever the RPC is about. */
  readonly path?: string;
  readonly readonly?: boolean;
  readonly accessType?: 'mount' | 'block';
  readonly requiredBytes?: bigint;
}

/** What the scripted driver answers. */
export interface FakeCsiDriverState {
  info: CsiNodeInfo;
  capabilities: CsiNodeCapabilities;
  stats: CsiVolumeStats;
  /** NodeExpandVolume's capacity; undefined: the required bytes. */
  expandedBytes?: bigint | undefined;
}

export const FAKE_DRIVER_DEFAULTS: FakeCsiDriverState = {
  info: {
    nodeId: 'csi-node-1',
    maxVolumesPerNode: 16,
    accessibleTopology: { 'topology.fake.csi/zone': 'zone-a' },
  },
  capabilities: {
    stageUnstageVolume: true,
    getVolumeStats: true,
    expandVolume: true,
    volumeCondition: false,
    singleNodeMultiWriter: false,
    volumeMountGroup: false,
  },
  stats: {
    usage: [
      { unit: 'BYTES', available: 900n, total: 1000n, used: 100n },
      { unit: 'INODES', available: 90n, total: 100n, used: 10n },
    ],
    condition: undefined,
  },
};

/** A CSI node service whose answers, failures and hangs the test scripts. */
export class FakeCsiDriver {
  state: FakeCsiDriverState;
  readonly calls: CsiCall[] = [];
  /** A stopped driver is unreachable: calls fail UNAVAILABLE and are not recorded. */
  stopped = false;
  readonly #failures = new Map<CsiRpc, GrpcStatusError[]>();
  readonly #hangs = new Map<CsiRpc, number>();

  constructor(state: Partial<FakeCsiDriverState> = {}) {
    this.state = { ...FAKE_DRIVER_DEFAULTS, ...state };
  }

  /** The next call of `rpc` fails with this gRPC status and message. */
  failNext(rpc: CsiRpc, code: GrpcStatus, message: string): void {
    const list = this.#failures.get(rpc) ?? [];
    list.push(new GrpcStatusError(code, message));
    this.#failures.set(rpc, list);
  }

  /** The next call of `rpc` never answers (the caller's deadline or signal ends it). */
  hangNext(rpc: CsiRpc): void {
    this.#hangs.set(rpc, (this.#hangs.get(rpc) ?? 0) + 1);
  }

  /**
   * Records the call and says how to answer: 'hang', a GrpcStatusError to fail with,
   * or 'ok' (the caller then builds the answer from `state`).
   */
  receive(call: CsiCall): 'ok' | 'hang' | GrpcStatusError {
    if (this.stopped) return new GrpcStatusError(GrpcStatus.UNAVAILABLE, 'the driver is stopped');
    this.calls.push(call);
    const hangs = this.#hangs.get(call.rpc) ?? 0;
    if (hangs > 0) {
      this.#hangs.set(call.rpc, hangs - 1);
      return 'hang';
    }
    const failure = this.#failures.get(call.rpc)?.shift();
    return failure ?? 'ok';
  }

  callsOf(rpc: CsiRpc): CsiCall[] {
    return this.calls.filter((c) => c.rpc === rpc);
  }
}

export interface FakeCsiNodeClientOptions {
  readonly clock?: Clock;
  readonly timeoutMs?: number;
}

/** A CsiNodeClient that calls a FakeCsiDriver in-process, with the real client's errors. */
export class FakeCsiNodeClient implements CsiNodeClient {
  readonly driverName: string;
  readonly driver: FakeCsiDriver;
  readonly endpoint: string;
  closed = false;
  readonly #clock: Clock;
  readonly #timeoutMs: number;

  constructor(
    driverName: string,
    driver = new FakeCsiDriver(),
    options: FakeCsiNodeClientOptions = {},
  ) {
    this.driverName = driverName;
    this.driver = driver;
    this.endpoint = `/fake/${driverName}.sock`;
    this.#clock = options.clock ?? systemClock;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_CSI_TIMEOUT_MS;
  }

  close(): void {
    this.closed = true;
  }

  [Symbol.dispose](): void {
    this.close();
  }

  async #call(call: CsiCall, signal: AbortSignal): Promise<void> {
    if (signal.aborted) throw abortErrorOf(`/csi.v1.Node/${call.rpc}`, signal);
    if (this.closed) {
      throw csiErrorOf(
        this.driverName,
        call.rpc,
        new GrpcStatusError(GrpcStatus.UNAVAILABLE, 'the channel is closed'),
      );
    }
    await Promise.resolve();
    const outcome = this.driver.receive(call);
    if (outcome === 'ok') return;
    if (outcome !== 'hang') throw csiErrorOf(this.driverName, call.rpc, outcome);
    try {
      await this.#clock.sleep(this.#timeoutMs, signal);
    } catch {
      throw abortErrorOf(`/csi.v1.Node/${call.rpc}`, signal);
    }
    throw csiErrorOf(
      this.driverName,
      call.rpc,
      new GrpcStatusError(GrpcStatus.DEADLINE_EXCEEDED, 'Deadline exceeded'),
    );
  }

  async nodeGetCapabilities(signal: AbortSignal): Promise<CsiNodeCapabilities> {
    await this.#call({ rpc: 'NodeGetCapabilities' }, signal);
    return { ...this.driver.state.capabilities };
  }

  async nodeGetInfo(signal: AbortSignal): Promise<CsiNodeInfo> {
    await this.#call({ rpc: 'NodeGetInfo' }, signal);
    return checkedNodeInfo(this.driverName, this.driver.state.info);
  }

  async nodeStageVolume(req: CsiStageRequest, signal: AbortSignal): Promise<void> {
    await this.#call(
      {
        rpc: 'NodeStageVolume',
        volumeId: req.volumeId,
        path: req.stagingTargetPath,
        accessType: req.volumeCapability.accessType.kind,
      },
      signal,
    );
  }

  async nodeUnstageVolume(
    volumeId: string,
    stagingTargetPath: string,
    signal: AbortSignal,
  ): Promise<void> {
    await this.#call({ rpc: 'NodeUnstageVolume', volumeId, path: stagingTargetPath }, signal);
  }

  async nodePublishVolume(req: CsiPublishRequest, signal: AbortSignal): Promise<void> {
    await this.#call(
      {
        rpc: 'NodePublishVolume',
        volumeId: req.volumeId,
        path: req.targetPath,
        readonly: req.readonly,
        accessType: req.volumeCapability.accessType.kind,
      },
      signal,
    );
  }

  async nodeUnpublishVolume(
    volumeId: string,
    targetPath: string,
    signal: AbortSignal,
  ): Promise<void> {
    await this.#call({ rpc: 'NodeUnpublishVolume', volumeId, path: targetPath }, signal);
  }

  async nodeGetVolumeStats(
    volumeId: string,
    volumePath: string,
    _stagingTargetPath: string,
    signal: AbortSignal,
  ): Promise<CsiVolumeStats> {
    await this.#call({ rpc: 'NodeGetVolumeStats', volumeId, path: volumePath }, signal);
    return this.driver.state.stats;
  }

  async nodeExpandVolume(req: CsiExpandRequest, signal: AbortSignal): Promise<bigint> {
    await this.#call(
      {
        rpc: 'NodeExpandVolume',
        volumeId: req.volumeId,
        path: req.volumePath,
        requiredBytes: req.requiredBytes,
      },
      signal,
    );
    return this.driver.state.expandedBytes ?? req.requiredBytes;
  }
}

interface FakeEntry {
  readonly client: CsiNodeClient;
  readonly endpoint: string;
}

/**
 * A CsiDriverStore for the plugin manager's and the volume manager's tests: drivers are
 * added directly or through register() (which builds FakeCsiNodeClients on `driverFor`),
 * lookups are recorded, and `refuse` makes the next register() fail.
 */
export class FakeCsiDriverRegistry implements CsiDriverStore {
  readonly lookups: string[] = [];
  readonly registered: { name: string; endpoint: string; versions: readonly string[] }[] = [];
  readonly deregistered: string[] = [];
  /** The next register() throws this. */
  refuse: Error | undefined;
  readonly #entries = new Map<string, FakeEntry>();
  readonly #driverFor: (name: string) => FakeCsiDriver;

  constructor(driverFor: (name: string) => FakeCsiDriver = () => new FakeCsiDriver()) {
    this.#driverFor = driverFor;
  }

  /** Puts a client in place without validation (for consumers' tests). */
  add(client: CsiNodeClient, endpoint = `/fake/${client.driverName}.sock`): void {
    this.#entries.set(client.driverName, { client, endpoint });
  }

  client(driverName: string): CsiNodeClient | undefined {
    this.lookups.push(driverName);
    return this.#entries.get(driverName)?.client;
  }

  drivers(): readonly string[] {
    return [...this.#entries.keys()].sort();
  }

  validate(name: string, _endpoint: string, versions: readonly string[]): void {
    highestSupportedVersion(versions);
    if (name === '') throw new Error('the driver name is empty');
  }

  register(name: string, endpoint: string, versions: readonly string[]): CsiNodeClient {
    const refused = this.refuse;
    if (refused !== undefined) {
      this.refuse = undefined;
      throw refused;
    }
    this.validate(name, endpoint, versions);
    this.registered.push({ name, endpoint, versions });
    const client = new FakeCsiNodeClient(name, this.#driverFor(name));
    this.#entries.set(name, { client, endpoint });
    return client;
  }

  deregister(name: string, endpoint: string): boolean {
    const entry = this.#entries.get(name);
    if (entry?.endpoint !== endpoint) return false;
    this.#entries.delete(name);
    this.deregistered.push(name);
    return true;
  }
}

/** A CsiNodeInfoManager that keeps the installed drivers in a map; `fail` makes the next call throw. */
export class FakeCsiNodeInfoManager implements CsiNodeInfoManager {
  readonly drivers = new Map<
    string,
    { nodeId: string; maxVolumesPerNode: number; topology: Readonly<Record<string, string>> }
  >();
  readonly ops: string[] = [];
  initialized = false;
  fail: Error | undefined;

  #check(op: string): Promise<void> {
    this.ops.push(op);
    const failure = this.fail;
    this.fail = undefined;
    return failure === undefined ? Promise.resolve() : Promise.reject(failure);
  }

  async initialize(): Promise<void> {
    await this.#check('initialize');
    this.initialized = true;
  }

  async installDriver(
    driverName: string,
    nodeId: string,
    maxVolumesPerNode: number,
    topology: Readonly<Record<string, string>>,
  ): Promise<void> {
    await this.#check(`install ${driverName}`);
    this.drivers.set(driverName, { nodeId, maxVolumesPerNode, topology });
  }

  async uninstallDriver(driverName: string): Promise<void> {
    await this.#check(`uninstall ${driverName}`);
    this.drivers.delete(driverName);
  }
}
