/** A kernel log held in memory: tests push records and the watcher reads them. */
import type { KmsgSource } from './types.ts';

export class FakeKmsgSource implements KmsgSource {
  readonly #pending: string[] = [];
  closed = false;
  reads = 0;

  /** Appends records ("prio,seq,usec,flags;text"). */
  push(...records: string[]): void {
    this.#pending.push(...records);
  }

  read(): Promise<string[]> {
    this.reads++;
    return Promise.resolve(this.#pending.splice(0));
  }

  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }
}
