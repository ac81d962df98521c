/**
 * The pod config merger (upstream's pkg/kubelet/config config.go): pods from the API,
 * the manifest directory and the URL become one stream of add / update / remove for
 * the kubelet, and one map of the pods the node must run.
 *
 * - File and URL sources hand over their whole set on every read; the difference
 *   with the last set is what is delivered. Each pod gets kubernetes.io/config.source
 *   and, when first seen, kubernetes.io/config.seen (kept across updates).
 * - Mirror pods from the API are not pods to run (upstream's kubelet filters them by
 *   the config.mirror annotation): they are kept apart, by full name, for the mirror
 *   pod manager. Deleting a mirror pod therefore never touches its static pod.
 * - `synced` is upstream's "seen all sources": true once every configured source has
 *   reported at least once. Until then nothing may be killed as an orphan: a pod
 *   whose source has not spoken yet is not known to be gone.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import type { PodSourceConsumer } from './types.ts';
import {
  CONFIG_HASH_ANNOTATION,
  CONFIG_MIRROR_ANNOTATION,
  CONFIG_SEEN_ANNOTATION,
  CONFIG_SOURCE_ANNOTATION,
  isMirrorPod,
  podFullName,
} from './static-pod.ts';

export type PodSourceName = 'api' | 'file' | 'http';

export interface PodConfigOptions {
  /** The sources configured; each must report before `synced` holds. */
  readonly sources: readonly PodSourceName[];
  readonly consumer: PodSourceConsumer;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Whether the API source has delivered its first list. */
  readonly apiSynced?: () => boolean;
  /** A mirror pod appeared, changed or went away. */
  readonly onMirrorChange?: (fullName: string) => void;
}

/** Upstream's annotations the kubelet itself adds; a change of them is not an update. */
const LOCAL_ANNOTATIONS = new Set([
  CONFIG_SOURCE_ANNOTATION,
  CONFIG_MIRROR_ANNOTATION,
  CONFIG_SEEN_ANNOTATION,
]);

function withoutLocal(a: Readonly<Record<string, string>> | undefined): string {
  const out = Object.entries(a ?? {})
    .filter(([k]) => !LOCAL_ANNOTATIONS.has(k))
    .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
  return JSON.stringify(out);
}

/** podsDifferSemantically: spec, labels, deletion and the non-local annotations. */
function differ(a: Pod, b: Pod): boolean {
  const ma = a.metadata ?? {};
  const mb = b.metadata ?? {};
  return (
    JSON.stringify(a.spec) !== JSON.stringify(b.spec) ||
    JSON.stringify(ma.labels ?? {}) !== JSON.stringify(mb.labels ?? {}) ||
    ma.deletionTimestamp !== mb.deletionTimestamp ||
    ma.deletionGracePeriodSeconds !== mb.deletionGracePeriodSeconds ||
    withoutLocal(ma.annotations) !== withoutLocal(mb.annotations)
  );
}

/** kubetypes.NewTimestamp().GetString(): RFC 3339 with nine fractional digits. */
function seenTimestamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000000Z');
}

export class PodConfig {
  readonly #o: PodConfigOptions;
  /** Static pods by source, by UID. */
  readonly #static = new Map<PodSourceName, Map<string, Pod>>();
  readonly #seen = new Set<PodSourceName>();
  /** Every pod to run, by UID. */
  readonly #pods = new Map<string, Pod>();
  readonly #mirrors = new Map<string, Pod>();

  constructor(options: PodConfigOptions) {
    this.#o = options;
  }

  /** The consumer the API source reports to. */
  readonly api: PodSourceConsumer = {
    add: (pod) => {
      this.#fromApi(pod, 'add');
    },
    update: (pod) => {
      this.#fromApi(pod, 'update');
    },
    remove: (pod) => {
      this.#fromApi(pod, 'remove');
    },
  };

  /** Every pod the node must run (all sources), by UID. */
  pods(): ReadonlyMap<string, Pod> {
    return this.#pods;
  }

  /** Mirror pods in the API, by full name. */
  mirrorPods(): ReadonlyMap<string, Pod> {
    return this.#mirrors;
  }

  /** The static pods (file and URL sources), by UID. */
  staticPods(): Pod[] {
    return [...this.#static.values()].flatMap((m) => [...m.values()]);
  }

  /** True once every configured source has reported once (upstream's SeenAllSources). */
  get synced(): boolean {
    return this.#o.sources.every((s) =>
      s === 'api' ? (this.#o.apiSynced?.() ?? false) : this.#seen.has(s),
    );
  }

  /** A file or URL source's complete set of pods. */
  set(source: Exclude<PodSourceName, 'api'>, pods: readonly Pod[]): void {
    this.#seen.add(source);
    const old = this.#static.get(source) ?? new Map<string, Pod>();
    const next = new Map<string, Pod>();
    const added: Pod[] = [];
    const updated: Pod[] = [];
    for (const incoming of pods) {
      const uid = incoming.metadata?.uid ?? '';
      if (uid === '' || next.has(uid)) continue;
      const pod = structuredClone(incoming);
      const meta = (pod.metadata ??= {});
      const existing = old.get(uid);
      const seen =
        existing?.metadata?.annotations?.[CONFIG_SEEN_ANNOTATION] ??
        seenTimestamp(this.#o.clock.now());
      meta.annotations = {
        ...meta.annotations,
        [CONFIG_SOURCE_ANNOTATION]: source,
        [CONFIG_SEEN_ANNOTATION]: seen,
      };
      if (existing !== undefined && !differ(existing, pod)) {
        next.set(uid, existing);
        continue;
      }
      next.set(uid, pod);
      (existing === undefined ? added : updated).push(pod);
    }
    const removed = [...old.entries()].filter(([uid]) => !next.has(uid)).map(([, p]) => p);
    this.#static.set(source, next);
    // Upstream's order: removes, adds, updates; a replaced pod goes before its successor.
    for (const pod of removed) {
      this.#pods.delete(pod.metadata?.uid ?? '');
      this.#o.logger.info('Static pod removed', { pod: podFullName(pod), source });
      this.#o.consumer.remove(pod);
    }
    for (const pod of added) {
      this.#pods.set(pod.metadata?.uid ?? '', pod);
      this.#o.logger.info('Static pod added', {
        pod: podFullName(pod),
        podUID: pod.metadata?.uid,
        hash: pod.metadata?.annotations?.[CONFIG_HASH_ANNOTATION],
        source,
      });
      this.#o.consumer.add(pod);
    }
    for (const pod of updated) {
      this.#pods.set(pod.metadata?.uid ?? '', pod);
      this.#o.consumer.update(pod);
    }
  }

  #fromApi(pod: Pod, kind: 'add' | 'update' | 'remove'): void {
    if (isMirrorPod(pod)) {
      const name = podFullName(pod);
      if (kind === 'remove') {
        // Only if it is still the one we hold (a recreated mirror has a new UID).
        if (this.#mirrors.get(name)?.metadata?.uid === pod.metadata?.uid)
          this.#mirrors.delete(name);
      } else this.#mirrors.set(name, pod);
      this.#o.onMirrorChange?.(name);
      return;
    }
    const uid = pod.metadata?.uid ?? '';
    if (kind === 'remove') this.#pods.delete(uid);
    else this.#pods.set(uid, pod);
    this.#o.consumer[kind](pod);
  }
}
