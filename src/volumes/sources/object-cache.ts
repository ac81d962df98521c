/**
 * The configMaps and secrets that pods on this node reference, each watched on its own
 * (configMapAndSecretChangeDetectionStrategy Watch, upstream's watch-based manager).
 * A watch lists and watches one object (fieldSelector metadata.name=<name> in its
 * namespace): the node authorizer lets a node read only objects its pods reference,
 * so it cannot watch whole collections.
 *
 * Objects are reference-counted by pod: `register(pod)` starts the watches a pod needs
 * (before dropping those its previous version needed, so a shared object is never
 * re-listed), `unregister(uid)` stops the ones nobody references any more. `get` serves
 * the cached object, waits up to `syncTimeoutMs` for a new watch's first list and then
 * falls back to a GET. `onChange` tells the kubelet which object changed so it can
 * resync the pods that use it. Immutable objects are not watched once read. Every watch
 * loop is owned and awaited by `stop()`.
 */
import type { ConfigMap, Pod, Secret } from 'kubernetes-types/core/v1.js';
import { Reflector } from '../../kube/reflector.ts';
import {
  CONFIGMAPS,
  inNamespace,
  isNotFound,
  SECRETS,
  type KubeClient,
  type ResourcePath,
} from '../../kube/types.ts';
import type { Clock } from '../../util/clock.ts';
import { BerthError } from '../../util/errors.ts';
import type { Logger } from '../../util/logger.ts';
import type { KindObject, ObjectKind, ObjectReader } from './payload.ts';
import { podObjectRefs } from './pod-refs.ts';

type Watched = ConfigMap | Secret;

/** Called when a watched object is created, changed or deleted. */
export type ObjectChangeListener = (kind: ObjectKind, namespace: string, name: string) => void;

export interface ObjectCacheOptions {
  readonly kube: KubeClient;
  readonly clock: Clock;
  readonly logger: Logger;
  /** How long `get` waits for a new watch's first list before a GET (default 1 s, as upstream). */
  readonly syncTimeoutMs?: number;
  /** Back-off of the watch loops (the reflector's default: 800 ms -> 30 s, jittered). */
  readonly backoff?: { readonly initialMs: number; readonly maxMs: number };
  readonly random?: () => number;
}

interface Entry {
  readonly kind: ObjectKind;
  readonly namespace: string;
  readonly name: string;
  readonly reflector: Reflector<Watched>;
  readonly controller: AbortController;
  readonly done: Promise<void>;
  /** Pods referencing the object. */
  readonly pods: Set<string>;
  object: Watched | undefined;
  /** resourceVersion of `object`, '' when the object does not exist. */
  version: string | undefined;
}

const RESOURCES: Record<ObjectKind, ResourcePath> = { configmap: CONFIGMAPS, secret: SECRETS };

const keyOf = (kind: ObjectKind, namespace: string, name: string): string =>
  `${kind}/${namespace}/${name}`;

/** The watch-based cache of referenced configMaps and secrets (see the top of this file). */
export class WatchingObjectCache implements ObjectReader {
  readonly #o: ObjectCacheOptions;
  readonly #log: Logger;
  readonly #entries = new Map<string, Entry>();
  /** Keys each registered pod references. */
  readonly #pods = new Map<string, Set<string>>();
  /** Loops of entries already dropped, still finishing. */
  readonly #stopping = new Set<Promise<void>>();
  readonly #listeners = new Set<ObjectChangeListener>();
  #stopped = false;

  constructor(options: ObjectCacheOptions) {
    this.#o = options;
    this.#log = options.logger.child({ component: 'object-cache' });
  }

  /** Watches currently running (for tests and metrics). */
  get watches(): number {
    return this.#entries.size;
  }

