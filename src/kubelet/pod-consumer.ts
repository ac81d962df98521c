/**
 * Where every source's pods end up (upstream's HandlePodAdditions / Updates /
 * Removes): admission first, then the configMap/secret watch and the pod workers. A
 * pod rejected on an update is deleted from the API, unless it is a static pod, which
 * has no API object of its own.
 */
import type { PodAdmission } from '../admission/types.ts';
import type { PodAllocationManager } from '../allocation/manager.ts';
import { isStaticPod } from '../admission/predicates.ts';
import type { KubeClient } from '../kube/types.ts';
import type { PodSourceConsumer } from '../podsource/types.ts';
import type { PodWorkers } from '../podworkers/pod-workers.ts';
import type { PodStatusManager } from '../status/types.ts';
import type { Logger } from '../util/logger.ts';
import type { VolumeStack } from './volume-stack.ts';
import { deleteRejectedPod } from './kubelet-util.ts';

export interface PodConsumerDeps {
  readonly kube: KubeClient;
  readonly logger: Logger;
  readonly signal: AbortSignal;
  readonly admission: () => PodAdmission;
  readonly volumes: () => VolumeStack;
  readonly podWorkers: () => PodWorkers;
  readonly status: () => PodStatusManager;
  /** Records allocations and decides resizes (in-place pod resize). */
  readonly allocation?: () => PodAllocationManager;
}

export function podConsumer(d: PodConsumerDeps): PodSourceConsumer {
  // The allocation's work is asynchronous (checkpoint writes); its errors are logged.
  const allocation = (what: string, work: (m: PodAllocationManager) => Promise<void>): void => {
    const m = d.allocation?.();
    if (m === undefined) return;
    work(m).catch((err: unknown) => {
      d.logger.error('Pod allocation failed', { operation: what, error: String(err) });
    });
  };
  return {
    add: (pod) => {
      if (!d.admission().admit(pod)) return;
      allocation('add', (m) => m.addPod(pod));
      d.volumes().objects.register(pod);
      d.podWorkers().update(pod, 'add');
    },
    update: (pod) => {
      if (!d.admission().admit(pod)) {
        if (!isStaticPod(pod)) deleteRejectedPod(d.kube, pod, d.signal, d.logger);
        return;
      }
      d.volumes().objects.register(pod);
      d.podWorkers().update(pod, 'update');
      allocation('update', (m) => m.podUpdated(pod));
    },
    remove: (pod) => {
      const uid = pod.metadata?.uid ?? '';
      if (d.admission().isRejected(uid)) d.status().remove(uid);
      else d.podWorkers().update(pod, 'remove');
      d.volumes().objects.unregister(uid);
      d.admission().forget(uid);
      allocation('remove', (m) => m.removePod(uid));
    },
  };
}
