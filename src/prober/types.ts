/**
 * What the prober owns and the layers above read: a probe's result, the reader of the
 * liveness and startup result caches that kuberuntime's plan consults (upstream's
 * proberesults.Manager), and the probe manager the pod sync drives (upstream's
 * prober.Manager). ProberManager (manager.ts) runs the probes through CRI and the
 * network; FakeProberManager (fake.ts) publishes the outcomes a test sets; both pass
 * contract.ts.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { RuntimePodStatus } from '../container/pod-status.ts';

/** A probe result; undefined from a reader means the probe has not reported yet. */
export type ProbeResult = 'success' | 'failure';

/** The three probes a container may declare. */
export type ProbeKind = 'liveness' | 'readiness' | 'startup';

/** The part of the prober's result caches the plan reads. */
export interface ProbeResultsReader {
  get(kind: 'liveness' | 'startup', containerId: string): ProbeResult | undefined;
}

/**
 * The probe manager as the sync loop and the pod sync use it. Upstream's names map as:
 * `addPod` is AddPod (the sync loop adds the pod); `syncPod` is the workers' own
 * container-ID tracking (berth binds a worker to one container instance, so it is told
 * after every runtime read which instances run); `removePod` is RemovePod; `readiness`
 * and `started` are UpdatePodStatus's two flags; `stop` ends every worker at shutdown.
 */
export interface ProbeManager extends ProbeResultsReader {
  /** The pod is probed from now on; until then `syncPod` starts no worker for it. */
  addPod(pod: Pod): void;
  /** Latest published result of `kind` for container instance `containerId`. */
  get(kind: ProbeKind, containerId: string): ProbeResult | undefined;
  /**
   * Brings an added pod's workers in line with what runs: one per probe of each running
   * container instance, starting with no result; workers of other instances stop and
   * their results are dropped. A changed result calls the manager's `onChange(podUID)`.
   */
  syncPod(pod: Pod, runtime: RuntimePodStatus): void;
  /** Stops every worker of the pod, forgets its results and un-adds it (termination, removal). */
  removePod(uid: string): void;
  /** The `ready` flag per running container (undefined when no probe decides). */
  readiness(pod: Pod, runtime: RuntimePodStatus): (containerName: string) => boolean | undefined;
  /** The `started` flag per running container: false until its startup probe passed. */
  started(pod: Pod, runtime: RuntimePodStatus): (containerName: string) => boolean | undefined;
  /** Stops every worker and waits for them; later syncs start none. Idempotent. */
  stop(): Promise<void>;
}
