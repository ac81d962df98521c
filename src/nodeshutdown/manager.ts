/**
 * The logind-backed shutdown manager (upstream's nodeshutdown_manager_linux.go). It
 * follows logind's delay-inhibitor protocol:
 *
 * 1. At start, an inhibitor lock is taken (after raising InhibitDelayMaxSec when the
 *    configured periods need more than logind allows).
 * 2. PrepareForShutdown(true): the node reports NotReady, pods are stopped by priority
 *    group, then the lock is released and logind goes on.
 * 3. PrepareForShutdown(false): a shutdown was cancelled; the lock is taken again.
 *
 * A failure to start (no system bus, no logind) is logged once and the kubelet runs on
 * without graceful shutdown, as upstream. A connection lost later is re-made every
 * second (upstream's dbusReconnectPeriod).
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { EventRecorder, EventTarget } from '../events/types.ts';
import type { Clock } from '../util/clock.ts';
import { isAborted } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import { killPods, periodRequestedSeconds } from './pod-manager.ts';
import type { ShutdownStateStorage } from './storage.ts';
import {
  NODE_SHUTTING_DOWN,
  NodeShutdownError,
  type GracefulShutdownMetrics,
  type InhibitBus,
  type InhibitLock,
  type KillPodFunc,
  type NodeShutdownManager,
  type ShutdownGracePeriodByPodPriority,
} from './types.ts';

const DBUS_RECONNECT_PERIOD_MS = 1000;
/** wait.Backoff{Duration: 100ms, Factor: 2, Steps: 5} while logind reloads its config. */
const RELOAD_BACKOFF = { initialMs: 100, factor: 2, steps: 5 } as const;

export interface LogindShutdownManagerOptions {
  /** Sorted low to high, non-empty (an empty list means the feature is off: no manager). */
  readonly periods: readonly ShutdownGracePeriodByPodPriority[];
  /** Connects to the system bus; called at start and on every reconnect. */
  readonly connect: () => InhibitBus;
  /** The pods the node runs now (upstream's GetActivePods). */
  readonly activePods: () => readonly Pod[];
  readonly killPod: KillPodFunc;
  /** Posts the node status now (the NotReady condition). */
  readonly syncNodeStatus: (signal: AbortSignal) => Promise<unknown>;
  readonly recorder: EventRecorder;
  readonly node: EventTarget;
  readonly clock: Clock;
  readonly logger: Logger;
  /** The last shutdown's times (upstream's graceful_node_shutdown_state file). */
  readonly state?: ShutdownStateStorage;
  readonly metrics?: GracefulShutdownMetrics;
  /**
   * Resolves once the pods' statuses written so far have reached the API. Awaited
   * (at most STATUS_SETTLE_MS) before the lock goes: systemd stops berth right after, and
   * upstream, which does not wait, can lose the last group's final status that way.
   */
  readonly statusesSent?: () => Promise<void>;
}

/** How long the lock is held after the last group for its statuses to be written. */
export const STATUS_SETTLE_MS = 5000;

const seconds = (ms: number): number => Math.trunc(ms / 1000);

function formatSeconds(ms: number): string {
  return `${ms / 1000}s`;
}

export class LogindShutdownManager implements NodeShutdownManager {
  readonly #o: LogindShutdownManagerOptions;
  #bus: InhibitBus | undefined;
  #lock: InhibitLock | undefined;
  #shuttingDown = false;
  /** Events in arrival order; processed one at a time, as upstream's single loop. */
  #queue: Promise<void> = Promise.resolve();

  constructor(options: LogindShutdownManagerOptions) {
    this.#o = options;
  }

  shutdownStatus(): string | undefined {
    return this.#shuttingDown ? NODE_SHUTTING_DOWN : undefined;
  }

