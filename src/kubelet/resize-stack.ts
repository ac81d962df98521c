/**
 * Wiring of in-place pod resize: the allocation manager over allocated_pods_state, the
 * actuated state (actuated_pods_state), the resize conditions and the pod sync's
 * resizer. `load` restores both checkpoints before any pod is handled; the manager's
 * periodic retry runs as a kubelet loop.
 */
import type { Container, Node, Pod } from 'kubernetes-types/core/v1.js';
import { admitResize } from '../allocation/admit.ts';
import { ACTUATED_PODS_STATE_FILE, ALLOCATED_PODS_STATE_FILE } from '../allocation/checkpoint.ts';
import { PodAllocationManager } from '../allocation/manager.ts';
import { CheckpointResourceState } from '../allocation/state.ts';
import type { PodCgroups } from '../cm/pod-cgroups.ts';
import type { RuntimeService } from '../cri/index.ts';
import type { EventRecorder } from '../events/types.ts';
import { containerUnified, type UnifiedOptions } from '../kuberuntime/memory-qos.ts';
import { PodResizer } from '../kuberuntime/resizer.ts';
import { ResizeConditions } from '../status/resize-conditions.ts';
import type { PodWorkers } from '../podworkers/pod-workers.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import type { RuntimeStatusReader } from '../kuberuntime/runtime-status.ts';

export interface ResizeStackDeps {
  readonly rootDir: string;
  readonly runtime: Pick<RuntimeService, 'updateContainerResources' | 'containerStats'>;
  readonly podCgroups: PodCgroups | undefined;
  readonly node: () => Node | undefined;
  /** Every pod bound to the node, by UID. */
  readonly pods: () => ReadonlyMap<string, Pod>;
  readonly rejected: (uid: string) => boolean;
  /** The phase berth last computed for a pod. */
  readonly phase: (uid: string) => string | undefined;
  readonly sourcesReady: () => boolean;
  /** Resized pods are synced through their workers. */
  readonly podWorkers: () => Pick<PodWorkers, 'update'>;
  /** Its cached status of a resized container is dropped. */
  readonly reader: Pick<RuntimeStatusReader, 'forget'>;
  readonly allowedUnsafeSysctls: readonly string[];
  /**
   * InPlacePodLevelResourcesVerticalScaling: a resize of spec.resources is carried out
   * and the pod's status.resources reported.
   */
  readonly podLevelResize: boolean;
  /** The containers' unified-map settings (cgroup v2): a resize sends the map anew. */
  readonly unified: (() => UnifiedOptions) | undefined;
  readonly recorder: EventRecorder;
  readonly clock: Clock;
  readonly logger: Logger;
}

export interface ResizeStack {
  readonly allocation: PodAllocationManager;
  readonly conditions: ResizeConditions;
  readonly resizer: PodResizer;
  load(): Promise<void>;
  /** Forgets allocations and actuated resources of pods not in `active` (housekeeping). */
  removeOrphans(active: ReadonlySet<string>): void;
}

function terminal(phase: string | undefined): boolean {
  return phase === 'Succeeded' || phase === 'Failed';
}

/** Pods that count against the node: admitted (not rejected) and not terminal. */
export function activePods(
  pods: ReadonlyMap<string, Pod>,
  rejected: (uid: string) => boolean,
  phase: (uid: string) => string | undefined,
): Pod[] {
  return [...pods.values()].filter((p) => {
    const uid = p.metadata?.uid ?? '';
    return !rejected(uid) && !terminal(phase(uid) ?? p.status?.phase);
  });
}

export function resizeStackOf(d: ResizeStackDeps): ResizeStack {
  const logger = d.logger.child({ component: 'allocation' });
  const allocated = new CheckpointResourceState(d.rootDir, ALLOCATED_PODS_STATE_FILE);
  const actuated = new CheckpointResourceState(d.rootDir, ACTUATED_PODS_STATE_FILE);
  const conditions = new ResizeConditions(d.clock);
  const allocation = new PodAllocationManager({
    state: allocated,
    conditions,
    admit: (desired, current, others) =>
      admitResize(desired, current, others, {
        node: d.node,
        // berth runs every pod as the "none" / "None" policies (config/unsupported.ts).
        cpuManagerPolicy: 'none',
        memoryManagerPolicy: 'None',
        allowedUnsafeSysctls: d.allowedUnsafeSysctls,
        podLevelResize: d.podLevelResize,
      }),
    activePods: () => activePods(d.pods(), d.rejected, d.phase),
    podByUid: (uid) => d.pods().get(uid),
    sourcesReady: d.sourcesReady,
    triggerSync: (pod) => {
      d.podWorkers().update(pod, 'sync');
    },
    recorder: d.recorder,
    clock: d.clock,
    logger,
  });
  const unified = d.unified;
  const resizer = new PodResizer({
    allocation,
    actuated,
    conditions,
    runtime: d.runtime,
    ...(d.podCgroups !== undefined && { podCgroups: d.podCgroups }),
    ...(unified !== undefined && { unified: (c: Container) => containerUnified(c, unified()) }),
    recorder: d.recorder,
    logger,
    podLevelStatus: d.podLevelResize,
    invalidate: (id) => {
      d.reader.forget(id);
    },
  });
  return {
    allocation,
    conditions,
    resizer,
    load: async () => {
      await allocated.load();
      await actuated.load();
    },
    removeOrphans: (active) => {
      allocation.removeOrphans(active);
      actuated.removeOrphans(active);
    },
  };
}
