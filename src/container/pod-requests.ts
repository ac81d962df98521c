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

/** The sum of two requests. */
export function addRequests(a: Requests, b: Requests): Requests {
  return { cpu: a.cpu + b.cpu, memory: a.memory + b.memory, ephemeral: a.ephemeral + b.ephemeral };
}

/** Requested amounts by resource name: cpu in millicores, everything else in its unit. */
export type RequestAmounts = Map<string, number>;

/** A container's requests; a limit without a request defaults it (API defaulting does too). */
function requestsOf(c: Container): RequestAmounts {
  return amountsIn({ ...c.resources?.limits, ...c.resources?.requests });
}

function limitsOf(c: Container): RequestAmounts {
  return amountsIn(c.resources?.limits ?? {});
}

function amountsIn(list: Readonly<Record<string, string>>): RequestAmounts {
  return new Map(
    Object.entries(list).map(([name, q]) => [
      name,
      name === 'cpu' ? milliCpu(q) : Math.ceil(parseQuantity(q)),
    ]),
  );
}

function combine(a: RequestAmounts, b: RequestAmounts, f: (x: number, y: number) => number) {
  const out = new Map(a);
  for (const [k, v] of b) out.set(k, f(out.get(k) ?? 0, v));
  return out;
}

/**
 * Upstream's aggregateContainerResourcesByFn: app containers plus sidecars (which keep
 * running), or the largest init container with the sidecars started before it,
 * whichever is larger.
 */
function aggregate(pod: Pod, of: (c: Container) => RequestAmounts): RequestAmounts {
  const sum = (x: number, y: number) => x + y;
  let sidecars: RequestAmounts = new Map();
  let initPeak: RequestAmounts = new Map();
  for (const c of pod.spec?.initContainers ?? []) {
    const r = of(c);
    if (c.restartPolicy === 'Always') {
      sidecars = combine(sidecars, r, sum);
      initPeak = combine(initPeak, sidecars, Math.max);
    } else initPeak = combine(initPeak, combine(sidecars, r, sum), Math.max);
  }
  const apps = (pod.spec?.containers ?? [])
    .map(of)
    .reduce((a, b) => combine(a, b, sum), new Map<string, number>());
  return combine(combine(apps, sidecars, sum), initPeak, Math.max);
}

/**
 * What the containers request together, for every resource name (upstream's
 * AggregateContainerRequests).
 */
export function containerRequestAmounts(pod: Pod): RequestAmounts {
  return aggregate(pod, requestsOf);
}

/**
 * The containers' limits together (upstream's AggregateContainerLimits): a container
 * without a limit for a resource adds nothing to it.
 */
export function containerLimitAmounts(pod: Pod): RequestAmounts {
  return aggregate(pod, limitsOf);
}

/**
 * The pod's effective requests as upstream computes them: the containers' together
 * (`containerRequestAmounts`); cpu and memory from the pod-level requests where the pod
 * sets them; plus the RuntimeClass overhead.
 */
export function podRequests(pod: Pod): Requests {
  const amounts = containerRequestAmounts(pod);
  const containers: Requests = {
    cpu: amounts.get('cpu') ?? 0,
    memory: amounts.get('memory') ?? 0,
    ephemeral: amounts.get('ephemeral-storage') ?? 0,
  };
  const overhead = pod.spec?.overhead ?? {};
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
