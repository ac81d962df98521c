/**
 * Starting one container, in upstream's order (kuberuntime startContainer): ensure the
 * image, build the environment and mounts (volumes, the managed /etc/hosts, a fresh
 * termination-message file), CreateContainer, StartContainer, then the postStart hook.
 * Each failure becomes the container's waiting reason and an event, as upstream:
 * ErrImagePull/ImagePullBackOff, CreateContainerConfigError, CreateContainerError,
 * RunContainerError, PostStartHookError.
 */
import { join } from 'node:path';
import type { Container, Pod, Secret } from 'kubernetes-types/core/v1.js';
import { CriError, cri, type CriClient } from '../cri/index.ts';
import type { EventRecorder, EventTarget } from '../events/types.ts';
import type { ImageEnsurer } from '../images/types.ts';
import {
  recordContainerStarted,
  recordImageVolumeMounts,
  type ContainerType,
} from '../metrics/pod-metrics.ts';
import type { KubeletMetrics } from '../metrics/registry.ts';
import {
  imageVolumeFailure,
  imageVolumeMount,
  imageVolumeMountCounts,
  imageVolumeUnsupported,
  type ImageVolumePulls,
} from './image-volumes.ts';
import { containerBackoffKey } from './plan.ts';
import { effectiveRunAs, verifyRunAsNonRoot, type ImageUser } from './security.ts';
import {
  latestContainer,
  nextRestartCount,
  type RuntimePodStatus,
} from '../container/pod-status.ts';
import type { WaitingReason } from '../status/generate.ts';
import type { Backoff } from '../util/backoff.ts';
import { BerthError } from '../util/errors.ts';
import { containerDevices } from '../volumes/devices.ts';
import type { PodVolumes, VolumeManager } from '../volumes/types.ts';
import { createTerminationLogFile } from './pod-dirs.ts';
import type { LogSymlinks } from './log-symlinks.ts';
import { containerConfig, type ContainerConfigOptions } from './runtime-config.ts';

/** A container's configuration cannot be built (CreateContainerConfigError). */
export class ContainerConfigError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('BERTH_CONTAINER_CONFIG', message, options);
  }
}

export interface ContainerEnvironment {
  readonly env: readonly { readonly name: string; readonly value: string }[];
  readonly command: readonly string[];
  readonly args: readonly string[];
}

/** Builds a container's environment; throws (any error -> CreateContainerConfigError). */
export interface ContainerEnvProvider {
  environment(
    pod: Pod,
    container: Container,
    podIPs: readonly string[],
    signal: AbortSignal,
    /** The pod's volumes, for env[].valueFrom.fileKeyRef. */
    volumes?: PodVolumes,
  ): Promise<ContainerEnvironment>;
}

/**
 * Runs the postStart hook. On failure it has already recorded FailedPostStartHook and
 * killed the container; it resolves to the message for the waiting state.
 */
export type PostStartRunner = (
  pod: Pod,
  container: Container,
  containerId: string,
  signal: AbortSignal,
) => Promise<string | undefined>;

export interface ContainerStartDeps {
  readonly cri: CriClient;
  readonly images: ImageEnsurer;
  readonly recorder: EventRecorder;
  readonly crashBackoff: Backoff;
  readonly rootDir: string;
  readonly env: ContainerEnvProvider;
  readonly volumes: VolumeManager;
  /** Path of the pod's managed hosts file, when /etc/hosts should be mounted. */
  readonly etcHosts: (pod: Pod) => string | undefined;
  readonly postStart?: PostStartRunner;
  readonly seccomp?: ContainerConfigOptions;
  /** kubelet_started_containers_total and its errors. */
  readonly metrics?: KubeletMetrics;
  /** /var/log/containers: each started container's log linked there, as upstream. */
  readonly logSymlinks?: LogSymlinks;
}

export interface ContainerStartContext {
  readonly pod: Pod;
  readonly spec: Container;
  readonly runtime: RuntimePodStatus;
  readonly sandboxId: string;
  readonly sandbox: cri.PodSandboxConfig;
  readonly podIPs: readonly string[];
  readonly secrets: readonly Secret[];
  readonly volumes: PodVolumes;
  /** The pod's image volumes, pulled for this sync (kuberuntime/image-volumes.ts). */
  readonly imageVolumes: ImageVolumePulls;
  readonly waiting: Map<string, WaitingReason>;
  readonly target: EventTarget;
}

function describe(err: unknown): string {
  return err instanceof CriError ? err.details : err instanceof Error ? err.message : String(err);
}

