/**
 * ClusterTrustBundles for `clusterTrustBundle` projected sources (upstream
 * pkg/kubelet/clustertrustbundle, gate ClusterTrustBundleProjection).
 *
 * As upstream's lazy informer manager, nothing is listed until a pod asks for a bundle:
 * the first request wakes `run`, which picks the newest certificates.k8s.io version the
 * apiserver serves (v1, then v1beta1, then v1alpha1; a version that answers 404 is not
 * served) and reflects the whole cluster-scoped collection. The first request waits up
 * to 10 s for the first list, later ones fail at once while it has not arrived, with
 * upstream's texts. Bundles are unified, de-duplicated and shuffled (upstream shuffles
 * so that nobody depends on an order), and the result is kept for 5 min or until a
 * bundle of the same name or signer changes; `onChange` lets the kubelet resync the
 * pods that project bundles so the file follows the object without waiting a resync.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { LabelSelector } from 'kubernetes-types/meta/v1.js';
import { Reflector } from '../../kube/reflector.ts';
import type { LabelRequirement } from '../../kube/selectors.ts';
import { matchesLabels } from '../../kube/selectors.ts';
import { isNotFound, type KubeClient, type ResourcePath } from '../../kube/types.ts';
import type { Clock } from '../../util/clock.ts';
import type { Logger } from '../../util/logger.ts';
import { VolumeError } from '../types.ts';

/** What a clusterTrustBundle projection reads (upstream's clustertrustbundle.Manager). */
export interface ClusterTrustBundles {
  /** The PEM trust anchors of the bundle `name`; empty when missing and `allowMissing`. */
  byName(name: string, allowMissing: boolean, signal: AbortSignal): Promise<Buffer>;
  /** The unified PEM trust anchors of every bundle of `signerName` that `selector` matches. */
  bySigner(
    signerName: string,
    selector: LabelSelector | undefined,
    allowMissing: boolean,
    signal: AbortSignal,
  ): Promise<Buffer>;
}

/** The projection is off (gate disabled, or no API): every request fails with upstream's text. */
export class DisabledTrustBundles implements ClusterTrustBundles {
  byName(): Promise<Buffer> {
    return Promise.reject(unsupported());
  }
  bySigner(): Promise<Buffer> {
    return Promise.reject(unsupported());
  }
}

function unsupported(): VolumeError {
  return new VolumeError(
    'BERTH_VOLUME_SOURCE_ERROR',
    'ClusterTrustBundle projection is not supported in static kubelet mode',
  );
}

/** The parts of a ClusterTrustBundle berth reads (identical in v1alpha1, v1beta1 and v1). */
export interface ClusterTrustBundle {
  readonly metadata?: { readonly name?: string; readonly labels?: Record<string, string> };
  readonly spec?: { readonly signerName?: string; readonly trustBundle?: string };
}

/** Called with the bundle's name and signer ('' when none) when one changes. */
export type TrustBundleChangeListener = (name: string, signerName: string) => void;

export interface TrustBundleCacheOptions {
  readonly kube: KubeClient;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Shuffles the anchors (default Math.random, as upstream's rand.Shuffle). */
  readonly random?: () => number;
  /** How long the first request waits for the first list (default 10 s, as upstream). */
  readonly syncWaitMs?: number;
  /** How long a computed bundle is kept (default 5 min, as upstream's cache TTL). */
  readonly cacheTtlMs?: number;
}

const VERSIONS = ['v1', 'v1beta1', 'v1alpha1'] as const;
const MAX_LABEL_SELECTOR_LENGTH = 100 * 1024;

interface Cached {
  readonly data: Buffer;
  readonly at: number;
  readonly name: string;
  readonly signerName: string;
}

/** Reflects ClusterTrustBundles on demand (see the top of this file). */
export class TrustBundleCache implements ClusterTrustBundles {
  readonly #o: TrustBundleCacheOptions;
  readonly #log: Logger;
  readonly #bundles = new Map<string, ClusterTrustBundle>();
  readonly #cache = new Map<string, Cached>();
  readonly #listeners: TrustBundleChangeListener[] = [];
  readonly #demand = Promise.withResolvers<undefined>();
  readonly #ready = Promise.withResolvers<undefined>();
  #state: 'idle' | 'starting' | 'unserved' | 'synced' = 'idle';
  #waitedOnce = false;

  constructor(options: TrustBundleCacheOptions) {
    this.#o = options;
    this.#log = options.logger.child({ component: 'cluster-trust-bundles' });
  }

  onChange(listener: TrustBundleChangeListener): void {
    this.#listeners.push(listener);
  }

