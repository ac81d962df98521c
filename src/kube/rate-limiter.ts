/**
 * A token bucket (client-go's flowcontrol limiter): `burst` tokens, refilled at `qps`
 * per second. `take` reserves a token and waits for it, so waiters are served in the
 * order they asked; `tryTake` never waits (the event recorder drops instead).
 */
import type { Clock } from '../util/clock.ts';

/** Rate and size of a token bucket, and the clock it refills on. */
export interface TokenBucketOptions {
  /** Tokens per second. Zero, a negative value or Infinity disables limiting. */
  readonly qps: number;
  /** Bucket size: how many calls may go at once after a quiet period. */
  readonly burst: number;
  readonly clock: Clock;
}

/** A token bucket rate limiter (see the top of this file). */
export class TokenBucket {
  readonly #qps: number;
  readonly #burst: number;
  readonly #clock: Clock;
  readonly #unlimited: boolean;
  #tokens: number;
  #last: number | undefined;

  constructor(options: TokenBucketOptions) {
    this.#qps = options.qps;
    this.#burst = Math.max(1, options.burst);
    this.#clock = options.clock;
    this.#unlimited = !(options.qps > 0) || options.qps === Number.POSITIVE_INFINITY;
    this.#tokens = this.#burst;
  }

  #refill(): void {
    const now = this.#clock.now();
    if (this.#last !== undefined && now > this.#last) {
      this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#last) / 1000) * this.#qps);
    }
    this.#last = now;
  }

  /** Tokens available now (may be negative while waiters hold reservations). */
  available(): number {
    if (this.#unlimited) return Number.POSITIVE_INFINITY;
    this.#refill();
    return this.#tokens;
  }

  /** Takes a token if one is available now. */
  tryTake(): boolean {
    if (this.#unlimited) return true;
    this.#refill();
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  /**
   * Waits for a token. Rejects with the signal's reason when it aborts first; the
   * reservation is then given back so later callers do not wait for it.
   */
  async take(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted === true) throw signal.reason;
    if (this.#unlimited) return;
    this.#refill();
    this.#tokens -= 1;
    if (this.#tokens >= 0) return;
    const waitMs = Math.ceil((-this.#tokens / this.#qps) * 1000);
    try {
      await this.#clock.sleep(waitMs, signal);
    } catch (err) {
      this.#tokens += 1;
      throw err;
    }
  }
}
