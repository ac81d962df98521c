/**
 * Keeps one mirror pod in the API per static pod (upstream does this in the kubelet's
 * SyncPod and HandlePodCleanups), as a reconciliation run on every change of the
 * static pods or of the mirror pods the API source sees, and every few seconds (so a
 * failure against the API is retried, never fatal):
 *
 * - a static pod without a mirror gets one (once the Node's UID is known);
 * - a mirror that is being deleted (`kubectl delete pod`) or whose config.mirror is
 *   not the static pod's hash (the manifest changed) is deleted at once and recreated:
 *   the static pod itself is never touched by this;
 * - a mirror without a static pod is deleted, but only after every pod source has
 *   reported, so a restarted berth does not delete mirrors of pods it has not read yet.
 *
 * Mirror pods carry the static pod's status: `statusTarget` tells the status manager
 * which API object (and UID precondition) a static pod's status goes to.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import {
  CONFIG_HASH_ANNOTATION,
  CONFIG_MIRROR_ANNOTATION,
  podFullName,
} from '../podsource/static-pod.ts';
import type { Clock } from '../util/clock.ts';
import { isAborted } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import type { MirrorClient } from './mirror-client.ts';

/** What the manager reads of the merged pod config. */
export interface MirrorPodView {
  staticPods(): readonly Pod[];
  mirrorPods(): ReadonlyMap<string, Pod>;
  readonly synced: boolean;
}

export interface MirrorPodManagerOptions {
  readonly client: Pick<MirrorClient, 'create' | 'delete'>;
  readonly pods: MirrorPodView;
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * Whether the static pod runs (its pod worker is syncing). As upstream makes the
   * mirror in the pod's sync, a pod held back behind an older one of its name, rejected
   * by admission or being stopped gets none.
   */
  readonly syncing?: (uid: string) => boolean;
  /** A static pod's mirror is in the API source's view now (its status may be written). */
  readonly onMirror?: (staticUID: string) => void;
  readonly periodMs?: number;
}

export class MirrorPodManager {
  readonly #o: MirrorPodManagerOptions;
  #dirty = true;
  #wake: (() => void) | undefined;
  /** Failures already logged, so a down API server does not fill the log every round. */
  readonly #failing = new Set<string>();
  /**
   * Requests made whose effect the API source has not shown yet (full name -> hash
   * created; mirror UIDs deleted), so the next round does not repeat them.
   */
  readonly #created = new Map<string, { hash: string; at: number }>();
  readonly #deleted = new Map<string, number>();
  /** Full name -> the mirror UID whose arrival was passed on to `onMirror`. */
  readonly #announced = new Map<string, string>();

  constructor(options: MirrorPodManagerOptions) {
    this.#o = options;
  }

  /** Asks for a reconciliation soon (a static or mirror pod changed). */
  kick(): void {
    this.#dirty = true;
    this.#wake?.();
  }

