/**
 * A recording in-memory logind for unit tests: locks, the delay property and its
 * drop-in override, and PrepareForShutdown signals the test emits.
 */
import { NodeShutdownError, type InhibitBus, type InhibitLock } from './types.ts';

export class FakeLogind {
  /** InhibitDelayMaxUSec in milliseconds. */
  delayMs = 5000;
  /** What the drop-in says once written; a reload applies it. */
  override: number | undefined;
  /** Whether ReloadLogindConf succeeds (it needs systemd as PID 1). */
  canReload = true;
  /** Fails the next connect() with this (no system bus). */
  unreachable = false;
  locksHeld = 0;
  locksTaken = 0;
  readonly calls: string[] = [];
  readonly buses: FakeInhibitBus[] = [];

  connect(): FakeInhibitBus {
    const bus = new FakeInhibitBus(this);
    this.buses.push(bus);
    return bus;
  }

  /** Emits PrepareForShutdown(active) to every open connection's watch. */
  prepareForShutdown(active: boolean): void {
    for (const b of this.buses) b.emit(active);
  }

  /** Drops every connection (logind or the bus went away). */
  disconnectAll(): void {
    for (const b of this.buses) b.drop();
  }
}

export class FakeInhibitBus implements InhibitBus {
  readonly #l: FakeLogind;
  #onEvent: ((active: boolean) => void) | undefined;
  #onClosed: (() => void) | undefined;
  #closed = false;

  constructor(logind: FakeLogind) {
    this.#l = logind;
  }

  #check(what: string): void {
    this.#l.calls.push(what);
    if (this.#l.unreachable || this.#closed)
      throw new NodeShutdownError(
        'BERTH_NODE_SHUTDOWN_BUS',
        'dial unix: no such file or directory',
      );
  }

  async currentInhibitDelayMs(): Promise<number> {
    this.#check('CurrentInhibitDelay');
    return Promise.resolve(this.#l.delayMs);
  }

  async inhibitShutdown(): Promise<InhibitLock> {
    this.#check('Inhibit');
    const l = this.#l;
    l.locksHeld++;
    l.locksTaken++;
    let released = false;
    return Promise.resolve({
      release: async () => {
        if (!released) {
          released = true;
          l.locksHeld--;
        }
        return Promise.resolve();
      },
    });
  }

  async reloadLogindConf(): Promise<void> {
    this.#check('ReloadLogindConf');
    if (!this.#l.canReload)
      throw new NodeShutdownError(
        'BERTH_NODE_SHUTDOWN_DELAY',
        'unable to reload logind conf: org.freedesktop.systemd1 was not provided',
      );
    if (this.#l.override !== undefined) this.#l.delayMs = this.#l.override;
    return Promise.resolve();
  }

  async overrideInhibitDelay(delayMs: number): Promise<void> {
    this.#l.calls.push(`OverrideInhibitDelay ${delayMs / 1000}`);
    this.#l.override = delayMs;
    return Promise.resolve();
  }

  async monitorShutdown(onEvent: (active: boolean) => void, onClosed: () => void): Promise<void> {
    this.#check('MonitorShutdown');
    this.#onEvent = onEvent;
    this.#onClosed = onClosed;
    return Promise.resolve();
  }

  emit(active: boolean): void {
    if (!this.#closed) this.#onEvent?.(active);
  }

  drop(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#onClosed?.();
  }

  close(): void {
    this.drop();
  }
}