  /** Waits for the first request, then reflects the collection until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const aborted = Promise.withResolvers<undefined>();
    const onAbort = (): void => {
      aborted.resolve(undefined);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      await Promise.race([this.#demand.promise, aborted.promise]);
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
    if (signal.aborted) return;
    const path = await this.#servedPath(signal);
    if (path === undefined) {
      this.#state = 'unserved';
      this.#log.info(
        "No version of the ClusterTrustBundle API was found, the ClusterTrustBundle informer won't be started",
      );
      this.#ready.resolve(undefined);
      return;
    }
    this.#log.info('Started ClusterTrustBundle informer', {
      apiGroup: `${path.group}/${path.version}`,
    });
    const reflector = new Reflector<ClusterTrustBundle>({
      client: this.#o.kube,
      path,
      clock: this.#o.clock,
      logger: this.#log,
      name: 'clustertrustbundles',
      handler: {
        onSync: (items) => {
          const before = new Map(this.#bundles);
          this.#bundles.clear();
          for (const b of items) this.#bundles.set(b.metadata?.name ?? '', b);
          // A relist tells only what differs from what was held.
          for (const [name, b] of before) {
            if (!this.#bundles.has(name)) this.#changed(b);
          }
          for (const [name, b] of this.#bundles) {
            if (JSON.stringify(before.get(name)?.spec) !== JSON.stringify(b.spec)) this.#changed(b);
          }
          this.#state = 'synced';
          this.#ready.resolve(undefined);
        },
        onEvent: (type, b) => {
          const name = b.metadata?.name ?? '';
          if (type === 'DELETED') this.#bundles.delete(name);
          else this.#bundles.set(name, b);
          this.#changed(b);
        },
      },
    });
    await reflector.run(signal);
  }

  async byName(name: string, allowMissing: boolean, signal: AbortSignal): Promise<Buffer> {
    await this.#whenUsable(signal);
    const key = `name\0${name}`;
    const cached = this.#fresh(key);
    if (cached !== undefined) return cached;
    const bundle = this.#bundles.get(name);
    if (bundle === undefined) {
      if (allowMissing) return Buffer.alloc(0);
      throw new VolumeError(
        'BERTH_VOLUME_SOURCE_NOT_FOUND',
        `while getting ClusterTrustBundle: clustertrustbundle.certificates.k8s.io "${name}" not found`,
      );
    }
    return this.#keep(key, { name, signerName: '' }, this.#normalize([bundle]));
  }

  async bySigner(
    signerName: string,
    selector: LabelSelector | undefined,
    allowMissing: boolean,
    signal: AbortSignal,
  ): Promise<Buffer> {
    await this.#whenUsable(signal);
    const requirements = selectorRequirements(selector);
    const selectorText = selectorString(selector);
    if (selectorText.length > MAX_LABEL_SELECTOR_LENGTH) {
      throw new VolumeError(
        'BERTH_VOLUME_INVALID',
        `label selector length (${selectorText.length}) is larger than ${MAX_LABEL_SELECTOR_LENGTH}`,
      );
    }
    const key = `signer\0${signerName}\0${selectorText}`;
    const cached = this.#fresh(key);
    if (cached !== undefined) return cached;
    const matched = [...this.#bundles.values()].filter(
      (b) =>
        requirements !== undefined &&
        (b.spec?.signerName ?? '') === signerName &&
        matchesLabels(b.metadata?.labels, requirements),
    );
    if (matched.length === 0) {
      if (allowMissing) return Buffer.alloc(0);
      throw new VolumeError(
        'BERTH_VOLUME_SOURCE_NOT_FOUND',
        'combination of signerName and labelSelector matched zero ClusterTrustBundles',
      );
    }
    return this.#keep(key, { name: '', signerName }, this.#normalize(matched));
  }

  /** Wakes `run` and waits for its first list: 10 s the first time, then not at all. */
  async #whenUsable(signal: AbortSignal): Promise<void> {
    this.#demand.resolve(undefined);
    if (this.#state === 'idle') this.#state = 'starting';
    if (!this.#waitedOnce) {
      this.#waitedOnce = true;
      await this.#waitReady(signal);
    }
    if (this.#state === 'unserved') throw unsupported();
    if (this.#state !== 'synced') {
      throw new VolumeError(
        'BERTH_VOLUME_SOURCE_ERROR',
        'ClusterTrustBundle informer has not yet synced',
      );
    }
  }

  /** The first list, or the sync wait running out (then the caller reports "not yet synced"). */
  async #waitReady(signal: AbortSignal): Promise<void> {
    const timer = new AbortController();
    const onAbort = (): void => {
      timer.abort(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      await Promise.race([
        this.#ready.promise,
        this.#o.clock.sleep(this.#o.syncWaitMs ?? 10_000, timer.signal).catch(() => undefined),
      ]);
    } finally {
      signal.removeEventListener('abort', onAbort);
      timer.abort();
    }
    if (signal.aborted) throw signal.reason;
  }

  #fresh(key: string): Buffer | undefined {
    const hit = this.#cache.get(key);
    if (hit === undefined) return undefined;
    if (this.#o.clock.monotonic() - hit.at >= (this.#o.cacheTtlMs ?? 300_000)) {
      this.#cache.delete(key);
      return undefined;
    }
    return hit.data;
  }

