/**
 * Test doubles: an in-memory socket directory, scripted registration sockets, a
 * recording handler, and a FakePluginManager for the kubelet's wiring tests.
 */
import { abortErrorOf } from '../csi/unary.ts';
import type {
  PluginHandler,
  PluginInfo,
  PluginManager,
  PluginManagerState,
  RegisteredPlugin,
  RegistrationClient,
  SocketSnapshot,
  SocketSource,
} from './types.ts';

/** Sockets as a map; `watching = false` drops change events (a missed inotify event). */
export class FakeSocketSource implements SocketSource {
  readonly sockets = new Map<string, string>();
  watching = true;
  prepared = false;
  #generation = 0;
  #onChange: (() => void) | undefined;

  prepare(): Promise<void> {
    this.prepared = true;
    return Promise.resolve();
  }

  scan(): Promise<SocketSnapshot> {
    return Promise.resolve(new Map(this.sockets));
  }

  watch(onChange: () => void, signal: AbortSignal): void {
    this.#onChange = onChange;
    signal.addEventListener(
      'abort',
      () => {
        this.#onChange = undefined;
      },
      { once: true },
    );
  }

  /** Creates (or recreates, with a new identity) a socket. */
  add(path: string): void {
    this.#generation += 1;
    this.sockets.set(path, `gen-${String(this.#generation)}`);
    this.#changed();
  }

  remove(path: string): void {
    this.sockets.delete(path);
    this.#changed();
  }

  #changed(): void {
    if (this.watching) this.#onChange?.();
  }
}

/** What a scripted registration socket does. */
export interface FakePluginScript {
  info: PluginInfo;
  /** GetInfo fails with this. */
  getInfoError?: Error | undefined;
  /** GetInfo never answers (until the caller's signal aborts). */
  hangGetInfo?: boolean;
  /** NotifyRegistrationStatus fails with this. */
  notifyError?: Error | undefined;
}

export interface Notification {
  readonly socketPath: string;
  readonly registered: boolean;
  readonly error: string;
}

/** Registration clients by socket path, answering from scripts; records notifications. */
export class FakeRegistrationSockets {
  readonly scripts = new Map<string, FakePluginScript>();
  readonly notifications: Notification[] = [];
  readonly getInfoCalls: string[] = [];
  opened = 0;
  closed = 0;

  /** The factory to give the manager. */
  readonly newClient = (socketPath: string): RegistrationClient => {
    this.opened += 1;
    return {
      getInfo: async (signal) => {
        this.getInfoCalls.push(socketPath);
        const script = this.scripts.get(socketPath);
        if (script === undefined) throw new Error(`connect ENOENT ${socketPath}`);
        if (script.hangGetInfo === true) {
          await new Promise<never>((_resolve, reject) => {
            signal.addEventListener(
              'abort',
              () => {
                reject(abortErrorOf('GetInfo', signal));
              },
              { once: true },
            );
          });
        }
        if (script.getInfoError !== undefined) throw script.getInfoError;
        return script.info;
      },
      notifyRegistrationStatus: (registered, error) => {
        this.notifications.push({ socketPath, registered, error });
        const failure = this.scripts.get(socketPath)?.notifyError;
        return failure === undefined ? Promise.resolve() : Promise.reject(failure);
      },
      close: () => {
        this.closed += 1;
      },
    };
  };
}

export interface HandlerCall {
  readonly op: 'validate' | 'register' | 'deregister';
  readonly name: string;
  readonly endpoint: string;
}

/** A handler that records calls; `failValidate`/`failRegister` make those throw; `hangRegister` waits for the signal. */
export class FakePluginHandler implements PluginHandler {
  readonly calls: HandlerCall[] = [];
  failValidate: Error | undefined;
  failRegister: Error | undefined;
  hangRegister = false;

  validate(name: string, endpoint: string): Promise<void> {
    this.calls.push({ op: 'validate', name, endpoint });
    return this.failValidate === undefined ? Promise.resolve() : Promise.reject(this.failValidate);
  }

  async register(
    name: string,
    endpoint: string,
    _versions: readonly string[],
    signal: AbortSignal,
  ): Promise<void> {
    this.calls.push({ op: 'register', name, endpoint });
    if (this.hangRegister) {
      await new Promise<never>((_resolve, reject) => {
        signal.addEventListener(
          'abort',
          () => {
            reject(signal.reason as Error);
          },
          { once: true },
        );
      });
    }
    if (this.failRegister !== undefined) throw this.failRegister;
  }

  deregister(name: string, endpoint: string): Promise<void> {
    this.calls.push({ op: 'deregister', name, endpoint });
    return Promise.resolve();
  }

  ops(): string[] {
    return this.calls.map((c) => `${c.op} ${c.name}`);
  }
}

/** A PluginManager for consumers' tests: the state machine and a settable plugin list. */
export class FakePluginManager implements PluginManager {
  state: PluginManagerState = 'NEW';
  plugins: RegisteredPlugin[] = [];
  startCalls = 0;

  start(): Promise<void> {
    if (this.state !== 'NEW') {
      return Promise.reject(new Error(`Cannot start the plugin manager: it is ${this.state}`));
    }
    this.startCalls += 1;
    this.state = 'RUNNING';
    return Promise.resolve();
  }

  stop(): Promise<void> {
    this.state = 'STOPPED';
    return Promise.resolve();
  }

  registered(): readonly RegisteredPlugin[] {
    return this.plugins;
  }
}
