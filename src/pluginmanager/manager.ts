/**
 * The plugin manager: upstream's desired state (the sockets present), actual state (the
 * plugins registered) and reconciler in one class. A reconcile runs on every watch event
 * and every `rescanMs`; it first deregisters plugins whose socket is gone or was
 * recreated, then registers sockets not registered yet. One operation per socket at a
 * time (upstream's goroutinemap), all sockets in parallel, each bounded by deadlines, so
 * a plugin that hangs or lies delays only itself. A failed registration is retried after
 * an exponential back-off (500 ms doubling to 2 min, upstream's goroutinemap back-off).
 */
import { Backoff } from '../util/backoff.ts';
import type { Clock } from '../util/clock.ts';
import { isAborted } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import type {
  PluginHandler,
  PluginManager,
  PluginManagerState,
  RegisteredPlugin,
  RegistrationClientFactory,
  SocketSnapshot,
  SocketSource,
} from './types.ts';

export interface PluginManagerOptions {
  readonly source: SocketSource;
  /** Handlers by PluginInfo.type (upstream: CSIPlugin, DevicePlugin, DRAPlugin). */
  readonly handlers: ReadonlyMap<string, PluginHandler>;
  readonly newClient: RegistrationClientFactory;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Periodic rescan (watch events can be missed). */
  readonly rescanMs?: number;
  /** Bound of a handler's register or deregister (NodeGetInfo plus API writes). */
  readonly handlerTimeoutMs?: number;
}

const DEFAULT_RESCAN_MS = 2_000;
const DEFAULT_HANDLER_TIMEOUT_MS = 150_000;

interface Registered extends RegisteredPlugin {
  readonly identity: string;
  readonly handler: PluginHandler;
}

