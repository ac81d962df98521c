/**
 * The node heartbeat: the Lease kube-node-lease/<node>, renewed every quarter of its
 * duration (10 s for the default 40 s). A failed renewal is retried with jittered
 * back-off, capped below the renew interval; a deleted Lease is created again.
 */
import type { Lease } from 'kubernetes-types/coordination/v1.js';
import { inNamespace, isNotFound, LEASES, type KubeClient } from '../kube/types.ts';
import { retryDelay } from '../util/backoff.ts';
import type { Clock } from '../util/clock.ts';
import { isAborted } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import type { NodeLeaseController } from './types.ts';

export const LEASE_NAMESPACE = 'kube-node-lease';
const LEASE_PATH = inNamespace(LEASES, LEASE_NAMESPACE);

export interface LeaseControllerOptions {
  readonly client: KubeClient;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly nodeName: string;
  readonly leaseDurationSeconds: number;
  /** The Node's UID, for the owner reference (the Lease goes when the Node does). */
  readonly nodeUID: () => string | undefined;
}

/** metav1.MicroTime: RFC 3339 with exactly six fraction digits (the API rejects others). */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export class LeaseController implements NodeLeaseController {
  readonly #o: LeaseControllerOptions;
  #lease: Lease | undefined;

  constructor(options: LeaseControllerOptions) {
    this.#o = options;
  }

  get renewIntervalMs(): number {
    return (this.#o.leaseDurationSeconds * 1000) / 4;
  }

  #desired(base: Lease | undefined): Lease {
    const uid = this.#o.nodeUID();
    return {
      ...base,
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        ...base?.metadata,
        name: this.#o.nodeName,
        namespace: LEASE_NAMESPACE,
        ...(uid !== undefined && {
          ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: this.#o.nodeName, uid }],
        }),
      },
      spec: {
        ...base?.spec,
        holderIdentity: this.#o.nodeName,
        leaseDurationSeconds: this.#o.leaseDurationSeconds,
        renewTime: microTime(this.#o.clock.now()),
      },
    };
  }

  /** One renewal: update the known Lease, or get/create it. */
  async renew(signal: AbortSignal): Promise<Lease> {
    const { client, nodeName } = this.#o;
    if (this.#lease !== undefined) {
      try {
        this.#lease = await client.update(LEASE_PATH, nodeName, this.#desired(this.#lease), {
          signal,
        });
        return this.#lease;
      } catch (err) {
        // Conflict or NotFound: fall through and start from the server's copy.
        this.#lease = undefined;
        if (!isNotFound(err))
          this.#o.logger.debug('Lease update failed, re-reading it', { error: String(err) });
      }
    }
    try {
      const current = await client.get<Lease>(LEASE_PATH, nodeName, { signal });
      this.#lease = await client.update(LEASE_PATH, nodeName, this.#desired(current), { signal });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      this.#lease = await client.create(LEASE_PATH, this.#desired(undefined), { signal });
    }
    return this.#lease;
  }

  async run(signal: AbortSignal): Promise<void> {
    let failures = 0;
    while (!signal.aborted) {
      let wait = this.renewIntervalMs;
      try {
        await this.renew(signal);
        failures = 0;
      } catch (err) {
        if (isAborted(signal)) return;
        failures++;
        wait = Math.min(this.renewIntervalMs, retryDelay(failures, 200, 7000));
        this.#o.logger.warn('Failed to renew lease, will retry', {
          node: this.#o.nodeName,
          error: String(err),
          failures,
        });
      }
      await this.#o.clock.sleep(wait, signal).catch(() => undefined);
    }
  }
}
