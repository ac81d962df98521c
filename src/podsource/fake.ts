/**
 * A PodSource for other managers' tests, fed by the test instead of a watch: `list`
 * is a full (re-)list, `event` one watch event; both reach the consumer through
 * BoundPods, as the real source's do. `run` lists `initial` at start (after the listing
 * failures set by `failLists`, each retried after a back-off on the injected clock) and
 * then waits for its signal. Both pass contract.ts.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import { retryDelay } from '../util/backoff.ts';
import type { Clock } from '../util/clock.ts';
import { FAILING_AFTER_ERRORS } from './api-source.ts';
import { BoundPods, type WatchEventType } from './bound-pods.ts';
import type { PodSource, PodSourceConsumer } from './types.ts';

export interface FakePodSourceOptions {
  readonly clock: Clock;
  readonly consumer: PodSourceConsumer;
}

export class FakePodSource implements PodSource {
  /** What `run` lists first (the API's pods when the source starts). */
  initial: readonly Pod[] = [];
  readonly #o: FakePodSourceOptions;
  readonly #pods: BoundPods;
  #synced = false;
  #failLists = 0;
  #consecutiveErrors = 0;

  constructor(options: FakePodSourceOptions) {
    this.#o = options;
    this.#pods = new BoundPods(options.consumer);
  }

  get synced(): boolean {
    return this.#synced;
  }

  pods(): ReadonlyMap<string, Pod> {
    return this.#pods.pods();
  }

  /** The next `n` lists `run` makes fail. */
  failLists(n: number): void {
    this.#failLists = n;
  }

  /** A full list of the pods bound to the node (a first list, or a re-list after 410). */
  list(pods: readonly Pod[]): void {
    this.#pods.replace(pods);
    this.#consecutiveErrors = 0;
    this.#synced = true;
  }

  /** One watch event. */
  event(type: WatchEventType, pod: Pod): void {
    this.#pods.apply(type, pod);
  }

  healthProblem(): string | undefined {
    return this.#consecutiveErrors >= FAILING_AFTER_ERRORS
      ? 'pod source is failing: injected list failure'
      : undefined;
  }

  async run(signal: AbortSignal): Promise<void> {
    while (this.#failLists > 0 && !signal.aborted) {
      this.#failLists--;
      this.#consecutiveErrors++;
      const delay = retryDelay(this.#consecutiveErrors - 1, 1000, 30_000);
      await this.#o.clock.sleep(delay, signal).catch(() => undefined);
    }
    if (signal.aborted) return;
    this.list(this.initial);
    await new Promise<void>((resolve) => {
      signal.addEventListener(
        'abort',
        () => {
          resolve();
        },
        { once: true },
      );
    });
  }
}