  /** Adds a change listener; returns a function that removes it. */
  onChange(listener: ObjectChangeListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Starts watching what `pod` references and drops what its previous version did. */
  register(pod: Pod): void {
    if (this.#stopped) {
      throw new BerthError(
        'BERTH_OBJECT_CACHE_STOPPED',
        'Cannot register a pod as the object cache is stopped',
      );
    }
    const uid = pod.metadata?.uid ?? '';
    const namespace = pod.metadata?.namespace ?? 'default';
    const refs = podObjectRefs(pod);
    const keys = new Set<string>();
    for (const [kind, names] of [
      ['configmap', refs.configMaps],
      ['secret', refs.secrets],
    ] as const) {
      for (const name of names) {
        const key = keyOf(kind, namespace, name);
        keys.add(key);
        const entry = this.#entries.get(key) ?? this.#start(kind, namespace, name);
        entry.pods.add(uid);
      }
    }
    const previous = this.#pods.get(uid);
    this.#pods.set(uid, keys);
    for (const key of previous ?? []) {
      if (!keys.has(key)) this.#release(key, uid);
    }
  }

  /** Stops the watches only `uid` referenced. Idempotent. */
  unregister(uid: string): void {
    const keys = this.#pods.get(uid);
    if (keys === undefined) return;
    this.#pods.delete(uid);
    for (const key of keys) this.#release(key, uid);
  }

  /**
   * The object (undefined when it does not exist): from the watch when it has listed,
   * else from a GET. Objects no registered pod references are always read with a GET.
   */
  async get<K extends ObjectKind>(
    kind: K,
    namespace: string,
    name: string,
    signal: AbortSignal,
  ): Promise<KindObject<K> | undefined> {
    const entry = this.#entries.get(keyOf(kind, namespace, name));
    if (entry !== undefined && (await this.#waitForSync(entry, signal))) {
      // The entry of a configmap key only ever holds a ConfigMap (and a secret's a Secret).
      return entry.object === undefined
        ? undefined
        : (structuredClone(entry.object) as KindObject<K>);
    }
    try {
      return await this.#o.kube.get<KindObject<K>>(inNamespace(RESOURCES[kind], namespace), name, {
        signal,
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Stops every watch and waits for the loops to end. Idempotent. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const entry of this.#entries.values()) {
      entry.controller.abort();
      this.#stopping.add(entry.done);
    }
    this.#entries.clear();
    this.#pods.clear();
    await Promise.all([...this.#stopping]);
  }

  #start(kind: ObjectKind, namespace: string, name: string): Entry {
    const key = keyOf(kind, namespace, name);
    const log = this.#log.child({ kind, namespace, name });
    const controller = new AbortController();
    const holder: { entry?: Entry } = {};
    const reflector = new Reflector<Watched>({
      client: this.#o.kube,
      path: inNamespace(RESOURCES[kind], namespace),
      fieldSelector: `metadata.name=${name}`,
      clock: this.#o.clock,
      logger: log,
      name: key,
      ...(this.#o.backoff === undefined ? {} : { backoff: this.#o.backoff }),
      ...(this.#o.random === undefined ? {} : { random: this.#o.random }),
      handler: {
        onSync: (items) => {
          if (holder.entry !== undefined) this.#update(holder.entry, items[0]);
        },
        onEvent: (type, obj) => {
          if (holder.entry !== undefined) {
            this.#update(holder.entry, type === 'DELETED' ? undefined : obj);
          }
        },
      },
    });
    const done = reflector.run(controller.signal).catch((err: unknown) => {
      log.error('Object watch ended with an error', {
        error: err instanceof Error ? err.message : String(err),
      });
    });
    const entry: Entry = {
      kind,
      namespace,
      name,
      reflector,
      controller,
      done,
      pods: new Set(),
      object: undefined,
      version: undefined,
    };
    holder.entry = entry;
    this.#entries.set(key, entry);
    log.debug('Watching object');
    return entry;
  }

  #release(key: string, uid: string): void {
    const entry = this.#entries.get(key);
    if (entry === undefined) return;
    entry.pods.delete(uid);
    if (entry.pods.size > 0) return;
    this.#entries.delete(key);
    entry.controller.abort();
    this.#stopping.add(entry.done);
    void entry.done.then(() => this.#stopping.delete(entry.done));
  }

  #update(entry: Entry, object: Watched | undefined): void {
    // A dropped entry's last events must not reach listeners.
    if (entry.controller.signal.aborted) return;
    const version = object === undefined ? '' : (object.metadata?.resourceVersion ?? '?');
    const before = entry.version;
    entry.object = object;
    entry.version = version;
    // As upstream: an immutable object can only be deleted, which pods that already
    // run it do not need to see, so its watch is not worth keeping.
    if (object?.immutable === true) {
      this.#log.debug('Object is immutable, stopping its watch', {
        kind: entry.kind,
        namespace: entry.namespace,
        name: entry.name,
      });
      // Deferred: the reflector links its watch to the signal only when the watch
      // starts, so an abort from inside onSync would leave that watch open.
      setImmediate(() => {
        entry.controller.abort();
      });
    }
    if (before === undefined || before === version) return;
    for (const listener of this.#listeners) {
      try {
        listener(entry.kind, entry.namespace, entry.name);
      } catch (err) {
        this.#log.error('Object change listener failed', {
          error: err instanceof Error ? err.message : String(err),
        });
      }
    }
  }

  /** True when the entry has listed, within `syncTimeoutMs`. */
  async #waitForSync(entry: Entry, signal: AbortSignal): Promise<boolean> {
    if (entry.reflector.hasSynced()) return true;
    if (signal.aborted) throw signal.reason;
    const local = new AbortController();
    const onAbort = (): void => {
      local.abort(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      const synced = entry.reflector.whenSynced(local.signal).then(() => true);
      const timedOut = this.#o.clock
        .sleep(this.#o.syncTimeoutMs ?? 1000, local.signal)
        .then(() => false);
      // The loser rejects once `local` aborts below; it must not go unhandled.
      synced.catch(() => undefined);
      timedOut.catch(() => undefined);
      return await Promise.race([synced, timedOut]);
    } finally {
      signal.removeEventListener('abort', onAbort);
      local.abort();
    }
  }
}
