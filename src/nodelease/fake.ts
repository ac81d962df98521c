/**
 * A NodeLeaseController for other managers' tests: the Lease lives in memory, renewals
 * are counted and can be made to fail; `run` renews on the injected clock as the real
 * controller does (the NodeLeaseController contract, contract.ts).
 */
import type { Lease } from 'kubernetes-types/coordination/v1.js';
import type { Clock } from '../util/clock.ts';
import { LEASE_NAMESPACE, microTime } from './controller.ts';
import type { NodeLeaseController } from './types.ts';

export interface FakeLeaseControllerOptions {
  readonly clock: Clock;
  readonly nodeName: string;
  readonly leaseDurationSeconds: number;
}

export class FakeLeaseController implements NodeLeaseController {
  /** The Lease as last renewed (undefined before the first renewal). */
  lease: Lease | undefined;
  /** Successful renewals. */
  renewals = 0;
  /** When set, the next renewal rejects with it (then cleared). */
  failNext: Error | undefined;
  readonly #o: FakeLeaseControllerOptions;

  constructor(options: FakeLeaseControllerOptions) {
    this.#o = options;
  }

  get renewIntervalMs(): number {
    return (this.#o.leaseDurationSeconds * 1000) / 4;
  }

  renew(signal: AbortSignal): Promise<Lease> {
    if (signal.aborted) {
      const reason: unknown = signal.reason;
      return Promise.reject(reason instanceof Error ? reason : new Error('aborted'));
    }
    const err = this.failNext;
    this.failNext = undefined;
    if (err !== undefined) return Promise.reject(err);
    this.renewals++;
    this.lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: this.#o.nodeName, namespace: LEASE_NAMESPACE },
      spec: {
        holderIdentity: this.#o.nodeName,
        leaseDurationSeconds: this.#o.leaseDurationSeconds,
        renewTime: microTime(this.#o.clock.now()),
      },
    };
    return Promise.resolve(this.lease);
  }

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      // A failure retries sooner in the real controller; one interval is enough here.
      await this.renew(signal).catch(() => undefined);
      await this.#o.clock.sleep(this.renewIntervalMs, signal).catch(() => undefined);
    }
  }
}
