/**
 * A pod's sandbox from the kubelet's side: making one (pod cgroup, CRI config, runtime
 * handler from the RuntimeClass, RunPodSandbox) and stopping a pod's containers and
 * sandboxes in upstream's order (app containers, then sidecars in reverse, then the
 * sandboxes). pod-sync.ts decides when; this file knows how.
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import type { PodCgroups } from '../cm/pod-cgroups.ts';
import { CriError, type cri, type CriClient } from '../cri/index.ts';
import { podTarget } from '../events/targets.ts';
import type { EventRecorder } from '../events/types.ts';
import { isNotFound, type KubeClient } from '../kube/types.ts';
import type { RuntimePodStatus } from '../container/pod-status.ts';
import { stopContainerWithHooks, type StopDeps } from '../lifecycle/stop.ts';
import { recordPodStarted, recordRunPodSandbox } from '../metrics/pod-metrics.ts';
import type { KubeletMetrics } from '../metrics/registry.ts';
import type { UserNamespaceManager } from '../userns/types.ts';
import type { Clock } from '../util/clock.ts';
import { sandboxConfig, type RuntimeConfigOptions } from './runtime-config.ts';

export function describeError(err: unknown): string {
  return err instanceof CriError ? err.details : err instanceof Error ? err.message : String(err);
}

/** The container of that name in the pod's spec: init, app or ephemeral. */
export function specContainer(pod: Pod, name: string): Container | undefined {
  return [
    ...(pod.spec?.initContainers ?? []),
    ...(pod.spec?.containers ?? []),
    // An ephemeral container is a Container without ports, probes or resources.
    ...((pod.spec?.ephemeralContainers ?? []) as Container[]),
  ].find((c) => c.name === name);
}

export interface SandboxDeps {
  readonly cri: CriClient;
  readonly kube: KubeClient;
  readonly recorder: EventRecorder;
  readonly runtimeConfig: RuntimeConfigOptions;
  readonly podCgroups?: PodCgroups;
  readonly clock: Clock;
  /** kubelet_started_pods_total, kubelet_run_podsandbox_duration_seconds and their errors. */
  readonly metrics?: KubeletMetrics;
  /** Each pod's user namespace; without it a `hostUsers: false` pod is refused. */
  readonly userns?: UserNamespaceManager;
}

/** The CRI runtime handler of the pod's RuntimeClass ('' for the runtime's default). */
async function runtimeHandler(kube: KubeClient, pod: Pod, signal: AbortSignal): Promise<string> {
  const name = pod.spec?.runtimeClassName;
  if (name === undefined || name === '') return '';
  try {
    const rc = await kube.get<{ handler?: string }>(
      { group: 'node.k8s.io', version: 'v1', resource: 'runtimeclasses' },
      name,
      { signal },
    );
    return rc.handler ?? '';
  } catch (err) {
    if (isNotFound(err)) throw new Error(`RuntimeClass "${name}" not found`, { cause: err });
    throw err;
  }
}

export interface CreatedSandbox {
  readonly id: string;
  readonly config: cri.PodSandboxConfig;
}

/**
 * Makes the pod's sandbox. A failure (other than cancellation) is reported as upstream
 * does, a FailedCreatePodSandBox event, and answered undefined so the caller retries.
 */
/** RunPodSandbox, timed per runtime handler as upstream's instrumented service times it. */
async function timedRunPodSandbox(
  deps: SandboxDeps,
  config: cri.PodSandboxConfig,
  handler: string,
  signal: AbortSignal,
): Promise<string> {
  const started = deps.clock.monotonic();
  const seconds = () => (deps.clock.monotonic() - started) / 1000;
  try {
    const { podSandboxId } = await deps.cri.runtime.runPodSandbox(
      { config, runtimeHandler: handler },
      { signal },
    );
    recordRunPodSandbox(deps.metrics, handler, seconds());
    return podSandboxId;
  } catch (err) {
    recordRunPodSandbox(deps.metrics, handler, seconds(), false);
    throw err;
  }
}

