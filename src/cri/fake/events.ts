/**
 * Fan-out of container events to every open GetContainerEvents stream. Each stream has
 * its own queue, so a slow reader never makes the fake drop or reorder events, and
 * every wait removes its abort listener when it ends.
 */
import type * as api from '../gen/runtime/v1/api.ts';

interface Waiter {
  readonly resolve: (event: api.ContainerEventResponse | undefined) => void;
  readonly reject: (err: Error) => void;
}

/** One open stream: the events published since it subscribed, not yet read. */
export class EventSubscription {
  readonly #queue: api.ContainerEventResponse[] = [];
  #waiter: Waiter | undefined;
  #failure: Error | undefined;

  push(event: api.ContainerEventResponse): void {
    if (this.#waiter === undefined) {
      this.#queue.push(event);
      return;
    }
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter.resolve(event);
  }

  /** Ends the stream with an error once the events already queued are read. */
  fail(err: Error): void {
    this.#failure ??= err;
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.reject(err);
  }

  /**
   * The next event; undefined once `signal` has aborted (the stream then ends quietly,
   * dropping what is queued, as a cancelled gRPC stream does).
   */
  next(signal: AbortSignal | undefined): Promise<api.ContainerEventResponse | undefined> {
    if (signal?.aborted === true) return Promise.resolve(undefined);
    const queued = this.#queue.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        this.#waiter = undefined;
        resolve(undefined);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiter = {
        resolve: (event) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(event);
        },
        reject: (err) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
    });
  }
}

/** Publishes each event to all current subscriptions. */
export class EventHub {
  readonly #subscriptions = new Set<EventSubscription>();

  subscribe(): EventSubscription {
    const sub = new EventSubscription();
    this.#subscriptions.add(sub);
    return sub;
  }

  unsubscribe(sub: EventSubscription): void {
    this.#subscriptions.delete(sub);
  }

  /** Open streams (for assertions such as "the PLEG reconnected"). */
  get size(): number {
    return this.#subscriptions.size;
  }

  publish(event: api.ContainerEventResponse): void {
    for (const sub of this.#subscriptions) sub.push(event);
  }

  /** Fails every open stream, as a runtime restart does; later subscribers are unaffected. */
  failAll(err: Error): void {
    for (const sub of this.#subscriptions) sub.fail(err);
    this.#subscriptions.clear();
  }
}
