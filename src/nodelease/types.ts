/**
 * The node heartbeat as the kubelet's start-up uses it (upstream's lease.Controller):
 * the Lease kube-node-lease/<node>, held by the node, renewed every quarter of its
 * duration. LeaseController (controller.ts) renews it through the API; FakeLeaseController
 * (fake.ts) keeps it in memory; both pass contract.ts.
 */
import type { Lease } from 'kubernetes-types/coordination/v1.js';

export interface NodeLeaseController {
  /** leaseDurationSeconds / 4, in ms: how often `run` renews. */
  readonly renewIntervalMs: number;
  /** One renewal now; resolves with the Lease as stored. Rejects when the API does. */
  renew(signal: AbortSignal): Promise<Lease>;
  /** Renews at once, then every renewIntervalMs (sooner after a failure) until `signal` aborts; never rejects. */
  run(signal: AbortSignal): Promise<void>;
}