/** The kubelet-managed mounts every container gets besides its volumeMounts. */
async function kubeletMounts(
  deps: ContainerStartDeps,
  pod: Pod,
  spec: Container,
): Promise<cri.Mount[]> {
  const out: cri.Mount[] = [];
  const hosts = deps.etcHosts(pod);
  const mountsHosts = (spec.volumeMounts ?? []).some((m) => m.mountPath === '/etc/hosts');
  if (hosts !== undefined && !mountsHosts)
    out.push(cri.Mount.fromPartial({ containerPath: '/etc/hosts', hostPath: hosts }));
  const path = spec.terminationMessagePath ?? '/dev/termination-log';
  if (path !== '') {
    const file = await createTerminationLogFile(deps.rootDir, pod.metadata?.uid ?? '', spec.name);
    out.push(cri.Mount.fromPartial({ containerPath: path, hostPath: file }));
  }
  return out;
}

/**
 * The container's volumeMounts in order: image volumes as image mounts, the others from
 * the volume manager (which has nothing on the host for an image volume).
 */
async function volumeMounts(
  deps: ContainerStartDeps,
  ctx: ContainerStartContext,
  env: ReadonlyMap<string, string>,
  signal: AbortSignal,
): Promise<cri.Mount[]> {
  const { pod, spec } = ctx;
  const all = spec.volumeMounts ?? [];
  const isImage = (name: string): boolean => ctx.imageVolumes.has(name);
  if (!all.some((vm) => isImage(vm.name)))
    return deps.volumes.containerMounts(pod, spec, ctx.volumes, env, signal);
  const hostMounts = await deps.volumes.containerMounts(
    pod,
    { ...spec, volumeMounts: all.filter((vm) => !isImage(vm.name)) },
    ctx.volumes,
    env,
    signal,
  );
  const out: cri.Mount[] = [];
  let next = 0;
  for (const vm of all) {
    const pull = ctx.imageVolumes.get(vm.name);
    if (pull === undefined) {
      const m = hostMounts[next++];
      if (m !== undefined) out.push(m);
      continue;
    }
    // Failed pulls stopped the start earlier (imageVolumeFailure).
    if (!pull.ok) throw new ContainerConfigError(pull.message);
    out.push(imageVolumeMount(vm, spec, pull.spec, env));
  }
  return out;
}

/** Why the runtime cannot mount the image volumes among `mounts`, asked only when there are some. */
async function imageMountsUnsupported(
  client: CriClient,
  mounts: readonly cri.Mount[],
  signal: AbortSignal,
): Promise<string | undefined> {
  if (!mounts.some((m) => m.image !== undefined)) return undefined;
  let version: cri.VersionResponse;
  try {
    version = await client.runtime.version({ version: '0.1.0' }, { signal });
  } catch (err) {
    if (signal.aborted) throw err;
    // Unknown: CreateContainer will say what the runtime thinks.
    return undefined;
  }
  return imageVolumeUnsupported(version, mounts);
}

/**
 * An ephemeral container with targetContainerName joins the target's PID namespace
 * (CRI NamespaceMode TARGET), so `kubectl debug --target` sees its processes.
 */
function pidTarget(pod: Pod, spec: Container, runtime: RuntimePodStatus): string | undefined {
  const eph = (pod.spec?.ephemeralContainers ?? []).find((e) => e.name === spec.name);
  const target = eph?.targetContainerName;
  if (target === undefined || target === '') return undefined;
  return runtime.containers.find((c) => c.name === target && c.state === 'running')?.id;
}

/** runAsNonRoot without runAsUser: the image's user decides (no user in the image = root). */
async function checkRunAsNonRoot(
  client: CriClient,
  pod: Pod,
  spec: Container,
  imageRef: string,
  signal: AbortSignal,
): Promise<void> {
  const runAs = effectiveRunAs(pod, spec);
  if (!runAs.runAsNonRoot) return;
  let user: ImageUser = { uid: 0 };
  if (runAs.runAsUser === undefined) {
    const { image } = await client.image.imageStatus({ image: { image: imageRef } }, { signal });
    if (image?.uid !== undefined) user = { uid: Number(image.uid.value) };
    else if (image !== undefined && image.username !== '') user = { username: image.username };
  }
  verifyRunAsNonRoot(pod, spec, user);
}

/** Upstream's container_type label of a container of the pod. */
function containerType(pod: Pod, name: string): ContainerType {
  if ((pod.spec?.initContainers ?? []).some((c) => c.name === name)) return 'init_container';
  if ((pod.spec?.ephemeralContainers ?? []).some((c) => c.name === name))
    return 'ephemeral_container';
  return 'container';
}

/**
 * Starts one container: image, config, CreateContainer, StartContainer, postStart.
 * Returns a requeue delay when the container must wait (image back-off, config errors).
 * Every attempt counts in kubelet_started_containers_total, and a failed one in
 * ..._errors_total under its waiting reason (ErrImagePull, CreateContainerError, …), as
 * upstream counts them.
 */
export async function startContainer(
  deps: ContainerStartDeps,
  ctx: ContainerStartContext,
  signal: AbortSignal,
): Promise<number | undefined> {
  const requeue = await attemptStart(deps, ctx, signal);
  const failure = ctx.waiting.get(ctx.spec.name);
  recordContainerStarted(
    deps.metrics,
    containerType(ctx.pod, ctx.spec.name),
    failure === undefined ? undefined : { code: failure.reason },
  );
  const counts = imageVolumeMountCounts(ctx.imageVolumes, ctx.spec, failure);
  if (counts !== undefined) recordImageVolumeMounts(deps.metrics, counts);
  return requeue;
}

