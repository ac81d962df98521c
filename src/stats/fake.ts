/**
 * A StatsProvider for other packages' tests: answers the summary it was given, or fails.
 * It passes the StatsProvider contract (contract.ts) as the CRI provider does.
 */
import type { StatsProvider, Summary, SummaryOptions } from './types.ts';

export class FakeStatsProvider implements StatsProvider {
  summaryToReturn: Summary;
  /** When set, summary() rejects with it (the runtime could not be read). */
  error: Error | undefined;
  /** The options of every call, in order. */
  readonly calls: SummaryOptions[] = [];
  #failNext: Error | undefined;

  constructor(summary: Summary) {
    this.summaryToReturn = summary;
  }

  /** The next summary() only rejects with `err` (a runtime read that failed once). */
  failNext(err: Error): void {
    this.#failNext = err;
  }

  summary(options: SummaryOptions = {}): Promise<Summary> {
    this.calls.push(options);
    if (options.signal?.aborted === true) {
      const reason: unknown = options.signal.reason;
      return Promise.reject(reason instanceof Error ? reason : new Error('aborted'));
    }
    const once = this.#failNext;
    this.#failNext = undefined;
    const err = once ?? this.error;
    if (err !== undefined) return Promise.reject(err);
    return Promise.resolve(this.summaryToReturn);
  }
}
