/**
 * How a pod is named in logs, events and messages (upstream's pkg/kubelet/util/format).
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { RuntimePodStatus } from './pod-status.ts';

/** `name_namespace(uid)`, upstream's format.Pod. */
export function podDescription(pod: Pod, status?: RuntimePodStatus): string {
  const name = pod.metadata?.name ?? status?.name ?? '';
  const namespace = pod.metadata?.namespace ?? status?.namespace ?? '';
  const uid = pod.metadata?.uid ?? status?.uid ?? '';
  return `${name}_${namespace}(${uid})`;
}
