/**
 * The start-up order of a kubelet whose API server may be unreachable, or absent.
 *
 * On a control-plane node the API server is itself a static pod: it cannot answer
 * before berth has run it. So, as upstream's Run (registerWithAPIServer in the
 * background, the file source at once), nothing waits for the API: the static pods
 * are admitted against the Node built from this host, and every loop that talks to
 * the API server keeps retrying with back-off on its own until it answers. Status
 * and mirror pods catch up then. Without a kubeconfig (standalone) those loops do not
 * run at all.
 */
import type { NodeLeaseController } from '../nodelease/types.ts';
import type { NodeStatusController } from '../nodestatus/types.ts';
import type { PodSource } from '../podsource/types.ts';
import type { PodStatusManager } from '../status/types.ts';
import { raceTimeout } from './kubelet-util.ts';
import type { ServiceLister } from './service-lister.ts';
import type { VolumeStack } from './volume-stack.ts';

export type Loop = readonly [name: string, run: (signal: AbortSignal) => Promise<void>];

export interface ApiLoopDeps {
  readonly nodeStatus: NodeStatusController;
  readonly lease: NodeLeaseController;
  readonly services: ServiceLister;
  readonly volumes: VolumeStack;
  readonly status: PodStatusManager;
  readonly source: PodSource;
}

/** How long the API pod source waits for the first service list (service env vars). */
const SERVICES_SYNC_WAIT_MS = 10_000;

/**
 * The loops that need the API server. Each retries with back-off while it is
 * unreachable: registration (inside the node status loop), the lease, the service
 * and token watches, the status writes, and the API pod source.
 */
export function apiLoops(d: ApiLoopDeps): Loop[] {
  return [
    ['services', (s) => d.services.run(s)],
    ['tokens', (s) => d.volumes.tokens.run(s)],
    // Idle until a pod projects a ClusterTrustBundle (upstream's lazy informer).
    ['trust-bundles', (s) => d.volumes.trustBundles?.run(s) ?? Promise.resolve()],
    ['pod-certificates', (s) => d.volumes.podCertificates?.run(s) ?? Promise.resolve()],
    // Registers the Node first (retrying), then posts its status.
    ['node-status', (s) => d.nodeStatus.run(s)],
    ['lease', (s) => d.lease.run(s)],
    ['status', (s) => d.status.run(s)],
    [
      'pod-source',
      async (s) => {
        // Upstream's NewSourceApiserver starts only once the node is known to the API:
        // an API pod is admitted against the real Node (its labels, taints), never
        // against the one built locally. Until the first list, no pod is an orphan.
        await d.nodeStatus.whenRegistered(s);
        // Service variables need the list; without it every container would wait a sync.
        await raceTimeout(d.services.whenSynced(s), SERVICES_SYNC_WAIT_MS);
        await d.source.run(s);
      },
    ],
  ];
}