async function attemptStart(
  deps: ContainerStartDeps,
  ctx: ContainerStartContext,
  signal: AbortSignal,
): Promise<number | undefined> {
  const { cri: client, recorder, images } = deps;
  const { pod, spec, runtime, waiting, target: ref } = ctx;
  const uid = pod.metadata?.uid ?? '';
  // As upstream, a failed image volume pull is reported before the container's own image.
  const volumePull = imageVolumeFailure(ctx.imageVolumes, spec);
  if (volumePull !== undefined) {
    recorder.event(ref, 'Warning', 'Failed', `Error: ${volumePull.reason}`);
    waiting.set(spec.name, { reason: volumePull.reason, message: volumePull.message });
    return volumePull.retryAfterMs;
  }
  const image = await images.ensureImage(pod, spec, ctx.secrets, ctx.sandbox, ref, signal);
  if (!image.ok) {
    waiting.set(spec.name, { reason: image.reason, message: image.message });
    return image.retryAfterMs;
  }
  const previous = latestContainer(runtime, spec.name);
  const restartCount = nextRestartCount(runtime, spec.name);
  let config: cri.ContainerConfig;
  try {
    await checkRunAsNonRoot(client, pod, spec, image.imageRef, signal);
    const env = await deps.env.environment(pod, spec, ctx.podIPs, signal, ctx.volumes);
    const vars = new Map(env.env.map((e) => [e.name, e.value]));
    const mounts = [
      ...(await volumeMounts(deps, ctx, vars, signal)),
      ...(await kubeletMounts(deps, pod, spec)),
    ];
    config = containerConfig(
      pod,
      { ...spec, command: [...env.command], args: [...env.args] },
      restartCount,
      image.imageRef,
      env.env.map((e) => ({ key: e.name, value: Buffer.from(e.value) })),
      mounts,
      deps.seccomp,
      pidTarget(pod, spec, runtime),
      ctx.sandbox.linux?.securityContext?.namespaceOptions?.usernsOptions,
    );
    // volumeDevices: the pod's block volumes as devices (upstream's makeBlockVolumes).
    config.devices = containerDevices(spec, ctx.volumes);
  } catch (err) {
    if (signal.aborted) throw err;
    const message = describe(err);
    recorder.event(ref, 'Warning', 'Failed', `Error: ${message}`);
    waiting.set(spec.name, { reason: 'CreateContainerConfigError', message });
    return 10_000;
  }
  const unsupported = await imageMountsUnsupported(client, config.mounts, signal);
  if (unsupported !== undefined) {
    recorder.event(ref, 'Warning', 'Failed', `Error: ${unsupported}`);
    waiting.set(spec.name, { reason: 'CreateContainerError', message: unsupported });
    return 10_000;
  }
  // A restart after an exit counts towards CrashLoopBackOff (the plan checked it is due).
  if (previous !== undefined && previous.state === 'exited')
    deps.crashBackoff.next(containerBackoffKey(uid, spec.name, spec.image ?? ''));
  let containerId: string;
  try {
    containerId = (
      await client.runtime.createContainer(
        { podSandboxId: ctx.sandboxId, config, sandboxConfig: ctx.sandbox },
        { signal },
      )
    ).containerId;
  } catch (err) {
    if (signal.aborted) throw err;
    const message = describe(err);
    recorder.event(ref, 'Warning', 'Failed', `Error: ${message}`);
    waiting.set(spec.name, { reason: 'CreateContainerError', message });
    return 10_000;
  }
  recorder.event(ref, 'Normal', 'Created', `Created container: ${spec.name}`);
  try {
    await client.runtime.startContainer({ containerId }, { signal });
  } catch (err) {
    if (signal.aborted) throw err;
    const message = describe(err);
    recorder.event(ref, 'Warning', 'Failed', `Error: ${message}`);
    waiting.set(spec.name, { reason: 'RunContainerError', message });
    return undefined;
  }
  waiting.delete(spec.name);
  recorder.event(ref, 'Normal', 'Started', `Started container ${spec.name}`);
  // Upstream's step 3: the legacy symlink for cluster logging, once the log exists.
  await deps.logSymlinks?.link(
    { namespace: pod.metadata?.namespace ?? '', name: pod.metadata?.name ?? '' },
    spec.name,
    containerId,
    join(ctx.sandbox.logDirectory, config.logPath),
  );
  if (spec.lifecycle?.postStart !== undefined && deps.postStart !== undefined) {
    const failure = await deps.postStart(pod, spec, containerId, signal);
    if (failure !== undefined)
      waiting.set(spec.name, { reason: 'PostStartHookError', message: failure });
  }
  return undefined;
}