  async run(signal: AbortSignal): Promise<void> {
    const { logger, clock } = this.#o;
    let closed: Promise<void>;
    try {
      ({ closed } = await this.#start(signal));
    } catch (err) {
      // Not critical for the kubelet: log it and run on without graceful shutdown.
      if (!signal.aborted)
        logger.error('Failed to start node shutdown manager', { err: String(err) });
      this.#close();
      return;
    }
    await this.#setMetrics();
    try {
      for (;;) {
        await closed;
        if (signal.aborted) return;
        await clock.sleep(DBUS_RECONNECT_PERIOD_MS, signal);
        logger.debug('Restarting watch for node shutdown events');
        try {
          ({ closed } = await this.#start(signal));
        } catch (err) {
          if (isAborted(signal)) return;
          logger.error('Unable to watch the node for shutdown events', { err: String(err) });
          // Upstream retries only after a watch that started ends; a failed restart is
          // retried on the same period here, rather than never again.
          closed = Promise.resolve();
        }
      }
    } catch {
      // The sleep aborted: the kubelet stops.
    } finally {
      await this.#queue;
      this.#close();
    }
  }

  /** Connects, checks the delay, takes the lock and watches; `closed`: the watch ended. */
  async #start(signal: AbortSignal): Promise<{ closed: Promise<void> }> {
    const { logger } = this.#o;
    // A lock still held from the last connection stays until the new one is taken.
    this.#bus?.close();
    const bus = this.#o.connect();
    this.#bus = bus;
    try {
      await this.#ensureInhibitDelay(bus, signal);
      await this.#acquireInhibitLock(bus, signal);
      let onClosed = (): void => undefined;
      const closed = new Promise<void>((resolve) => {
        onClosed = resolve;
      });
      try {
        await bus.monitorShutdown(
          (shuttingDown) => {
            this.#queue = this.#queue.then(() => this.#onEvent(shuttingDown, signal));
          },
          () => {
            if (this.#bus === bus && !signal.aborted)
              logger.error('Ended to watching the node for shutdown events');
            onClosed();
          },
        );
      } catch (err) {
        await this.#lock?.release().catch(() => undefined);
        this.#lock = undefined;
        throw new NodeShutdownError(
          'BERTH_NODE_SHUTDOWN_BUS',
          `failed to monitor shutdown: ${String(err)}`,
          {
            cause: err,
          },
        );
      }
      const onAbort = (): void => {
        onClosed();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      return {
        closed: closed.finally(() => {
          signal.removeEventListener('abort', onAbort);
        }),
      };
    } catch (err) {
      bus.close();
      if (this.#bus === bus) this.#bus = undefined;
      throw err;
    }
  }

  /**
   * When logind's InhibitDelayMaxUSec is below the sum of the shares, upstream writes
   * the 99-kubelet.conf drop-in, reloads logind and polls until the value moved; if it
   * never does, starting fails with the values named (rather than losing grace time).
   */
  async #ensureInhibitDelay(bus: InhibitBus, signal: AbortSignal): Promise<void> {
    const requestedMs = periodRequestedSeconds(this.#o.periods) * 1000;
    const current = await bus.currentInhibitDelayMs(signal);
    if (requestedMs <= current) return;
    try {
      await bus.overrideInhibitDelay(requestedMs);
    } catch (err) {
      throw new NodeShutdownError(
        'BERTH_NODE_SHUTDOWN_DELAY',
        `unable to override inhibit delay by shutdown manager: ${String(err)}`,
        { cause: err },
      );
    }
    await bus.reloadLogindConf(signal);
    let updated = current;
    let wait: number = RELOAD_BACKOFF.initialMs;
    for (let attempt = 1; attempt <= RELOAD_BACKOFF.steps; attempt++) {
      updated = await bus.currentInhibitDelayMs(signal);
      if (requestedMs <= updated) return;
      if (attempt < RELOAD_BACKOFF.steps) {
        this.#o.logger.debug('InhibitDelayMaxSec still less than requested, retrying', {
          attempt,
          current: formatSeconds(updated),
          requested: formatSeconds(requestedMs),
        });
        await this.#o.clock.sleep(wait, signal);
        wait *= RELOAD_BACKOFF.factor;
      }
    }
    throw new NodeShutdownError(
      'BERTH_NODE_SHUTDOWN_DELAY',
      `node shutdown manager was timed out after ${RELOAD_BACKOFF.steps} attempts waiting for logind InhibitDelayMaxSec to update to ${formatSeconds(requestedMs)} (ShutdownGracePeriod), current value is ${formatSeconds(updated)}`,
    );
  }

  async #acquireInhibitLock(bus: InhibitBus, signal: AbortSignal): Promise<void> {
    const lock = await bus.inhibitShutdown(signal);
    const previous = this.#lock;
    this.#lock = lock;
    await previous?.release().catch(() => undefined);
  }

  async #onEvent(shuttingDown: boolean, signal: AbortSignal): Promise<void> {
    const { logger, recorder, node } = this.#o;
    if (signal.aborted) return;
    logger.info('Shutdown manager detected new shutdown event', {
      event: shuttingDown ? 'shutdown' : 'cancelled',
    });
    recorder.event(
      node,
      'Normal',
      'NodeShutdown',
      shuttingDown
        ? 'Shutdown manager detected shutdown event'
        : 'Shutdown manager detected shutdown cancellation',
    );
    this.#shuttingDown = shuttingDown;
    if (!shuttingDown) {
      const bus = this.#bus;
      if (bus === undefined) return;
      try {
        await this.#acquireInhibitLock(bus, signal);
      } catch (err) {
        // Upstream ignores this error too; the next reconnect takes a lock.
        if (!isAborted(signal))
          logger.error('Failed to take the inhibitor lock again', { err: String(err) });
      }
      return;
    }
    // The NotReady condition goes out now, not at the next status period.
    this.#o.syncNodeStatus(signal).catch((err: unknown) => {
      if (!signal.aborted) logger.warn('Error updating node status', { err: String(err) });
    });
    try {
      await this.#processShutdownEvent(signal);
    } catch (err) {
      if (!isAborted(signal))
        logger.error('Shutdown manager failed to process shutdown event', { err: String(err) });
    }
  }

  /** The gauges from the state file: the shutdown before the last reboot. */
  async #setMetrics(): Promise<void> {
    const { state, metrics, logger } = this.#o;
    if (state === undefined || metrics === undefined) return;
    try {
      const last = await state.load();
      if (last.startTime !== undefined) metrics.setStart(seconds(last.startTime));
      if (last.endTime !== undefined) metrics.setEnd(seconds(last.endTime));
    } catch (err) {
      logger.error('Failed to load graceful shutdown state', { err: String(err) });
    }
  }

  async #storeState(startTime: number, endTime?: number): Promise<void> {
    await this.#o.state
      ?.store({ startTime, ...(endTime !== undefined && { endTime }) })
      .catch((err: unknown) => {
        this.#o.logger.error('Failed to store graceful shutdown state', { err: String(err) });
      });
  }

  async #statusesSent(signal: AbortSignal): Promise<void> {
    const sent = this.#o.statusesSent;
    if (sent === undefined || signal.aborted) return;
    const timer = new AbortController();
    const cap = this.#o.clock.sleep(STATUS_SETTLE_MS, AbortSignal.any([signal, timer.signal])).then(
      () => 'timeout' as const,
      () => 'aborted' as const,
    );
    const outcome = await Promise.race([
      sent().then(
        () => 'sent' as const,
        () => 'sent' as const,
      ),
      cap,
    ]);
    timer.abort();
    if (outcome === 'timeout')
      this.#o.logger.warn('Pod statuses not all written before releasing the inhibitor lock', {
        waitedMs: STATUS_SETTLE_MS,
      });
  }

  async #processShutdownEvent(signal: AbortSignal): Promise<void> {
    this.#o.logger.info('Shutdown manager processing shutdown event');
    const { metrics, clock } = this.#o;
    const startTime = clock.now();
    await this.#storeState(startTime);
    metrics?.setStart(seconds(startTime));
    metrics?.setEnd(0);
    try {
      await killPods(
        {
          periods: this.#o.periods,
          killPod: this.#o.killPod,
          clock: this.#o.clock,
          logger: this.#o.logger,
        },
        this.#o.activePods(),
        signal,
      );
    } finally {
      const endTime = clock.now();
      await this.#storeState(startTime, endTime);
      metrics?.setEnd(seconds(endTime));
      await this.#statusesSent(signal);
      const lock = this.#lock;
      this.#lock = undefined;
      await lock?.release().catch((err: unknown) => {
        this.#o.logger.error('Failed to release the inhibitor lock', { err: String(err) });
      });
      this.#o.logger.info(
        'Shutdown manager completed processing shutdown event, node will shutdown shortly',
      );
    }
  }

  #close(): void {
    const lock = this.#lock;
    this.#lock = undefined;
    // Closing the connection does not end the lock (a held fd does): release it too.
    void lock?.release().catch(() => undefined);
    this.#bus?.close();
    this.#bus = undefined;
  }
}
