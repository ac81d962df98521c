/**
 * The plugin manager (upstream's pkg/kubelet/pluginmanager): node plugins announce
 * themselves by putting a unix socket under `<rootDir>/plugins_registry/` that serves
 * `pluginregistration.Registration`. The manager finds sockets (a directory watch plus
 * a periodic rescan, since watch events can be missed), asks each new one GetInfo,
 * hands it to the handler of its type (CSIPlugin), and answers NotifyRegistrationStatus.
 * A socket that disappears is deregistered; one that is recreated registers again.
 *
 * States: 'NEW' -start-> 'RUNNING' -stop-> 'STOPPED'. start() twice or after stop()
 * throws; stop() is idempotent and waits for operations in flight.
 */
/** PluginInfo.type values upstream defines (pluginregistration constants). */
export const CSI_PLUGIN = 'CSIPlugin';
export const DEVICE_PLUGIN = 'DevicePlugin';
export const DRA_PLUGIN = 'DRAPlugin';

/** What a plugin says about itself (GetInfo). */
export interface PluginInfo {
  readonly type: string;
  readonly name: string;
  /** Where the plugin's own service listens; empty: the registration socket itself. */
  readonly endpoint: string;
  readonly supportedVersions: readonly string[];
}

/** A consumer of one plugin type (upstream's cache.PluginHandler). */
export interface PluginHandler {
  /** Throws when the plugin cannot be registered (bad name, versions, endpoint). */
  validate(
    name: string,
    endpoint: string,
    versions: readonly string[],
    signal: AbortSignal,
  ): Promise<void>;
  register(
    name: string,
    endpoint: string,
    versions: readonly string[],
    signal: AbortSignal,
  ): Promise<void>;
  /** Never throws: failures are logged by the handler. */
  deregister(name: string, endpoint: string, signal: AbortSignal): Promise<void>;
}

/** The registration service of one plugin socket. */
export interface RegistrationClient {
  getInfo(signal: AbortSignal): Promise<PluginInfo>;
  notifyRegistrationStatus(registered: boolean, error: string, signal: AbortSignal): Promise<void>;
  close(): void;
}

export type RegistrationClientFactory = (socketPath: string) => RegistrationClient;

/**
 * The plugin sockets present now: socket path -> an identity that changes when the
 * socket is recreated (inode and change time), so a restarted plugin registers again.
 */
export type SocketSnapshot = ReadonlyMap<string, string>;

/** Where sockets are found. */
export interface SocketSource {
  /** Creates the directory (0750) if needed. */
  prepare(signal: AbortSignal): Promise<void>;
  scan(signal: AbortSignal): Promise<SocketSnapshot>;
  /** Calls `onChange` when something in the tree may have changed, until `signal` aborts. */
  watch(onChange: () => void, signal: AbortSignal): void;
}

/** One registered plugin (upstream's actual state of world entry). */
export interface RegisteredPlugin {
  readonly socketPath: string;
  readonly type: string;
  readonly name: string;
  readonly endpoint: string;
}

export type PluginManagerState = 'NEW' | 'RUNNING' | 'STOPPED';

export interface PluginManager {
  readonly state: PluginManagerState;
  /** Prepares the directory, scans it, and keeps watching until stop() or `signal` aborts. */
  start(signal: AbortSignal): Promise<void>;
  /** Stops watching and waits for operations in flight. Idempotent. */
  stop(): Promise<void>;
  /** The plugins registered now, by socket path. */
  registered(): readonly RegisteredPlugin[];
}
