/** Runtime state for the status generator's tests: one sandbox, containers as given. */
import type { Pod, PodStatus } from 'kubernetes-types/core/v1.js';
import type { RuntimeContainer, RuntimePodStatus } from '../container/pod-status.ts';
import { generatePodStatus, type StatusInput } from './generate.ts';

/** A container instance of pod u1 in sandbox s1; exited ones exited 0 at t=3 s. */
export function runtimeContainer(
  name: string,
  state: RuntimeContainer['state'],
  extra: Partial<RuntimeContainer> = {},
): RuntimeContainer {
  return {
    id: `${name}-${String(extra.attempt ?? 0)}`,
    name,
    state,
    attempt: 0,
    createdAt: 1000,
    startedAt: 2000,
    hash: 'h',
    image: 'busybox:1',
    imageRef: 'sha256:abc',
    sandboxId: 's1',
    ...(state === 'exited' && { exitCode: 0, finishedAt: 3000 }),
    ...extra,
  };
}

/** Pod u1 (ns/p) with a ready sandbox at 10.88.0.5 and `containers`. */
export function runtimeStatus(containers: RuntimeContainer[]): RuntimePodStatus {
  return {
    uid: 'u1',
    name: 'p',
    namespace: 'ns',
    sandboxes: [
      { id: 's1', state: 'ready', attempt: 0, createdAt: 500, ip: '10.88.0.5', ips: ['10.88.0.5'] },
    ],
    containers,
  };
}

/** The status generated for `pod` with `containers` in the runtime, at `now`. */
export function generateStatus(
  pod: Pod,
  containers: RuntimeContainer[],
  now: Date,
  extra: Partial<StatusInput> = {},
): PodStatus {
  return generatePodStatus({
    pod,
    runtime: runtimeStatus(containers),
    waiting: new Map(),
    runtimeName: 'containerd',
    hostIPs: ['127.0.0.1'],
    now,
    ...extra,
  });
}
