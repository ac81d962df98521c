/**
 * Watches the benchmark's pods and records, per pod name, when the watch first showed
 * it Running with every container started, and when it showed it deleted. One
 * list-then-watch per tracker; the watch resumes from the last resourceVersion when the
 * server ends it, and lists again when that version is gone (410).
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { ApiError, type KubeApi, type PodList, type WatchEvent } from './kube-api.ts';

/** Running, and every container of the spec reports started and a running state. */
export function isRunning(pod: Pod): boolean {
  const wanted = pod.spec?.containers.length ?? 0;
  const statuses = pod.status?.containerStatuses ?? [];
  return (
    pod.status?.phase === 'Running' &&
    statuses.length === wanted &&
    statuses.every((c) => c.started === true && c.state?.running !== undefined)
  );
}

export class PodTracker {
  readonly #api: KubeApi;
  readonly #collection: string;
  readonly #labelSelector: string;
  readonly #abort = new AbortController();
  readonly #live = new Set<string>();
  readonly #runningAt = new Map<string, number>();
  readonly #deletedAt = new Map<string, number>();
  readonly #waiters = new Set<() => void>();
  #resourceVersion = '';
  #failure: Error | undefined;
  #loop: Promise<void> | undefined;

  constructor(api: KubeApi, namespace: string, labelSelector: string) {
    this.#api = api;
    this.#collection = `/api/v1/namespaces/${namespace}/pods`;
    this.#labelSelector = labelSelector;
  }

  /** Lists the pods, then watches from that version in the background. */
  async start(): Promise<void> {
    await this.#list();
    this.#loop = this.#watchLoop();
  }

  /** Ends the watch. Idempotent. */
  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#loop;
  }

  runningAt(name: string): number | undefined {
    return this.#runningAt.get(name);
  }

  deletedAt(name: string): number | undefined {
    return this.#deletedAt.get(name);
  }

  /** Names of pods that exist (not yet seen deleted). */
  live(): ReadonlySet<string> {
    return this.#live;
  }

  /** Resolves once `condition()` holds after some event; rejects after `timeoutMs`. */
  async until(what: string, condition: () => boolean, timeoutMs: number): Promise<void> {
    if (condition()) return;
    await new Promise<void>((resolve, reject) => {
      const check = (): void => {
        if (this.#failure !== undefined) {
          done();
          reject(this.#failure);
        } else if (condition()) {
          done();
          resolve();
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      const done = (): void => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      this.#waiters.add(check);
    });
  }

  #notify(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }

  #observe(pod: Pod, at: number): void {
    const name = pod.metadata?.name;
    if (name === undefined) return;
    this.#live.add(name);
    if (!this.#runningAt.has(name) && isRunning(pod)) this.#runningAt.set(name, at);
  }

  #gone(name: string, at: number): void {
    this.#live.delete(name);
    if (!this.#deletedAt.has(name)) this.#deletedAt.set(name, at);
  }

  async #list(): Promise<void> {
    const query = new URLSearchParams({ labelSelector: this.#labelSelector });
    const list = await this.#api.send<PodList>('GET', `${this.#collection}?${query.toString()}`);
    const at = performance.now();
    const present = new Set<string>();
    for (const pod of list.items) {
      this.#observe(pod, at);
      if (pod.metadata?.name !== undefined) present.add(pod.metadata.name);
    }
    for (const name of [...this.#live]) if (!present.has(name)) this.#gone(name, at);
    this.#resourceVersion = list.metadata.resourceVersion ?? '';
    this.#notify();
  }

  #onEvent(event: WatchEvent, at: number): void {
    const rv = event.object.metadata?.resourceVersion;
    switch (event.type) {
      case 'ADDED':
      case 'MODIFIED':
        this.#observe(event.object, at);
        break;
      case 'DELETED':
        if (event.object.metadata?.name !== undefined) this.#gone(event.object.metadata.name, at);
        break;
      case 'BOOKMARK':
        break;
      case 'ERROR':
        // A metav1.Status; 410 means our version is too old: list again.
        throw new ApiError(
          'WATCH',
          this.#collection,
          event.object.code ?? 0,
          JSON.stringify(event.object),
        );
    }
    if (rv !== undefined) this.#resourceVersion = rv;
    this.#notify();
  }

  #stopping(): boolean {
    return this.#abort.signal.aborted;
  }

  async #watchLoop(): Promise<void> {
    let failures = 0;
    while (!this.#stopping()) {
      const query = new URLSearchParams({
        labelSelector: this.#labelSelector,
        resourceVersion: this.#resourceVersion,
        allowWatchBookmarks: 'true',
        timeoutSeconds: '600',
      });
      try {
        await this.#api.watchOnce(
          `${this.#collection}?${query.toString()}`,
          (event, at) => {
            this.#onEvent(event, at);
          },
          this.#abort.signal,
        );
        failures = 0;
      } catch (err) {
        if (this.#stopping()) return;
        if (err instanceof ApiError && err.status === 410) {
          await this.#list().catch(() => undefined);
          continue;
        }
        failures++;
        if (failures > 5) {
          this.#failure = new Error(`Cannot keep watching ${this.#collection}`, { cause: err });
          this.#notify();
          return;
        }
        // Jittered, bounded back-off before resuming from the last version seen.
        await sleep(200 * failures + Math.random() * 200);
      }
    }
  }
}
