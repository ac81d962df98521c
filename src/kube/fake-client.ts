/**
 * `FakeKubeClient`: an in-memory apiserver for unit tests that passes the same
 * contract suite (contract.ts) as the real client.
 *
 * What it models: one resourceVersion counter for every write; uid and
 * creationTimestamp on create, generateName; optimistic concurrency (a stale
 * resourceVersion or another uid is a Conflict); no-op updates keep the
 * resourceVersion; the status subresource (a status write changes only status, a main
 * write never changes status of resources that have one); delete preconditions,
 * finalizers, graceful deletion of pods bound to a node (deletionTimestamp first, gone
 * after a delete with grace 0); deleting a namespace deletes its objects; label and
 * field selectors over any dotted field (the apiserver allows only some fields per
 * resource); paged lists from a snapshot; watches from a resourceVersion replayed from
 * a bounded history (older ones are 410 Expired), objects entering or leaving a
 * selector seen as ADDED / DELETED, bookmarks on request.
 *
 * Patches: merge is RFC 7386, json is RFC 6902, strategic knows the merge keys of the
 * core lists the kubelet patches (see patch.ts), apply is treated as a merge patch
 * (no field ownership).
 *
 * Test controls: `failNext`, `expireWatches` (410 Gone for running watches and old
 * resourceVersions), `failWatches`, `endWatches` (a server timeout), `bookmark`,
 * `activeWatches`, `calls`.
 */
import { randomUUID } from 'node:crypto';
import { parse as parseYaml } from 'yaml';
import { systemClock, type Clock } from '../util/clock.ts';
import { expiredError, type FakeMeta, type FakeObject } from './fake-watch.ts';
import { apiError, asObj, FakeStore } from './fake-store.ts';
import { jsonPatch, mergePatch, PatchError, strategicMergePatch } from './patch.ts';
import { parseFieldSelector, parseLabelSelector } from './selectors.ts';
import type {
  DeleteOptions,
  KubeClient,
  ListOptions,
  ListResult,
  PatchOptions,
  PatchType,
  RequestOptions,
  ResourcePath,
  WatchEvent,
  WatchOptions,
  WriteOptions,
} from './types.ts';

type Obj = FakeObject;
type Meta = FakeMeta;
const clone = <T>(value: T): T => structuredClone(value);

/** The KubeClient methods, as recorded in `FakeKubeClient.calls`. */
export type FakeVerb = 'get' | 'list' | 'create' | 'update' | 'patch' | 'delete' | 'watch';

/** One call the fake received, for assertions. */
export interface FakeCall {
  readonly verb: FakeVerb;
  readonly resource: string;
  readonly namespace?: string;
  readonly name?: string;
  readonly subresource?: string;
  readonly patchType?: PatchType;
  /** The resourceVersion a list or watch asked for. */
  readonly resourceVersion?: string;
  /** The continue token of a list. */
  readonly continue?: string;
}

/** An error to throw from the next matching calls. */
export interface FakeFailure {
  readonly verb?: FakeVerb;
  readonly resource?: string;
  readonly error: unknown;
  /** How many calls fail (default 1). */
  readonly times?: number;
}

/** Options of the fake; every one has a default that suits most unit tests. */
export interface FakeKubeClientOptions {
  /** Timestamps and watch timeoutSeconds (default: the system clock). */
  readonly clock?: Clock;
  /** Reject creates in namespaces that do not exist, as the apiserver does (default false). */
  readonly requireNamespaces?: boolean;
  /** Changes kept for watches; a watch from an older resourceVersion is 410 Expired. */
  readonly historyLimit?: number;
}

/** An in-memory `KubeClient` (see the top of this file for what it models). */
export class FakeKubeClient implements KubeClient {
  /** Every call received, in order. */
  readonly calls: FakeCall[] = [];
  readonly #s: FakeStore;
  #failures: { failure: FakeFailure; left: number }[] = [];
  #continuations = new Map<string, { items: Obj[]; rv: string }>();