/** Runs `fn` with a signal that aborts after `ms` or with `parent`; listeners always removed. */
async function withDeadline<T>(
  parent: AbortSignal,
  clock: Clock,
  ms: number,
  what: string,
  fn: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const ac = new AbortController();
  const stopTimer = new AbortController();
  const onAbort = (): void => {
    ac.abort(parent.reason);
  };
  parent.addEventListener('abort', onAbort, { once: true });
  clock.sleep(ms, stopTimer.signal).then(
    () => {
      ac.abort(new Error(`${what} timed out after ${String(ms)} ms`));
    },
    () => undefined,
  );
  try {
    return await fn(ac.signal);
  } finally {
    stopTimer.abort();
    parent.removeEventListener('abort', onAbort);
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export class PluginManagerImpl implements PluginManager {
  #state: PluginManagerState = 'NEW';
  readonly #o: PluginManagerOptions;
  readonly #rescanMs: number;
  readonly #handlerTimeoutMs: number;
  readonly #registered = new Map<string, Registered>();
  /** Sockets in #registered whose handler register has not finished yet. */
  readonly #registering = new Set<string>();
  /** Socket path -> the operation running on it. */
  readonly #inFlight = new Map<string, Promise<void>>();
  /** Back-off keys (socket path + identity) of failed registrations. */
  readonly #failed = new Set<string>();
  readonly #backoff: Backoff;
  #desired: SocketSnapshot = new Map();
  #stop = new AbortController();
  #loop: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  #dirty = false;

  constructor(options: PluginManagerOptions) {
    this.#o = options;
    this.#rescanMs = options.rescanMs ?? DEFAULT_RESCAN_MS;
    this.#handlerTimeoutMs = options.handlerTimeoutMs ?? DEFAULT_HANDLER_TIMEOUT_MS;
    this.#backoff = new Backoff(options.clock, {
      initialMs: 500,
      maxMs: 122_000,
      resetAfterMs: 10 * 60_000,
    });
  }

  get state(): PluginManagerState {
    return this.#state;
  }

  registered(): readonly RegisteredPlugin[] {
    return [...this.#registered.values()]
      .filter((p) => !this.#registering.has(p.socketPath))
      .map(({ socketPath, type, name, endpoint }) => ({ socketPath, type, name, endpoint }))
      .sort((a, b) => a.socketPath.localeCompare(b.socketPath));
  }

  async start(signal: AbortSignal): Promise<void> {
    if (this.#state !== 'NEW') {
      throw new Error(`Cannot start the plugin manager: it is ${this.#state}`);
    }
    this.#state = 'RUNNING';
    const stop = this.#stop.signal;
    signal.addEventListener(
      'abort',
      () => {
        this.#stop.abort(signal.reason);
      },
      { once: true, signal: stop },
    );
    await this.#o.source.prepare(stop);
    this.#o.source.watch(() => {
      this.#kick();
    }, stop);
    this.#o.logger.info('Plugin manager started');
    this.#loop = this.#run(stop);
  }

  async stop(): Promise<void> {
    if (this.#state === 'STOPPED') return;
    this.#state = 'STOPPED';
    this.#stop.abort(new DOMException('The plugin manager stopped', 'AbortError'));
    await this.#loop;
    await Promise.allSettled([...this.#inFlight.values()]);
  }

  /** Re-read through a method: the flag changes during the awaits of a scan. */
  #isDirty(): boolean {
    return this.#dirty;
  }

  /** Asks for a reconcile now (a watch event, an operation that finished). */
  #kick(): void {
    this.#dirty = true;
    this.#wake?.();
  }

  async #run(stop: AbortSignal): Promise<void> {
    while (!stop.aborted) {
      this.#dirty = false;
      try {
        this.#desired = await this.#o.source.scan(stop);
        this.#reconcile(stop);
      } catch (err) {
        if (isAborted(stop)) break;
        this.#o.logger.error('Plugin registry scan failed', { err: messageOf(err) });
      }
      // A kick during the scan (a watch event, an operation that ended) rescans at once.
      if (this.#isDirty()) continue;
      await this.#sleep(stop);
    }
  }

  /** Waits for the rescan period or a kick, whichever comes first. */
  async #sleep(stop: AbortSignal): Promise<void> {
    const timer = new AbortController();
    const woken = new Promise<void>((resolve) => {
      this.#wake = resolve;
    });
    const onStop = (): void => {
      timer.abort();
    };
    stop.addEventListener('abort', onStop, { once: true });
    try {
      await Promise.race([
        this.#o.clock.sleep(this.#rescanMs, timer.signal).catch(() => undefined),
        woken,
      ]);
    } finally {
      this.#wake = undefined;
      timer.abort();
      stop.removeEventListener('abort', onStop);
    }
  }

  #reconcile(stop: AbortSignal): void {
    // Deregistrations first, as upstream: a recreated socket is deregistered, then registered.
    for (const plugin of this.#registered.values()) {
      if (this.#inFlight.has(plugin.socketPath)) continue;
      if (this.#desired.get(plugin.socketPath) === plugin.identity) continue;
      this.#track(plugin.socketPath, this.#deregister(plugin, stop));
    }
    for (const [socketPath, identity] of this.#desired) {
      if (this.#inFlight.has(socketPath) || this.#registered.has(socketPath)) continue;
      const key = `${socketPath}\0${identity}`;
      if (this.#backoff.remaining(key) > 0) continue;
      this.#track(socketPath, this.#register(socketPath, identity, key, stop));
    }
    // Forget the back-offs of sockets that are gone (a recreated one starts afresh).
    for (const key of this.#failed) {
      const [path, identity] = key.split('\0');
      if (path !== undefined && this.#desired.get(path) === identity) continue;
      this.#failed.delete(key);
      this.#backoff.reset(key);
    }
  }

  #track(socketPath: string, op: Promise<void>): void {
    const done = op.finally(() => {
      this.#inFlight.delete(socketPath);
      this.#kick();
    });
    this.#inFlight.set(socketPath, done);
  }

  async #deregister(plugin: Registered, stop: AbortSignal): Promise<void> {
    this.#registered.delete(plugin.socketPath);
    const log = this.#o.logger.child({ path: plugin.socketPath, pluginName: plugin.name });
    log.info('Deregistering plugin', { type: plugin.type, endpoint: plugin.endpoint });
    try {
      await withDeadline(stop, this.#o.clock, this.#handlerTimeoutMs, 'DeRegisterPlugin', (s) =>
        plugin.handler.deregister(plugin.name, plugin.endpoint, s),
      );
    } catch (err) {
      if (!stop.aborted) log.error('DeRegisterPlugin failed', { err: messageOf(err) });
    }
  }

  async #register(
    socketPath: string,
    identity: string,
    key: string,
    stop: AbortSignal,
  ): Promise<void> {
    const log = this.#o.logger.child({ path: socketPath });
    const client = this.#o.newClient(socketPath);
    try {
      await this.#registerWith(client, socketPath, identity, log, stop);
      this.#backoff.reset(key);
      this.#failed.delete(key);
    } catch (err) {
      // Stopping ends operations in flight; that is not their failure.
      if (isAborted(stop)) return;
      const delay = this.#backoff.next(key);
      this.#failed.add(key);
      log.error('OperationExecutor.RegisterPlugin failed', {
        err: messageOf(err),
        retryInMs: delay,
      });
    } finally {
      client.close();
    }
  }

  async #registerWith(
    client: ReturnType<RegistrationClientFactory>,
    socketPath: string,
    identity: string,
    log: Logger,
    stop: AbortSignal,
  ): Promise<void> {
    let info;
    try {
      info = await client.getInfo(stop);
    } catch (err) {
      throw new Error(
        `RegisterPlugin error -- failed to get plugin info using RPC GetInfo at socket ${socketPath}, err: ${messageOf(err)}`,
        { cause: err },
      );
    }
    const notify = async (registered: boolean, error: string): Promise<void> => {
      try {
        await client.notifyRegistrationStatus(registered, error, stop);
      } catch (err) {
        throw new Error(
          `RegisterPlugin error -- failed to send ${registered ? 'registration status' : 'error'} at socket ${socketPath}, err: ${messageOf(err)}`,
          { cause: err },
        );
      }
    };
    const handler = this.#o.handlers.get(info.type);
    if (handler === undefined) {
      const why = `RegisterPlugin error -- no handler registered for plugin type: ${info.type} at socket ${socketPath}`;
      await notify(false, why);
      throw new Error(why);
    }
    const endpoint = info.endpoint === '' ? socketPath : info.endpoint;
    const plog = log.child({ pluginName: info.name, type: info.type, endpoint });
    try {
      await withDeadline(stop, this.#o.clock, this.#handlerTimeoutMs, 'ValidatePlugin', (s) =>
        handler.validate(info.name, endpoint, info.supportedVersions, s),
      );
    } catch (err) {
      if (stop.aborted) throw err;
      plog.error('Plugin validation failed', {
        err: messageOf(err),
        versions: info.supportedVersions,
      });
      await notify(
        false,
        `RegisterPlugin error -- plugin validation failed with err: ${messageOf(err)}`,
      );
      throw new Error('RegisterPlugin error -- pluginHandler.ValidatePluginFunc failed', {
        cause: err,
      });
    }
    // In the actual state before the handler runs, so a socket removed meanwhile is
    // deregistered once this operation ends (upstream does the same).
    const entry: Registered = {
      socketPath,
      identity,
      type: info.type,
      name: info.name,
      endpoint,
      handler,
    };
    this.#registered.set(socketPath, entry);
    this.#registering.add(socketPath);
    try {
      await withDeadline(stop, this.#o.clock, this.#handlerTimeoutMs, 'RegisterPlugin', (s) =>
        handler.register(info.name, endpoint, info.supportedVersions, s),
      );
    } catch (err) {
      this.#registering.delete(socketPath);
      this.#registered.delete(socketPath);
      if (stop.aborted) throw err;
      const why = `RegisterPlugin error -- plugin registration failed with err: ${messageOf(err)}`;
      await notify(false, why);
      throw new Error(why, { cause: err });
    }
    this.#registering.delete(socketPath);
    try {
      await notify(true, '');
    } catch (err) {
      this.#registered.delete(socketPath);
      await withDeadline(stop, this.#o.clock, this.#handlerTimeoutMs, 'DeRegisterPlugin', (s) =>
        handler.deregister(info.name, endpoint, s),
      ).catch(() => undefined);
      throw err;
    }
    plog.info('Plugin registered', { versions: info.supportedVersions });
  }
}
