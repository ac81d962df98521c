/**
 * Back-off policies. `Backoff` is upstream's flowcontrol.Backoff: a per-key delay that
 * starts at `initialMs`, doubles on each failure up to `maxMs`, and is forgotten after
 * `resetAfterMs` without failures (CrashLoopBackOff: 10 s -> 300 s, reset after 10 min;
 * image pulls: 10 s -> 300 s). `jittered` spreads retries of loops that talk to the
 * API server so a fleet of nodes does not retry in lock-step.
 */
import type { Clock } from './clock.ts';

export interface BackoffOptions {
  readonly initialMs: number;
  readonly maxMs: number;
  /** A key idle this long (no failure recorded) starts again from `initialMs`. */
  readonly resetAfterMs: number;
}

interface Entry {
  delayMs: number;
  lastFailure: number;
}

export class Backoff {
  readonly #entries = new Map<string, Entry>();
  readonly #clock: Clock;
  readonly #options: BackoffOptions;

  constructor(clock: Clock, options: BackoffOptions) {
    this.#clock = clock;
    this.#options = options;
  }

  /** Records a failure of `key` and returns the delay to wait before the next try. */
  next(key: string): number {
    const now = this.#clock.now();
    const entry = this.#entries.get(key);
    if (entry === undefined || now - entry.lastFailure > this.#options.resetAfterMs) {
      this.#entries.set(key, { delayMs: this.#options.initialMs, lastFailure: now });
      return this.#options.initialMs;
    }
    entry.delayMs = Math.min(entry.delayMs * 2, this.#options.maxMs);
    entry.lastFailure = now;
    return entry.delayMs;
  }

  /** The current delay of `key`, 0 when it has none. */
  current(key: string): number {
    const entry = this.#entries.get(key);
    if (entry === undefined || this.#clock.now() - entry.lastFailure > this.#options.resetAfterMs)
      return 0;
    return entry.delayMs;
  }

  /** True while `key` must still wait after its last failure. */
  inBackoff(key: string): boolean {
    return this.remaining(key) > 0;
  }

  /**
   * Ms left until `key` may be tried again (0 when it may now). A last failure in the
   * future means the wall clock stepped back (an hour, say): it is moved to now, so the
   * key waits its back-off once more, not the back-off plus the hour.
   */
  remaining(key: string): number {
    const entry = this.#entries.get(key);
    if (entry === undefined) return 0;
    const now = this.#clock.now();
    if (entry.lastFailure > now) entry.lastFailure = now;
    return Math.max(0, entry.lastFailure + entry.delayMs - now);
  }

  reset(key: string): void {
    this.#entries.delete(key);
  }

  /** How many keys it holds (idle ones included until gc): its memory, for leak checks. */
  get size(): number {
    return this.#entries.size;
  }

  /** Drops entries idle for longer than the reset period (upstream's GC). */
  gc(): void {
    const now = this.#clock.now();
    for (const [key, entry] of this.#entries) {
      if (now - entry.lastFailure > this.#options.resetAfterMs) this.#entries.delete(key);
    }
  }
}

/** `ms` plus up to `factor` of it at random (upstream's wait.Jitter). */
export function jittered(ms: number, factor = 0.5, random: () => number = Math.random): number {
  return ms + ms * factor * random();
}

/**
 * Exponential retry delays for reconnecting loops (watch, lease, status post):
 * `initialMs * 2^attempt`, capped, with jitter.
 */
export function retryDelay(
  attempt: number,
  initialMs = 200,
  maxMs = 30_000,
  random: () => number = Math.random,
): number {
  return jittered(Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 20)), 0.5, random);
}
