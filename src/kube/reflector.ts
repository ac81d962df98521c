/**
 * A reflector: the list+watch loop that keeps a handler's view of one collection in
 * step with the apiserver (client-go's Reflector, without the informer framework).
 *
 * The loop: list (paged with limit/continue) → `onSync(items)` → watch from the
 * list's resourceVersion with bookmarks and a server-side timeout of 5–10 min
 * (randomized, so a fleet of nodes does not reconnect in step) → on a normal end,
 * watch again from the last resourceVersion seen (bookmarks included) → on 410 Gone,
 * list again → on any other error, count it, log it, wait a jittered exponential
 * back-off and resume from the last resourceVersion (a failed list is retried).
 * A stall timer aborts a watch that delivers neither an event nor a bookmark within
 * `stallTimeoutMs` (a half-open connection looks exactly like a quiet collection).
 *
 * Handler errors are logged and counted (`handlerErrors`) but do not stop the stream:
 * a bug in one consumer must not stall the node's view of the cluster.
 */
import type { ObjectMeta } from 'kubernetes-types/meta/v1.js';
import { retryDelay } from '../util/backoff.ts';
import type { Clock } from '../util/clock.ts';
import { BerthError } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import { statusFromWatchError } from './status.ts';
import { isGone, type KubeClient, type ResourcePath } from './types.ts';

/** The watch events a reflector hands on (bookmarks and errors it handles itself). */
export type ReflectorEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** Receives the collection: a full replace after each list, then single changes. */
export interface ReflectorHandler<T> {
  /** The complete collection after every (re)list: replaces whatever the handler held. */
  onSync(items: T[]): void | Promise<void>;
  onEvent(type: ReflectorEventType, obj: T): void | Promise<void>;
}

/** What to reflect, from where, and how patiently. */
export interface ReflectorOptions<T> {
  readonly client: KubeClient;
  readonly path: ResourcePath;
  readonly fieldSelector?: string;
  readonly labelSelector?: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly handler: ReflectorHandler<T>;
  /** No event or bookmark for this long restarts the watch (default 3 min; bookmarks come about once a minute). */
  readonly stallTimeoutMs?: number;
  /** List page size (default 500); 0 lists in one request. */
  readonly pageSize?: number;
  /** Server-side watch timeout is this to twice this, at random (default 300 s). */
  readonly minWatchTimeoutSeconds?: number;
  /** Back-off after errors: initialMs · 2^n with jitter, capped (default 800 ms → 30 s). */
  readonly backoff?: { readonly initialMs: number; readonly maxMs: number };
  readonly random?: () => number;
  /** Names the reflector in logs (default the resource). */
  readonly name?: string;
}

/** A reflector's state for health checks and metrics. */
export interface ReflectorHealth {
  /** The first list has completed. */
  readonly synced: boolean;
  /** When the last (re)list completed (ms since the epoch). */
  readonly lastSyncAt?: number;
  /** When the last watch event or bookmark arrived. */
  readonly lastEventAt?: number;
  /** The resourceVersion the next watch starts from. */
  readonly resourceVersion?: string;
  /** Errors since the last success; 0 when healthy. */
  readonly consecutiveErrors: number;
  readonly errors: number;
  /** Times the loop recovered (error, stall or 410 Gone). */
  readonly restarts: number;
  readonly handlerErrors: number;
  readonly lastError?: string;
}

/** A watch that delivered nothing within the stall timeout. */
export class ReflectorStallError extends BerthError {
  constructor(message: string) {
    super('BERTH_REFLECTOR_STALLED', message);
  }
}

/** A watch that ended at once without an event: retried with back-off, not in a tight loop. */
export class ReflectorShortWatchError extends BerthError {
  constructor(message: string) {
    super('BERTH_REFLECTOR_SHORT_WATCH', message);
  }
}

type Listed = { metadata?: ObjectMeta };
const SHORT_WATCH_MS = 1000;

// Re-read after awaits; a call keeps TS from narrowing `aborted` to its first value.
const isAborted = (signal: AbortSignal): boolean => signal.aborted;

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A list+watch loop for one collection (see the top of this file). */
export class Reflector<T extends Listed> {
  readonly #o: ReflectorOptions<T>;
  readonly #log: Logger;
  readonly #synced = Promise.withResolvers<undefined>();
  #running = false;
  #hasSynced = false;
  #resourceVersion: string | undefined;
  #lastSyncAt: number | undefined;
  #lastEventAt: number | undefined;
  #consecutiveErrors = 0;
  /** 410s in a row with no event delivered in between (reset by any event or normal end). */
  #consecutiveGone = 0;
  #errors = 0;
  #restarts = 0;
  #handlerErrors = 0;
  #lastError: string | undefined;

