/**
 * The API pod source: list + watch of the pods bound to this node
 * (spec.nodeName=<node>), handed to a consumer as add / update / remove. The
 * reflector underneath resumes, relists on 410 and restarts on errors; BoundPods turns
 * its full re-lists into the precise differences since the last one, so a pod
 * deleted while berth was down (or while the watch was broken) is still removed.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import { Reflector } from '../kube/reflector.ts';
import { PODS, type KubeClient } from '../kube/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import { BoundPods } from './bound-pods.ts';
import type { PodSource, PodSourceConsumer } from './types.ts';

export interface ApiPodSourceOptions {
  readonly client: KubeClient;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly nodeName: string;
  readonly consumer: PodSourceConsumer;
}

/** Consecutive list/watch errors after which the source reports itself failing. */
export const FAILING_AFTER_ERRORS = 5;

export class ApiPodSource implements PodSource {
  readonly #reflector: Reflector<Pod>;
  readonly #pods: BoundPods;
  #synced = false;

  constructor(options: ApiPodSourceOptions) {
    this.#pods = new BoundPods(options.consumer);
    this.#reflector = new Reflector<Pod>({
      client: options.client,
      path: PODS,
      fieldSelector: `spec.nodeName=${options.nodeName}`,
      clock: options.clock,
      logger: options.logger.child({ component: 'pod-source' }),
      handler: {
        onSync: (items: Pod[]) => {
          this.#pods.replace(items);
          this.#synced = true;
        },
        onEvent: (type: 'ADDED' | 'MODIFIED' | 'DELETED', pod: Pod) => {
          this.#pods.apply(type, pod);
        },
      },
    });
  }

  get synced(): boolean {
    return this.#synced;
  }

  pods(): ReadonlyMap<string, Pod> {
    return this.#pods.pods();
  }

  healthProblem(): string | undefined {
    const h = this.#reflector.health();
    if (h.consecutiveErrors >= FAILING_AFTER_ERRORS)
      return `pod source is failing: ${h.lastError ?? 'unknown error'}`;
    return undefined;
  }

  run(signal: AbortSignal): Promise<void> {
    return this.#reflector.run(signal);
  }
}
