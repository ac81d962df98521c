/**
 * The pods the API binds to this node, kept by UID, and what a list or a watch event
 * changes in them, delivered to the consumer: a full list is diffed against what is
 * known (a pod deleted while the watch was down is still removed), an event is applied
 * as is, and an unchanged resourceVersion is no update. ApiPodSource and FakePodSource
 * both deliver through it.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { PodSourceConsumer } from './types.ts';

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export class BoundPods {
  readonly #consumer: PodSourceConsumer;
  readonly #pods = new Map<string, Pod>();

  constructor(consumer: PodSourceConsumer) {
    this.#consumer = consumer;
  }

  pods(): ReadonlyMap<string, Pod> {
    return this.#pods;
  }

  /** A full list: adds and updates what it has, removes what it no longer has. */
  replace(items: readonly Pod[]): void {
    const seen = new Set<string>();
    for (const pod of items) {
      const uid = pod.metadata?.uid ?? '';
      seen.add(uid);
      this.apply(this.#pods.has(uid) ? 'MODIFIED' : 'ADDED', pod);
    }
    for (const [uid, pod] of [...this.#pods]) {
      if (!seen.has(uid)) this.apply('DELETED', pod);
    }
  }

  /** One watch event. */
  apply(type: WatchEventType, pod: Pod): void {
    const uid = pod.metadata?.uid ?? '';
    if (uid === '') return;
    if (type === 'DELETED') {
      if (this.#pods.delete(uid)) this.#consumer.remove(pod);
      return;
    }
    const known = this.#pods.get(uid);
    this.#pods.set(uid, pod);
    if (known === undefined) this.#consumer.add(pod);
    else if (known.metadata?.resourceVersion !== pod.metadata?.resourceVersion)
      this.#consumer.update(pod);
  }
}