export async function createPodSandbox(
  deps: SandboxDeps,
  pod: Pod,
  attempt: number,
  signal: AbortSignal,
): Promise<CreatedSandbox | undefined> {
  try {
    await deps.podCgroups?.ensurePod(pod);
  } catch (err) {
    // A cgroup file or systemd refusing the pod's slice: the pod worker retries.
    deps.recorder.event(
      podTarget(pod),
      'Warning',
      'FailedCreatePodContainer',
      `unable to ensure pod container exists: ${describeError(err)}`,
    );
    throw new Error(
      `failed to ensure that the pod: ${pod.metadata?.uid ?? ''} cgroups exist and are correctly applied: ${describeError(err)}`,
      { cause: err },
    );
  }
  // Every attempt counts in kubelet_started_pods_total, a failed one in its errors too.
  recordPodStarted(deps.metrics);
  try {
    // Inside the try: a pod the config cannot be made for (an FQDN too long for the
    // kernel) is reported as a failed sandbox creation too.
    const handler = await runtimeHandler(deps.kube, pod, signal);
    // A handler without user namespaces refuses a hostUsers: false pod here (upstream's words).
    const userns = await deps.userns?.getOrCreateUserNamespaceMappings(pod, handler, signal);
    const config = sandboxConfig(pod, attempt, deps.runtimeConfig, userns);
    const podSandboxId = await timedRunPodSandbox(deps, config, handler, signal);
    return { id: podSandboxId, config };
  } catch (err) {
    if (signal.aborted) throw err;
    recordPodStarted(deps.metrics, false);
    deps.recorder.event(
      podTarget(pod),
      'Warning',
      'FailedCreatePodSandBox',
      `Failed to create pod sandbox: ${describeError(err)}`,
    );
    return undefined;
  }
}

/**
 * The config of the pod's running sandbox, which CreateContainer is given with each
 * container: rebuilt as createPodSandbox made it, user namespace included (read back
 * from the pod's recorded range after a restart).
 */
export async function runningSandboxConfig(
  deps: SandboxDeps,
  pod: Pod,
  attempt: number,
  signal: AbortSignal,
): Promise<cri.PodSandboxConfig> {
  // Only a hostUsers: false pod's user namespace depends on the handler: skip the lookup.
  const handler = pod.spec?.hostUsers === false ? await runtimeHandler(deps.kube, pod, signal) : '';
  const userns = await deps.userns?.getOrCreateUserNamespaceMappings(pod, handler, signal);
  return sandboxConfig(pod, attempt, deps.runtimeConfig, userns);
}

/** Upstream's killContainer: preStop within the grace period, then StopContainer. */
export async function killContainer(
  hooks: StopDeps,
  pod: Pod,
  target: { readonly id: string; readonly name: string },
  graceSeconds: number,
  message: string,
  signal: AbortSignal,
): Promise<void> {
  await stopContainerWithHooks(
    hooks,
    {
      pod,
      container: specContainer(pod, target.name) ?? { name: target.name },
      containerId: target.id,
      gracePeriodSeconds: graceSeconds,
      message,
    },
    signal,
  );
}

/**
 * Upstream's killPod: the app containers in parallel within the grace period, sidecars
 * (restartable init containers) after them in reverse order within what is left of it,
 * then every ready sandbox. `reason` is the kill message (default "Stopping container").
 */
export async function killPod(
  hooks: StopDeps,
  sandboxes: Pick<CriClient['runtime'], 'stopPodSandbox'>,
  pod: Pod,
  runtime: RuntimePodStatus,
  graceSeconds: number,
  reason: string | undefined,
  signal: AbortSignal,
): Promise<void> {
  const running = runtime.containers.filter(
    (c) => c.state === 'running' || c.state === 'created' || c.state === 'unknown',
  );
  const sidecars = (pod.spec?.initContainers ?? [])
    .filter((c) => c.restartPolicy === 'Always')
    .map((c) => c.name);
  const started = hooks.clock.monotonic();
  const kill = (c: (typeof running)[number], seconds: number): Promise<void> =>
    killContainer(hooks, pod, c, seconds, reason ?? `Stopping container ${c.name}`, signal);
  await Promise.all(
    running.filter((c) => !sidecars.includes(c.name)).map((c) => kill(c, graceSeconds)),
  );
  for (const name of [...sidecars].reverse()) {
    const left = Math.max(2, graceSeconds - Math.ceil((hooks.clock.monotonic() - started) / 1000));
    await Promise.all(running.filter((c) => c.name === name).map((c) => kill(c, left)));
  }
  for (const s of runtime.sandboxes) {
    if (s.state === 'ready') await sandboxes.stopPodSandbox({ podSandboxId: s.id }, { signal });
  }
}
