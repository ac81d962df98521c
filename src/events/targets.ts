/** Event targets for pods and their containers, with upstream's field paths. */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { EventTarget } from './types.ts';

/** The pod as an event's involvedObject. */
export function podTarget(pod: Pod): EventTarget {
  const m = pod.metadata ?? {};
  return {
    kind: 'Pod',
    namespace: m.namespace ?? '',
    name: m.name ?? '',
    uid: m.uid ?? '',
    apiVersion: 'v1',
  };
}

/** One container of the pod: `spec.containers{x}`, `spec.initContainers{x}` or `spec.ephemeralContainers{x}`. */
export function containerTarget(pod: Pod, containerName: string): EventTarget {
  const s = pod.spec;
  const list =
    s?.initContainers?.some((c) => c.name === containerName) === true
      ? 'initContainers'
      : s?.ephemeralContainers?.some((c) => c.name === containerName) === true
        ? 'ephemeralContainers'
        : 'containers';
  return { ...podTarget(pod), fieldPath: `spec.${list}{${containerName}}` };
}