  constructor(options: FakeKubeClientOptions = {}) {
    this.#s = new FakeStore(
      options.clock ?? systemClock,
      options.requireNamespaces ?? false,
      options.historyLimit ?? 10_000,
    );
  }

  // ---- test controls ----

  /** The current (latest) resourceVersion. */
  get resourceVersion(): string {
    return String(this.#s.rv);
  }

  /** Watches currently open. */
  get activeWatches(): number {
    return this.#s.hub.size;
  }

  /** Makes the next matching call(s) throw `failure.error`. */
  failNext(failure: FakeFailure): void {
    this.#failures.push({ failure, left: failure.times ?? 1 });
  }

  /** Compacts history: running watches fail with 410 Expired, and so do watches and list continuations from any resourceVersion before now. */
  expireWatches(): void {
    this.#continuations.clear();
    this.#s.hub.expire(this.#s.rv);
  }

  /** Running watches throw `error` once their queued events are read. */
  failWatches(error: unknown): void {
    this.#s.hub.fail(error);
  }

  /** Running watches end normally (as at the server's timeoutSeconds). */
  endWatches(): void {
    this.#s.hub.end();
  }

  /** Sends a BOOKMARK at the current resourceVersion to watches that asked for them. */
  bookmark(): void {
    this.#s.hub.bookmark(this.resourceVersion);
  }

  /** What is stored in a collection (namespace-filtered when the path has one). */
  objects<T>(path: ResourcePath): T[] {
    return this.#s.select(path, [], []).map((o) => clone(o) as unknown as T);
  }

  // ---- KubeClient ----

  async get<T>(path: ResourcePath, name: string, options: RequestOptions = {}): Promise<T> {
    this.#begin('get', path, options.signal, { name });
    await Promise.resolve();
    return clone(this.#s.existing(path, name)) as unknown as T;
  }

  async list<T>(path: ResourcePath, options: ListOptions = {}): Promise<ListResult<T>> {
    this.#begin('list', path, options.signal, {
      ...(options.resourceVersion === undefined
        ? {}
        : { resourceVersion: options.resourceVersion }),
      ...(options.continue === undefined ? {} : { continue: options.continue }),
    });
    await Promise.resolve();
    let items: Obj[];
    let rv: string;
    if (options.continue !== undefined && options.continue !== '') {
      const saved = this.#continuations.get(options.continue);
      if (saved === undefined) {
        throw expiredError('The provided continue parameter is too old');
      }
      this.#continuations.delete(options.continue);
      ({ items, rv } = saved);
    } else {
      const { labels, fields } = this.#selectors(options);
      items = this.#s.select(path, labels, fields);
      rv = this.resourceVersion;
    }
    const limit = options.limit ?? 0;
    let next: string | undefined;
    if (limit > 0 && items.length > limit) {
      next = randomUUID();
      this.#continuations.set(next, { items: items.slice(limit), rv });
      items = items.slice(0, limit);
    }
    return {
      items: items.map((o) => clone(o) as unknown as T),
      metadata: { resourceVersion: rv, ...(next === undefined ? {} : { continue: next }) },
    };
  }

  async create<T>(path: ResourcePath, body: T, options: WriteOptions = {}): Promise<T> {
    this.#begin('create', path, options.signal, this.#sub(options));
    await Promise.resolve();
    if (options.subresource !== undefined) {
      throw apiError(404, 'NotFound', 'the server could not find the requested resource');
    }
    return this.#s.insert(path, asObj(body)) as unknown as T;
  }

  async update<T>(
    path: ResourcePath,
    name: string,
    body: T,
    options: WriteOptions = {},
  ): Promise<T> {
    this.#begin('update', path, options.signal, { name, ...this.#sub(options) });
    await Promise.resolve();
    const stored = this.#s.existing(path, name);
    const candidate = asObj(body);
    if (candidate.metadata.name !== undefined && candidate.metadata.name !== name) {
      throw apiError(
        400,
        'BadRequest',
        `the name of the object (${candidate.metadata.name}) does not match the name on the URL (${name})`,
      );
    }
    this.#s.preconditions(path, stored, candidate.metadata);
    return this.#s.replace(path, stored, candidate, options.subresource) as unknown as T;
  }

  async patch<T>(
    path: ResourcePath,
    name: string,
    patch: unknown,
    type: PatchType,
    options: PatchOptions = {},
  ): Promise<T> {
    this.#begin('patch', path, options.signal, { name, patchType: type, ...this.#sub(options) });
    await Promise.resolve();
    if (type === 'apply' && (options.fieldManager ?? '') === '') {
      throw apiError(422, 'Invalid', 'fieldManager: Required value: is required for apply patch');
    }
    let parsed: unknown = patch;
    if (typeof patch === 'string') {
      try {
        parsed = type === 'apply' ? parseYaml(patch) : JSON.parse(patch);
      } catch (err) {
        throw apiError(400, 'BadRequest', `cannot decode the patch: ${(err as Error).message}`);
      }
    }
    const stored = this.#s.collection(path).get(this.#s.key(path, name));
    if (stored === undefined) {
      if (type !== 'apply') throw this.#s.notFound(path, name);
      const created = asObj(mergePatch({}, parsed));
      created.metadata.name = name;
      return this.#s.insert(path, created) as unknown as T;
    }
    const meta = (parsed as { metadata?: Meta } | null)?.metadata;
    if (type !== 'json' && meta !== undefined) this.#s.preconditions(path, stored, meta);
    let result: unknown;
    try {
      result =
        type === 'json'
          ? jsonPatch(stored, parsed)
          : type === 'strategic'
            ? strategicMergePatch(stored, parsed)
            : mergePatch(stored, parsed);
    } catch (err) {
      if (err instanceof PatchError) throw apiError(422, 'Invalid', err.message, path, name);
      throw err;
    }
    return this.#s.replace(path, stored, result as Obj, options.subresource) as unknown as T;
  }

  async delete(path: ResourcePath, name: string, options: DeleteOptions = {}): Promise<void> {
    this.#begin('delete', path, options.signal, { name });
    await Promise.resolve();
    this.#s.delete(path, name, options);
  }

  watch<T>(path: ResourcePath, options: WatchOptions = {}): AsyncIterable<WatchEvent<T>> {
    return this.#watch<T>(path, options);
  }

  /** Ends every watch. Idempotent. */
  close(): Promise<void> {
    this.endWatches();
    return Promise.resolve();
  }

  // ---- internals ----

  async *#watch<T>(path: ResourcePath, o: WatchOptions): AsyncGenerator<WatchEvent<T>> {
    if (o.signal?.aborted === true) return;
    this.#begin(
      'watch',
      path,
      undefined,
      o.resourceVersion === undefined ? {} : { resourceVersion: o.resourceVersion },
    );
    const { labels, fields } = this.#selectors(o);
    const filter = {
      collection: this.#s.collectionKey(path),
      namespace: path.namespace === '' ? undefined : path.namespace,
      labels,
      fields,
      bookmarks: o.allowWatchBookmarks === true,
    };
    const from = o.resourceVersion ?? '';
    const rv = Number(from);
    if (from !== '' && !Number.isInteger(rv)) {
      throw apiError(400, 'BadRequest', `invalid resource version "${from}"`);
    }
    // "" and "0" start with the current objects, as the apiserver's watch cache does.
    const start =
      from === '' || from === '0'
        ? {
            kind: 'current' as const,
            objects: this.#s.select(path, labels, fields),
            rv: this.#s.rv,
          }
        : { kind: 'after' as const, rv };
    yield* this.#s.hub.open<T>(filter, start, {
      ...(o.signal === undefined ? {} : { signal: o.signal }),
      ...(o.timeoutSeconds === undefined ? {} : { timeoutSeconds: o.timeoutSeconds }),
    });
  }

  #begin(
    verb: FakeVerb,
    path: ResourcePath,
    signal: AbortSignal | undefined,
    extra: Partial<FakeCall>,
  ): void {
    if (signal?.aborted === true) throw signal.reason;
    this.calls.push({
      verb,
      resource: path.resource,
      ...(path.namespace === undefined ? {} : { namespace: path.namespace }),
      ...extra,
    });
    const hit = this.#failures.find(
      (f) =>
        (f.failure.verb === undefined || f.failure.verb === verb) &&
        (f.failure.resource === undefined || f.failure.resource === path.resource),
    );
    if (hit === undefined) return;
    hit.left--;
    if (hit.left <= 0) this.#failures = this.#failures.filter((f) => f !== hit);
    throw hit.failure.error;
  }

  #sub(options: WriteOptions): Partial<FakeCall> {
    return options.subresource === undefined ? {} : { subresource: options.subresource };
  }

  #selectors(o: { labelSelector?: string; fieldSelector?: string }) {
    try {
      return {
        labels: o.labelSelector === undefined ? [] : parseLabelSelector(o.labelSelector),
        fields: o.fieldSelector === undefined ? [] : parseFieldSelector(o.fieldSelector),
      };
    } catch (err) {
      throw apiError(400, 'BadRequest', (err as Error).message);
    }
  }
}
