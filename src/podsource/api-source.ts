/**
 * The API pod source: list + watch of the pods bound to this node
 * (spec.nodeName=<node>), handed to a consumer as add / update / remove. The
 * reflector underneath resumes, relists on 410 and restarts on errors; this layer
 * turns its full re-lists into the precise differences since the last one, so a pod
 * deleted while berth was down (or while the watch was broken) is still removed.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import { Reflector } from '../kube/reflector.ts';
import { PODS, type KubeClient } from '../kube/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';

export interface PodSourceConsumer {
  add(pod: Pod): void;
  update(pod: Pod): void;
  remove(pod: Pod): void;
}

export interface ApiPodSourceOptions {
  readonly client: KubeClient;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly nodeName: string;
  readonly consumer: PodSourceConsumer;
}

export class ApiPodSource {
  readonly #o: ApiPodSourceOptions;
  readonly #reflector: Reflector<Pod>;
  readonly #pods = new Map<string, Pod>();
  #synced = false;

  constructor(options: ApiPodSourceOptions) {
    this.#o = options;
    this.#reflector = new Reflector<Pod>({
      client: options.client,
      path: PODS,
      fieldSelector: `spec.nodeName=${options.nodeName}`,
      clock: options.clock,
      logger: options.logger.child({ component: 'pod-source' }),
      handler: {
        onSync: (items: Pod[]) => {
          this.#replace(items);
        },
        onEvent: (type: 'ADDED' | 'MODIFIED' | 'DELETED', pod: Pod) => {
          this.#apply(type, pod);
        },
      },
    });
  }

  /** True once the first full list has been delivered: only then may orphans be killed. */
  get synced(): boolean {
    return this.#synced;
  }

  /** The pods the API binds to this node, by UID. */
  pods(): ReadonlyMap<string, Pod> {
    return this.#pods;
  }

  healthProblem(): string | undefined {
    const h = this.#reflector.health();
    if (h.consecutiveErrors >= 5) return `pod source is failing: ${h.lastError ?? 'unknown error'}`;
    return undefined;
  }

  run(signal: AbortSignal): Promise<void> {
    return this.#reflector.run(signal);
  }

  #replace(items: readonly Pod[]): void {
    const seen = new Set<string>();
    for (const pod of items) {
      const uid = pod.metadata?.uid ?? '';
      seen.add(uid);
      this.#apply(this.#pods.has(uid) ? 'MODIFIED' : 'ADDED', pod);
    }
    for (const [uid, pod] of [...this.#pods]) {
      if (!seen.has(uid)) this.#apply('DELETED', pod);
    }
    this.#synced = true;
  }

  #apply(type: 'ADDED' | 'MODIFIED' | 'DELETED', pod: Pod): void {
    const uid = pod.metadata?.uid ?? '';
    if (uid === '') return;
    const { consumer } = this.#o;
    if (type === 'DELETED') {
      if (this.#pods.delete(uid)) consumer.remove(pod);
      return;
    }
    const known = this.#pods.get(uid);
    this.#pods.set(uid, pod);
    if (known === undefined) consumer.add(pod);
    else if (known.metadata?.resourceVersion !== pod.metadata?.resourceVersion)
      consumer.update(pod);
  }
}
