/**
 * A pod's effective resource requests, as upstream's resourcehelper.PodRequests: read by
 * admission, the pod cgroups (cm), the allocation manager and eviction's ranking.
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { milliCpu, parseQuantity } from '../util/quantity.ts';
import { podLevelValue } from './pod-level.ts';

/** A pod's or container's requests: CPU in millicores, memory and ephemeral storage in bytes. */
export interface Requests {
  cpu: number;
  memory: number;
  ephemeral: number;
}

function containerRequests(c: Container): Requests {
  // A limit without a request defaults the request (API defaulting does it too).
  const r = { ...c.resources?.limits, ...c.resources?.requests };
  return {
    cpu: r['cpu'] === undefined ? 0 : milliCpu(r['cpu']),
    memory: r['memory'] === undefined ? 0 : Math.ceil(parseQuantity(r['memory'])),
    ephemeral:
      r['ephemeral-storage'] === undefined ? 0 : Math.ceil(parseQuantity(r['ephemeral-storage'])),
  };
}

/** The sum of two requests. */
export function addRequests(a: Requests, b: Requests): Requests {
  return { cpu: a.cpu + b.cpu, memory: a.memory + b.memory, ephemeral: a.ephemeral + b.ephemeral };
}

function max(a: Requests, b: Requests): Requests {
  return {
    cpu: Math.max(a.cpu, b.cpu),
    memory: Math.max(a.memory, b.memory),
    ephemeral: Math.max(a.ephemeral, b.ephemeral),
  };
}

/**
 * The pod's effective requests as upstream computes them: app containers plus sidecars
 * (which keep running), or the largest init container with the sidecars started before
 * it, whichever is larger; cpu and memory from the pod-level requests where the pod sets
 * them; plus the RuntimeClass overhead.
 */
export function podRequests(pod: Pod): Requests {
  const zero: Requests = { cpu: 0, memory: 0, ephemeral: 0 };
  let sidecars = zero;
  let initPeak = zero;
  for (const c of pod.spec?.initContainers ?? []) {
    const r = containerRequests(c);
    if (c.restartPolicy === 'Always') {
      sidecars = addRequests(sidecars, r);
      initPeak = max(initPeak, sidecars);
    } else {
      initPeak = max(initPeak, addRequests(sidecars, r));
    }
  }
  const apps = (pod.spec?.containers ?? []).map(containerRequests).reduce(addRequests, zero);
  const overhead = pod.spec?.overhead ?? {};
  const containers = max(addRequests(apps, sidecars), initPeak);
  // Pod-level requests (spec.resources) replace the containers' sum for cpu and memory.
  const effective: Requests = {
    cpu: podLevelValue(pod, 'requests', 'cpu') ?? containers.cpu,
    memory: podLevelValue(pod, 'requests', 'memory') ?? containers.memory,
    ephemeral: containers.ephemeral,
  };
  return addRequests(effective, {
    cpu: overhead['cpu'] === undefined ? 0 : milliCpu(overhead['cpu']),
    memory: overhead['memory'] === undefined ? 0 : Math.ceil(parseQuantity(overhead['memory'])),
    ephemeral:
      overhead['ephemeral-storage'] === undefined
        ? 0
        : Math.ceil(parseQuantity(overhead['ephemeral-storage'])),
  });
}
