/**
 * The recording calls the pod sync makes, as small functions that accept an absent
 * KubeletMetrics (then they do nothing), so pod-sync needs no `if (metrics)` of its own.
 */
import { cri } from '../cri/index.ts';
import type { RuntimeCache } from '../pleg/types.ts';
import type { KubeletMetrics, RuntimeCounts } from './registry.ts';

/** Upstream's container_type label values. */
export type ContainerType = 'container' | 'init_container' | 'ephemeral_container';

/** A sandbox was created for a pod (kubelet_started_pods_total), or failed to be. */
export function recordPodStarted(m: KubeletMetrics | undefined, ok = true): void {
  if (ok) m?.startedPodsTotal.inc();
  else m?.startedPodsErrorsTotal.inc();
}

/**
 * A sandbox is being created for a `hostUsers: false` pod
 * (kubelet_started_user_namespaced_pods_total), or that pod's first sync failed: its
 * sandbox or a container it started (the errors counter, counted once per pod start).
 */
export function recordUserNamespacedPodStarted(m: KubeletMetrics | undefined, ok = true): void {
  if (ok) m?.startedUserNamespacedPodsTotal.inc();
  else m?.startedUserNamespacedPodsErrorsTotal.inc();
}

/**
 * StartContainer was called (kubelet_started_containers_total); on failure `code` is the
 * error's code (upstream uses the gRPC status name) for started_containers_errors_total.
 */
export function recordContainerStarted(
  m: KubeletMetrics | undefined,
  type: ContainerType,
  error?: { readonly code: string },
): void {
  if (m === undefined) return;
  m.startedContainersTotal.inc({ container_type: type });
  if (error !== undefined)
    m.startedContainersErrorsTotal.inc({ container_type: type, code: error.code });
}

/**
 * One container start's image volumes (kubelet_image_volume_requested_total, …_mounted_
 * succeed_total, …_mounted_errors_total), counted as upstream's incrementImageVolumeMetrics.
 */
export function recordImageVolumeMounts(
  m: KubeletMetrics | undefined,
  counts: { readonly requested: number; readonly succeeded: number; readonly failed: number },
): void {
  if (m === undefined) return;
  m.imageVolumeRequestedTotal.inc(counts.requested);
  m.imageVolumeMountedSucceedTotal.inc(counts.succeeded);
  m.imageVolumeMountedErrorsTotal.inc(counts.failed);
}

/** RunPodSandbox took `seconds` with this runtime handler ("" is the default one). */
export function recordRunPodSandbox(
  m: KubeletMetrics | undefined,
  runtimeHandler: string,
  seconds: number,
  ok = true,
): void {
  if (m === undefined) return;
  m.runPodSandboxDuration.observe({ runtime_handler: runtimeHandler }, seconds);
  if (!ok) m.runPodSandboxErrors.inc({ runtime_handler: runtimeHandler });
}

/**
 * kubelet_pod_start_duration_seconds: from the kubelet first seeing the pod to all its
 * containers running. Call once per pod (the first time the sync sees it Running).
 */
export function recordPodStartDuration(
  m: KubeletMetrics | undefined,
  firstSeenMs: number,
  runningMs: number,
): void {
  m?.podStartDuration.observe(Math.max(0, runningMs - firstSeenMs) / 1000);
}

/** What running_pods / running_containers report, counted from the PLEG's runtime cache. */
export function runtimeCounts(cache: Pick<RuntimeCache, 'get' | 'uids'>): RuntimeCounts {
  let runningPods = 0;
  const containers = { running: 0, exited: 0, created: 0, unknown: 0 };
  for (const uid of cache.uids()) {
    const pod = cache.get(uid);
    if (pod.sandboxes.some((s) => s.state === cri.PodSandboxState.SANDBOX_READY)) runningPods++;
    for (const c of pod.containers) {
      switch (c.state) {
        case cri.ContainerState.CONTAINER_RUNNING:
          containers.running++;
          break;
        case cri.ContainerState.CONTAINER_EXITED:
          containers.exited++;
          break;
        case cri.ContainerState.CONTAINER_CREATED:
          containers.created++;
          break;
        case cri.ContainerState.CONTAINER_UNKNOWN:
        case cri.ContainerState.UNRECOGNIZED:
          containers.unknown++;
      }
    }
  }
  return { runningPods, containers };
}
