/**
 * Every Service of the cluster, kept in memory by a reflector, for the service link
 * variables of containers (upstream's serviceLister, an informer on all services).
 * Until the first list has arrived `hasSynced()` is false; upstream waits for it
 * before starting containers so their variables are complete.
 */
import type { Service } from 'kubernetes-types/core/v1.js';
import { Reflector, type ReflectorEventType, type ReflectorHealth } from '../kube/reflector.ts';
import type { KubeClient, ResourcePath } from '../kube/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';

export const SERVICES: ResourcePath = { group: '', version: 'v1', resource: 'services' };

export interface ServiceListerOptions {
  readonly client: KubeClient;
  readonly clock: Clock;
  readonly logger: Logger;
}

/** Services by namespace and name, from a list + watch of all namespaces. */
export class ServiceLister {
  readonly #reflector: Reflector<Service>;
  readonly #byNamespace = new Map<string, Map<string, Service>>();

  constructor(options: ServiceListerOptions) {
    this.#reflector = new Reflector<Service>({
      client: options.client,
      path: SERVICES,
      clock: options.clock,
      logger: options.logger.child({ component: 'service-lister' }),
      handler: {
        onSync: (items: Service[]) => {
          this.#byNamespace.clear();
          for (const s of items) this.#apply('ADDED', s);
        },
        onEvent: (type: ReflectorEventType, s: Service) => {
          this.#apply(type, s);
        },
      },
    });
  }

  /** Runs the list + watch until `signal` aborts. Call once. */
  run(signal: AbortSignal): Promise<void> {
    return this.#reflector.run(signal);
  }

  /** True once the first full list has arrived. */
  hasSynced(): boolean {
    return this.#reflector.hasSynced();
  }

  /** Resolves once the first list has arrived; rejects when `signal` aborts first. */
  whenSynced(signal?: AbortSignal): Promise<void> {
    return this.#reflector.whenSynced(signal);
  }

  health(): ReflectorHealth {
    return this.#reflector.health();
  }

  /** The services of `namespace` (empty before the first list). */
  list(namespace: string): Service[] {
    return [...(this.#byNamespace.get(namespace)?.values() ?? [])];
  }

  #apply(type: ReflectorEventType, s: Service): void {
    const ns = s.metadata?.namespace ?? '';
    const name = s.metadata?.name ?? '';
    if (type === 'DELETED') {
      const names = this.#byNamespace.get(ns);
      names?.delete(name);
      if (names?.size === 0) this.#byNamespace.delete(ns);
      return;
    }
    let names = this.#byNamespace.get(ns);
    if (names === undefined) {
      names = new Map();
      this.#byNamespace.set(ns, names);
    }
    names.set(name, s);
  }
}