  /** The mirror pod a static pod's status is written to, if any (undefined: not static). */
  statusTarget(pod: Pod): { readonly uid: string } | null | undefined {
    const annotations = pod.metadata?.annotations;
    const hash = annotations?.[CONFIG_HASH_ANNOTATION];
    const source = annotations?.['kubernetes.io/config.source'];
    if (hash === undefined || source === undefined || source === 'api') return undefined;
    const mirror = this.#o.pods.mirrorPods().get(podFullName(pod));
    if (mirror === undefined || mirror.metadata?.deletionTimestamp != null) return null;
    if (mirror.metadata?.annotations?.[CONFIG_MIRROR_ANNOTATION] !== hash) return null;
    const uid = mirror.metadata.uid;
    return uid === undefined ? null : { uid };
  }

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      this.#dirty = false;
      await this.reconcile(signal);
      await this.#wait(signal);
    }
  }

  /** Until kicked (at once if kicked meanwhile) or the period passes. */
  async #wait(signal: AbortSignal): Promise<void> {
    if (this.#dirty) return;
    const woken = new Promise<void>((resolve) => {
      this.#wake = resolve;
    });
    const stop = new AbortController();
    try {
      await Promise.race([
        this.#o.clock
          .sleep(this.#o.periodMs ?? 5000, AbortSignal.any([signal, stop.signal]))
          .catch(() => undefined),
        woken,
      ]);
    } finally {
      stop.abort();
      this.#wake = undefined;
    }
  }

  /** One pass over the static and mirror pods; errors are logged and retried next round. */
  async reconcile(signal: AbortSignal): Promise<void> {
    const { pods } = this.#o;
    const wanted = new Map<string, Pod>();
    for (const pod of pods.staticPods()) wanted.set(podFullName(pod), pod);
    const mirrors = pods.mirrorPods();
    this.#forgetSettled(mirrors);
    for (const [name, pod] of wanted) {
      const uid = pod.metadata?.uid ?? '';
      if (this.#o.syncing?.(uid) === false) continue;
      const hash = pod.metadata?.annotations?.[CONFIG_HASH_ANNOTATION] ?? '';
      let mirror = mirrors.get(name);
      if (mirror !== undefined && this.#deleted.has(mirror.metadata?.uid ?? '')) mirror = undefined;
      if (
        mirror !== undefined &&
        (mirror.metadata?.deletionTimestamp != null ||
          mirror.metadata?.annotations?.[CONFIG_MIRROR_ANNOTATION] !== hash)
      ) {
        this.#o.logger.info('Deleting mirror pod because it is outdated', { pod: name });
        await this.#delete(mirror, signal);
        mirror = undefined;
      }
      const pending = this.#created.get(name);
      if (mirror === undefined && pending?.hash !== hash) {
        this.#o.logger.info('Creating a mirror pod for static pod', { pod: name, podUID: uid });
        const ok = await this.#attempt(`create ${name}`, signal, () =>
          this.#o.client.create(pod, signal),
        );
        if (ok) this.#created.set(name, { hash, at: this.#o.clock.now() });
      } else if (mirror !== undefined && this.#announced.get(name) !== mirror.metadata?.uid) {
        // The API source shows the mirror now: the static pod's status can go to it.
        this.#announced.set(name, mirror.metadata?.uid ?? '');
        this.#o.onMirror?.(uid);
      }
      if (isAborted(signal)) return;
    }
    if (!pods.synced) return;
    for (const [name, mirror] of mirrors) {
      if (wanted.has(name) || this.#deleted.has(mirror.metadata?.uid ?? '')) continue;
      this.#o.logger.info('Deleting orphaned mirror pod', { pod: name });
      await this.#delete(mirror, signal);
    }
  }

  async #delete(mirror: Pod, signal: AbortSignal): Promise<void> {
    const m = mirror.metadata ?? {};
    const ok = await this.#attempt(`delete ${m.namespace ?? ''}/${m.name ?? ''}`, signal, () =>
      this.#o.client.delete(m.namespace ?? '', m.name ?? '', m.uid, signal),
    );
    if (ok && m.uid !== undefined) this.#deleted.set(m.uid, this.#o.clock.now());
  }

  /**
   * Forgets requests the API source now reflects, and any older than 30 s (a watch
   * event lost to a relist must not stall the mirror for good).
   */
  #forgetSettled(mirrors: ReadonlyMap<string, Pod>): void {
    const now = this.#o.clock.now();
    const present = new Set([...mirrors.values()].map((m) => m.metadata?.uid));
    for (const [uid, at] of this.#deleted)
      if (!present.has(uid) || now - at > 30_000) this.#deleted.delete(uid);
    for (const name of [...this.#announced.keys()])
      if (!mirrors.has(name)) this.#announced.delete(name);
    for (const [name, c] of this.#created) {
      const seen = mirrors.get(name)?.metadata?.annotations?.[CONFIG_MIRROR_ANNOTATION] === c.hash;
      if (seen || now - c.at > 30_000) this.#created.delete(name);
    }
  }

  async #attempt(what: string, signal: AbortSignal, op: () => Promise<unknown>): Promise<boolean> {
    try {
      await op();
      if (this.#failing.delete(what))
        this.#o.logger.info('Mirror pod request succeeded again', { op: what });
      return true;
    } catch (err) {
      if (isAborted(signal)) return false;
      if (!this.#failing.has(what)) {
        this.#failing.add(what);
        this.#o.logger.warn('Mirror pod request failed, will retry', {
          op: what,
          error: String(err),
        });
      }
      return false;
    }
  }
}
