/** A StatsProvider for other packages' tests: answers the summary it was given, or fails. */
import type { StatsProvider, Summary, SummaryOptions } from './types.ts';

export class FakeStatsProvider implements StatsProvider {
  summaryToReturn: Summary;
  /** When set, summary() rejects with it (the runtime could not be read). */
  error: Error | undefined;
  /** The options of every call, in order. */
  readonly calls: SummaryOptions[] = [];

  constructor(summary: Summary) {
    this.summaryToReturn = summary;
  }

  summary(options: SummaryOptions = {}): Promise<Summary> {
    this.calls.push(options);
    if (this.error !== undefined) return Promise.reject(this.error);
    return Promise.resolve(this.summaryToReturn);
  }
}