  #keep(key: string, owner: { name: string; signerName: string }, data: Buffer): Buffer {
    this.#cache.set(key, { ...owner, data, at: this.#o.clock.monotonic() });
    return data;
  }

  /** Drops what a changed bundle fed (by signer when it has one, else by name), as upstream. */
  #changed(b: ClusterTrustBundle): void {
    const name = b.metadata?.name ?? '';
    const signerName = b.spec?.signerName ?? '';
    for (const [key, hit] of this.#cache) {
      if (signerName !== '' ? hit.signerName === signerName : hit.name === name) {
        this.#cache.delete(key);
      }
    }
    for (const listener of this.#listeners) listener(name, signerName);
  }

  /** Every CERTIFICATE block of the bundles, de-duplicated and shuffled, as PEM. */
  #normalize(bundles: readonly ClusterTrustBundle[]): Buffer {
    const anchors = new Map<string, Buffer>();
    for (const b of bundles) {
      for (const der of pemBlocks(b.spec?.trustBundle ?? '')) anchors.set(der.toString('hex'), der);
    }
    const list = [...anchors.values()];
    const random = this.#o.random ?? Math.random;
    for (let i = list.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [list[i], list[j]] = [list[j] as Buffer, list[i] as Buffer];
    }
    return Buffer.from(list.map(pemCertificate).join(''), 'utf8');
  }

  /** The first version of the API the apiserver serves, undefined when none. */
  async #servedPath(signal: AbortSignal): Promise<ResourcePath | undefined> {
    for (const version of VERSIONS) {
      const path: ResourcePath = {
        group: 'certificates.k8s.io',
        version,
        resource: 'clustertrustbundles',
      };
      try {
        await this.#o.kube.list(path, { limit: 1, signal });
        return path;
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
    return undefined;
  }
}

/** The DER bytes of each PEM block in `text` (any type, as upstream's pem.Decode loop). */
export function pemBlocks(text: string): Buffer[] {
  const out: Buffer[] = [];
  const re = /-----BEGIN ([A-Z0-9 ]+)-----\r?\n([\s\S]*?)-----END \1-----/g;
  for (const m of text.matchAll(re)) {
    const body = (m[2] ?? '').replace(/^[A-Za-z-]+:.*$/gm, '').replace(/\s+/g, '');
    out.push(Buffer.from(body, 'base64'));
  }
  return out;
}

/** A DER certificate as PEM, 64 characters a line, as Go's pem.Encode. */
export function pemCertificate(der: Buffer): string {
  const b64 = der.toString('base64');
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += 64) lines.push(b64.slice(i, i + 64));
  return `-----BEGIN CERTIFICATE-----\n${lines.join('\n')}\n-----END CERTIFICATE-----\n`;
}

/**
 * metav1.LabelSelectorAsSelector: undefined selects nothing (undefined here), `{}`
 * everything. Throws VolumeError on an operator it does not know.
 */
export function selectorRequirements(
  selector: LabelSelector | undefined,
): LabelRequirement[] | undefined {
  if (selector === undefined) return undefined;
  const out: LabelRequirement[] = Object.entries(selector.matchLabels ?? {}).map(
    ([key, value]) => ({ op: 'eq', key, value }),
  );
  for (const e of selector.matchExpressions ?? []) {
    const values = e.values ?? [];
    switch (e.operator) {
      case 'In':
        out.push({ op: 'in', key: e.key, values });
        break;
      case 'NotIn':
        out.push({ op: 'notin', key: e.key, values });
        break;
      case 'Exists':
        out.push({ op: 'exists', key: e.key });
        break;
      case 'DoesNotExist':
        out.push({ op: 'absent', key: e.key });
        break;
      default:
        throw new VolumeError(
          'BERTH_VOLUME_INVALID',
          `while parsing label selector: "${e.operator}" is not a valid label selector operator`,
        );
    }
  }
  return out;
}

function selectorString(selector: LabelSelector | undefined): string {
  return selector === undefined ? '<nothing>' : JSON.stringify(selector);
}

/** Whether a pod has a projected volume with a clusterTrustBundle source. */
export function projectsTrustBundle(pod: Pod): boolean {
  return (pod.spec?.volumes ?? []).some((v) =>
    (v.projected?.sources ?? []).some((s) => s.clusterTrustBundle !== undefined),
  );
}
