/**
 * The pod lifecycle event generator (PLEG): watches the runtime and tells the pod
 * workers which pods changed, and keeps the runtime cache the sync loop reads.
 *
 * Two strategies, as upstream: `GenericPleg` relists (ListPodSandbox + ListContainers)
 * every second and diffs; `EventedPleg` reacts to CRI GetContainerEvents (containerd
 * >= 1.7) with an immediate, coalesced relist, keeping a slow periodic relist as the
 * safety net, and falls back to 1 s relisting while the event stream is down.
 */
import type { RuntimePodSnapshot } from '../container/pod-status.ts';

export type PodLifecycleEventType =
  'ContainerStarted' | 'ContainerDied' | 'ContainerRemoved' | 'ContainerChanged' | 'SandboxChanged';

export interface PodLifecycleEvent {
  readonly podUID: string;
  readonly type: PodLifecycleEventType;
  /** Container or sandbox ID. */
  readonly id: string;
}

export interface RuntimeCache {
  /** The pod's runtime objects as of the last relist (empty when none). */
  get(uid: string): RuntimePodSnapshot;
  /** UIDs of every pod the runtime has anything for. */
  uids(): string[];
  /** Time (ms) of the last completed relist; 0 before the first. */
  readonly lastRelistAt: number;
}

export interface Pleg extends RuntimeCache {
  /** Runs until `signal` aborts; events go to the handler given at construction. */
  run(signal: AbortSignal): Promise<void>;
  /** Forces a relist now (after berth itself changed the pod) and waits for it. */
  relist(signal?: AbortSignal): Promise<void>;
  /** A message when unhealthy (no relist for 3 min), else undefined. */
  healthProblem(): string | undefined;
  readonly strategy: 'generic' | 'evented';
}
