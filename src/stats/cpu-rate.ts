/**
 * usageNanoCores from two samples of a cumulative CPU counter, as upstream's CRI stats
 * provider and cAdvisor do: the previous sample is kept per key (container ID, sandbox
 * ID, "node") and the rate is the difference over the time between the two samples.
 * Entries not sampled for `ttlMs` are dropped so deleted containers do not accumulate.
 */
import type { Clock } from '../util/clock.ts';

interface Sample {
  readonly timeNs: number;
  readonly usageCoreNs: number;
  /** The rate computed when this sample arrived (answered again for the same sample). */
  readonly nanoCores: number | undefined;
  seenAtMs: number;
}

export class CpuRateCache {
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #samples = new Map<string, Sample>();

  constructor(clock: Clock, ttlMs = 5 * 60_000) {
    this.#clock = clock;
    this.#ttlMs = ttlMs;
  }

  /** Records a sample; undefined until a second, later sample of the same key arrives. */
  rate(key: string, timeNs: number, usageCoreNs: number): number | undefined {
    const now = this.#clock.monotonic();
    const prev = this.#samples.get(key);
    if (prev !== undefined && timeNs <= prev.timeNs) {
      // The runtime answered the same sample again (two scrapes close together).
      prev.seenAtMs = now;
      return prev.nanoCores;
    }
    let nanoCores: number | undefined;
    if (prev !== undefined && usageCoreNs >= prev.usageCoreNs) {
      nanoCores = Math.round(((usageCoreNs - prev.usageCoreNs) / (timeNs - prev.timeNs)) * 1e9);
    }
    // A counter that went backwards is a restarted container with the same key: start over.
    this.#samples.set(key, { timeNs, usageCoreNs, nanoCores, seenAtMs: now });
    return nanoCores;
  }

  /** Drops samples not refreshed within the TTL. */
  prune(): void {
    const cutoff = this.#clock.monotonic() - this.#ttlMs;
    for (const [key, s] of this.#samples) if (s.seenAtMs < cutoff) this.#samples.delete(key);
  }

  get size(): number {
    return this.#samples.size;
  }
}