  constructor(options: ReflectorOptions<T>) {
    this.#o = options;
    this.#log = options.logger.child({ reflector: options.name ?? options.path.resource });
  }

  /** True once the first list has been delivered to `onSync`. */
  hasSynced(): boolean {
    return this.#hasSynced;
  }

  /** Resolves once the first list has been delivered; rejects when `signal` aborts first. */
  async whenSynced(signal?: AbortSignal): Promise<void> {
    if (this.#hasSynced) return;
    if (signal === undefined) return this.#synced.promise;
    if (signal.aborted) throw signal.reason;
    const aborted = Promise.withResolvers<never>();
    const onAbort = (): void => {
      aborted.reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      await Promise.race([this.#synced.promise, aborted.promise]);
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  health(): ReflectorHealth {
    return {
      synced: this.#hasSynced,
      consecutiveErrors: this.#consecutiveErrors,
      errors: this.#errors,
      restarts: this.#restarts,
      handlerErrors: this.#handlerErrors,
      ...(this.#lastSyncAt === undefined ? {} : { lastSyncAt: this.#lastSyncAt }),
      ...(this.#lastEventAt === undefined ? {} : { lastEventAt: this.#lastEventAt }),
      ...(this.#resourceVersion === undefined ? {} : { resourceVersion: this.#resourceVersion }),
      ...(this.#lastError === undefined ? {} : { lastError: this.#lastError }),
    };
  }

  /** Runs the loop until `signal` aborts (then resolves). Call once. */
  async run(signal: AbortSignal): Promise<void> {
    if (this.#running) {
      throw new BerthError(
        'BERTH_REFLECTOR_RUNNING',
        'Cannot run a reflector that is already running',
      );
    }
    this.#running = true;
    try {
      while (!signal.aborted) {
        try {
          this.#resourceVersion ??= await this.#list(signal);
          await this.#watch(this.#resourceVersion, signal);
        } catch (err) {
          if (isAborted(signal)) break;
          await this.#recover(err, signal);
        }
      }
    } finally {
      this.#running = false;
    }
  }

  async #recover(err: unknown, signal: AbortSignal): Promise<void> {
    this.#restarts++;
    if (isGone(err) && this.#resourceVersion !== undefined) {
      // The resourceVersion was compacted away: only a fresh list is consistent. The
      // first 410 relists at once (compaction is routine); one that follows a relist
      // without a single event in between (etcd restored to an older revision, a proxy
      // answering 410) waits a growing back-off, as client-go's backoff manager does
      // between ListAndWatch calls, instead of list/watch as fast as the API answers.
      this.#consecutiveGone++;
      const delayMs =
        this.#consecutiveGone < 2 ? 0 : Math.round(this.#delay(this.#consecutiveGone - 2));
      this.#log.info('Watch expired, listing again', {
        resourceVersion: this.#resourceVersion,
        error: messageOf(err),
        ...(delayMs > 0 && { delayMs, consecutiveExpired: this.#consecutiveGone }),
      });
      this.#resourceVersion = undefined;
      if (delayMs > 0) await this.#sleep(delayMs, signal);
      return;
    }
    this.#errors++;
    this.#consecutiveErrors++;
    this.#lastError = messageOf(err);
    const delayMs = Math.round(this.#delay(this.#consecutiveErrors - 1));
    const what = this.#resourceVersion === undefined ? 'List' : 'Watch';
    this.#log.warn(`${what} failed, retrying`, {
      error: this.#lastError,
      consecutiveErrors: this.#consecutiveErrors,
      delayMs,
      ...(this.#resourceVersion === undefined ? {} : { resourceVersion: this.#resourceVersion }),
    });
    await this.#sleep(delayMs, signal);
  }

  #delay(attempt: number): number {
    const { initialMs, maxMs } = this.#o.backoff ?? { initialMs: 800, maxMs: 30_000 };
    return retryDelay(attempt, initialMs, maxMs, this.#o.random ?? Math.random);
  }

  async #sleep(ms: number, signal: AbortSignal): Promise<void> {
    try {
      await this.#o.clock.sleep(ms, signal);
    } catch {
      // Aborted during back-off: run() sees the signal and returns.
    }
  }

  async #list(signal: AbortSignal): Promise<string> {
    const { client, path } = this.#o;
    const items: T[] = [];
    let pageSize = this.#o.pageSize ?? 500;
    let next: string | undefined;
    let rv = '';
    for (;;) {
      let page;
      try {
        page = await client.list<T>(path, {
          signal,
          ...this.#selectors(),
          ...(pageSize > 0 ? { limit: pageSize } : {}),
          ...(next === undefined ? {} : { continue: next }),
        });
      } catch (err) {
        if (next === undefined || !isGone(err)) throw err;
        // The continue token expired mid-list: start over in one request, as client-go does.
        items.length = 0;
        next = undefined;
        pageSize = 0;
        continue;
      }
      items.push(...page.items);
      rv = page.metadata.resourceVersion;
      next = page.metadata.continue === '' ? undefined : page.metadata.continue;
      if (next === undefined) break;
    }
    await this.#call(() => this.#o.handler.onSync(items), 'onSync');
    this.#lastSyncAt = this.#o.clock.now();
    this.#consecutiveErrors = 0;
    if (!this.#hasSynced) {
      this.#hasSynced = true;
      this.#synced.resolve(undefined);
    }
    this.#log.debug('Listed', { items: items.length, resourceVersion: rv });
    return rv;
  }

  async #watch(from: string, signal: AbortSignal): Promise<void> {
    const { clock, client, path } = this.#o;
    const stallMs = this.#o.stallTimeoutMs ?? 180_000;
    const minTimeout = this.#o.minWatchTimeoutSeconds ?? 300;
    const timeoutSeconds = Math.floor(minTimeout * (1 + (this.#o.random ?? Math.random)()));
    const watch = new AbortController();
    const onAbort = (): void => {
      watch.abort(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    // An 'abort' that happened before the listener existed (e.g. inside onSync) never fires.
    if (signal.aborted) watch.abort(signal.reason);
    // Elapsed times on the monotonic clock: a wall-clock step must neither trip the stall
    // watchdog nor make a long watch look short (Go's time.Since does the same).
    const started = clock.monotonic();
    let lastActivity = started;
    let received = 0;
    const state = { stalled: false };
    const watchdog = (async () => {
      for (;;) {
        const idle = clock.monotonic() - lastActivity;
        if (idle >= stallMs) {
          state.stalled = true;
          watch.abort();
          return;
        }
        await clock.sleep(stallMs - idle, watch.signal);
      }
    })().catch(() => undefined);
    try {
      const events = client.watch<T>(path, {
        signal: watch.signal,
        ...this.#selectors(),
        resourceVersion: from,
        allowWatchBookmarks: true,
        timeoutSeconds,
      });
      for await (const event of events) {
        lastActivity = clock.monotonic();
        this.#lastEventAt = clock.now();
        received++;
        const rv = event.object.metadata?.resourceVersion;
        if (event.type === 'ERROR') throw statusFromWatchError(event.object);
        const { type, object } = event;
        if (type !== 'BOOKMARK') {
          await this.#call(() => this.#o.handler.onEvent(type, object), 'onEvent');
        }
        if (rv !== undefined && rv !== '') this.#resourceVersion = rv;
        this.#consecutiveErrors = 0;
        this.#consecutiveGone = 0;
      }
    } finally {
      watch.abort();
      signal.removeEventListener('abort', onAbort);
      await watchdog;
    }
    if (signal.aborted) return;
    if (state.stalled) {
      throw new ReflectorStallError(
        `Watch of ${path.resource} delivered nothing for ${stallMs} ms, restarting it`,
      );
    }
    if (received === 0 && clock.monotonic() - started < SHORT_WATCH_MS) {
      throw new ReflectorShortWatchError(
        `Watch of ${path.resource} ended at once without an event`,
      );
    }
    this.#consecutiveGone = 0;
    this.#log.debug('Watch ended, resuming', {
      received,
      resourceVersion: this.#resourceVersion ?? '',
    });
  }

  #selectors(): { labelSelector?: string; fieldSelector?: string } {
    return {
      ...(this.#o.labelSelector === undefined ? {} : { labelSelector: this.#o.labelSelector }),
      ...(this.#o.fieldSelector === undefined ? {} : { fieldSelector: this.#o.fieldSelector }),
    };
  }

  async #call(fn: () => void | Promise<void>, what: string): Promise<void> {
    try {
      await fn();
    } catch (err) {
      this.#handlerErrors++;
      this.#log.error(`Reflector handler ${what} failed`, { error: messageOf(err) });
    }
  }
}
