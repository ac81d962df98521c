/**
 * The fake client's watch side: a bounded history of changes (so a watch can start
 * from a resourceVersion, and one older than the history is 410 Expired) and the open
 * watches, each with its selectors, a queue, and an optional server-side timeout.
 * As in the apiserver's watch cache, an object that starts or stops matching a
 * watch's selectors is seen as ADDED or DELETED.
 */
import type { Clock } from '../util/clock.ts';
import {
  matchesFields,
  matchesLabels,
  type FieldRequirement,
  type LabelRequirement,
} from './selectors.ts';
import { errorFromStatus, failureStatus } from './status.ts';
import type { WatchEvent } from './types.ts';

/** The stored shape of an object: metadata is always present. */
export interface FakeMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  finalizers?: string[];
  [key: string]: unknown;
}
/** An object as the fake stores it. */
export type FakeObject = { metadata: FakeMeta; [key: string]: unknown };

/** The kinds of change the store records (bookmarks and errors are watch-only). */
export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** One write, as kept in the history for watches. */
export interface Change {
  readonly rv: number;
  /** "<group>/<resource>". */
  readonly collection: string;
  readonly namespace: string;
  readonly type: ChangeType;
  readonly object: FakeObject;
  readonly previous: FakeObject | undefined;
}

/** What one watch selects. */
export interface WatchFilter {
  readonly collection: string;
  readonly namespace: string | undefined;
  readonly labels: readonly LabelRequirement[];
  readonly fields: readonly FieldRequirement[];
  readonly bookmarks: boolean;
}

interface Watcher extends WatchFilter {
  readonly queue: WatchEvent<unknown>[];
  wake: (() => void) | undefined;
  end: { readonly error?: unknown } | undefined;
}

/** Where a watch starts: the current objects (as ADDED), or after a resourceVersion. */
export type WatchStart =
  | { readonly kind: 'current'; readonly objects: readonly FakeObject[]; readonly rv: number }
  | { readonly kind: 'after'; readonly rv: number };

const clone = <T>(value: T): T => structuredClone(value);
// The loop below re-reads `aborted` after awaits; a function keeps TS from narrowing it away.
const isAborted = (signal: AbortSignal | undefined): boolean => signal?.aborted === true;

/** The 410 Expired error of a compacted resourceVersion or continue token. */
export function expiredError(message: string) {
  return errorFromStatus(failureStatus(410, 'Expired', message), 410);
}

/** History and open watches of the fake client. */
export class WatchHub {
  readonly #clock: Clock;
  readonly #historyLimit: number;
  #history: Change[] = [];
  /** Lowest resourceVersion a watch can still start after. */
  #oldestRv: number;
  readonly #watchers = new Set<Watcher>();

  constructor(clock: Clock, historyLimit: number, startRv: number) {
    this.#clock = clock;
    this.#historyLimit = historyLimit;
    this.#oldestRv = startRv;
  }

  get size(): number {
    return this.#watchers.size;
  }

  /** Forgets history up to `rv`: running watches and older starts get 410 Expired. */
  expire(rv: number): void {
    this.#oldestRv = rv;
    this.#history = [];
    this.fail(expiredError('too old resource version'));
  }

  fail(error: unknown): void {
    for (const w of this.#watchers) this.#end(w, { error });
  }

  end(): void {
    for (const w of this.#watchers) this.#end(w, {});
  }

  bookmark(rv: string): void {
    for (const w of this.#watchers) {
      if (!w.bookmarks || w.end !== undefined) continue;
      w.queue.push({ type: 'BOOKMARK', object: { metadata: { resourceVersion: rv } } });
      w.wake?.();
    }
  }

  record(change: Change): void {
    this.#history.push(change);
    if (this.#history.length > this.#historyLimit) {
      const dropped = this.#history.shift();
      if (dropped !== undefined) this.#oldestRv = dropped.rv;
    }
    for (const w of this.#watchers) {
      if (w.end !== undefined) continue;
      const event = translate(w, change);
      if (event === undefined) continue;
      w.queue.push(event);
      w.wake?.();
    }
  }

  /** Opens a watch; throws 410 Expired when `start.rv` is older than the history. */
  async *open<T>(
    filter: WatchFilter,
    start: WatchStart,
    options: { readonly signal?: AbortSignal; readonly timeoutSeconds?: number },
  ): AsyncGenerator<WatchEvent<T>> {
    const { signal } = options;
    const w: Watcher = { ...filter, queue: [], wake: undefined, end: undefined };
    if (start.kind === 'current') {
      for (const obj of start.objects) w.queue.push({ type: 'ADDED', object: clone(obj) });
      // The apiserver marks the end of the initial ADDED events with a bookmark.
      if (w.bookmarks) {
        w.queue.push({
          type: 'BOOKMARK',
          object: {
            metadata: {
              resourceVersion: String(start.rv),
              annotations: { 'k8s.io/initial-events-end': 'true' },
            },
          },
        });
      }
    } else {
      if (start.rv < this.#oldestRv) {
        throw expiredError(`too old resource version: ${start.rv} (${this.#oldestRv})`);
      }
      for (const change of this.#history) {
        if (change.rv <= start.rv) continue;
        const event = translate(w, change);
        if (event !== undefined) w.queue.push(event);
      }
    }
    this.#watchers.add(w);
    const onAbort = (): void => {
      w.wake?.();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const timer = new AbortController();
    if (options.timeoutSeconds !== undefined && options.timeoutSeconds > 0) {
      void this.#clock.sleep(options.timeoutSeconds * 1000, timer.signal).then(
        () => {
          this.#end(w, {});
        },
        () => undefined,
      );
    }
    try {
      for (;;) {
        if (isAborted(signal)) return;
        const next = w.queue.shift();
        if (next !== undefined) {
          yield next as WatchEvent<T>;
          continue;
        }
        if (w.end !== undefined) {
          if (w.end.error !== undefined) throw w.end.error as Error;
          return;
        }
        await new Promise<void>((resolve) => (w.wake = resolve));
        w.wake = undefined;
      }
    } finally {
      this.#watchers.delete(w);
      signal?.removeEventListener('abort', onAbort);
      timer.abort();
    }
  }

  #end(w: Watcher, end: { readonly error?: unknown }): void {
    w.end ??= end;
    w.wake?.();
  }
}

function matches(w: WatchFilter, obj: FakeObject): boolean {
  return matchesLabels(obj.metadata.labels, w.labels) && matchesFields(obj, w.fields);
}

function translate(w: WatchFilter, c: Change): WatchEvent<unknown> | undefined {
  if (c.collection !== w.collection) return undefined;
  if (w.namespace !== undefined && w.namespace !== c.namespace) return undefined;
  const now = matches(w, c.object);
  const before = c.previous !== undefined && matches(w, c.previous);
  if (c.type === 'MODIFIED' && !now && c.previous !== undefined && before) {
    // Leaving the selector looks like a delete of the last matching state.
    const gone = clone(c.previous);
    gone.metadata.resourceVersion = String(c.rv);
    return { type: 'DELETED', object: gone };
  }
  if (!now) return undefined;
  const type = c.type === 'MODIFIED' && !before ? 'ADDED' : c.type;
  return { type, object: clone(c.object) };
}
