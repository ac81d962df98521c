/**
 * The clock every component is given instead of reading time itself, so unit tests
 * control time and never sleep for real.
 */
import { setTimeout as delay } from 'node:timers/promises';

export interface Clock {
  /** Milliseconds since the epoch (wall time: NTP or an operator may step it). */
  now(): number;
  /**
   * Milliseconds from an arbitrary origin that only moves forward with elapsed time
   * (never stepped): for "how long since" checks such as health thresholds, which a
   * wall-clock step must not trip (Go's time.Since reads the monotonic clock).
   */
  monotonic(): number;
  /** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  sleep: async (ms, signal) => {
    await delay(ms, undefined, signal === undefined ? undefined : { signal });
  },
};

interface Timer {
  readonly at: number;
  readonly resolve: () => void;
}

/** A clock that moves only when the test calls `advance`. */
export class FakeClock implements Clock {
  #now: number;
  /** The wall time minus every jump: advances with time, not with `jump`. */
  #jumped = 0;
  #timers: Timer[] = [];

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  monotonic(): number {
    return this.#now - this.#jumped;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted === true) return Promise.reject(signal.reason as Error);
    return new Promise((resolve, reject) => {
      const timer: Timer = {
        at: this.#now + Math.max(0, ms),
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        this.#timers = this.#timers.filter((t) => t !== timer);
        reject(signal?.reason as Error);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#timers.push(timer);
    });
  }

  /** Pending sleeps (for assertions such as "a back-off is waiting"). */
  get pending(): number {
    return this.#timers.length;
  }

  /**
   * The wall clock jumps by `ms` (either way: NTP stepping it, an operator setting it),
   * as `Date.now()` would. Sleeps run on the monotonic clock, so each keeps the time it
   * had left and none wakes because of the jump.
   */
  jump(ms: number): void {
    this.#now += ms;
    this.#jumped += ms;
    this.#timers = this.#timers.map((t) => ({ ...t, at: t.at + ms }));
  }

  /** Moves time forward, waking every sleeper whose time has come, in order. */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    for (;;) {
      const next = this.#timers.filter((t) => t.at <= target).sort((a, b) => a.at - b.at)[0];
      if (next === undefined) break;
      this.#now = next.at;
      this.#timers = this.#timers.filter((t) => t !== next);
      next.resolve();
      // Let the woken task run (and maybe schedule its next sleep) before going on.
      await new Promise<void>((r) => setImmediate(r));
    }
    this.#now = target;
  }
}
