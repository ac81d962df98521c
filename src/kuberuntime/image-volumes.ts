/**
 * Image volumes (`volumes[].image`, KEP-4639; the ImageVolume gate is GA and locked on
 * since v1.36), as upstream's kuberuntime does them:
 *
 * 1. Before the containers of a sync start, every image volume of the pod is pulled like
 *    a container image: the pod's pull secrets, the volume's pullPolicy, the same events,
 *    back-off and reasons, the events on the pod (getImageVolumes).
 * 2. A container whose volumeMounts name a volume whose pull failed waits with that pull's
 *    reason (ErrImagePull, ImagePullBackOff, …); a failed volume no container mounts
 *    stops nothing (toKubeContainerImageVolumes).
 * 3. The runtime mounts the image itself: a CRI Mount with `image` naming the pulled
 *    image and no host path, always read-only, a subPath passed as `image_sub_path` for
 *    the runtime to resolve inside the image (makeMounts).
 *
 * containerd mounts images from 2.1 and image subPaths from 2.2. Older ones (1.6, the
 * other runtime berth is tested on) ignore the field and fail on the empty host path with
 * an unrelated message, or mount the whole image for a subPath; the container gets a
 * clear CreateContainerError instead, starting with upstream's CRI error name.
 */
import type { Container, Pod, Secret, Volume, VolumeMount } from 'kubernetes-types/core/v1.js';
import { cri } from '../cri/index.ts';
import type { EventTarget } from '../events/types.ts';
import type { EnsureImageResult, ImageEnsurer, ImageFailureReason } from '../images/types.ts';
import { BerthError } from '../util/errors.ts';
import { expandSubPathExpr, validateSubPath } from '../volumes/subpath.ts';

/** Upstream's crierror.ErrImageVolumeMountFailed: the prefix of image volume mount errors. */
export const IMAGE_VOLUME_MOUNT_FAILED = 'ImageVolumeMountFailed';

/** The outcome of pulling one image volume. */
export type ImageVolumePull =
  | { readonly ok: true; readonly spec: cri.ImageSpec }
  | {
      readonly ok: false;
      readonly reason: ImageFailureReason;
      readonly message: string;
      readonly retryAfterMs?: number;
    };

/** Volume name -> its pull, for every image volume of the pod. */
export type ImageVolumePulls = ReadonlyMap<string, ImageVolumePull>;

/** `volumes[].image` (API v1.31+; the kubernetes-types release berth builds on predates it). */
export interface ImageVolumeSource {
  readonly reference?: string;
  readonly pullPolicy?: string;
}

/** The volume's image source, if it is an image volume. */
export function imageSource(v: Volume): ImageVolumeSource | undefined {
  return (v as Volume & { readonly image?: ImageVolumeSource }).image;
}

/**
 * Pulls every image volume of the pod (upstream's getImageVolumes). Events go to `target`
 * (the pod). Pulls that fail are recorded, not thrown: only the containers that mount
 * them wait.
 */
export async function pullImageVolumes(
  images: ImageEnsurer,
  pod: Pod,
  secrets: readonly Secret[],
  sandbox: cri.PodSandboxConfig | undefined,
  target: EventTarget,
  signal: AbortSignal,
): Promise<ImageVolumePulls> {
  const out = new Map<string, ImageVolumePull>();
  for (const v of pod.spec?.volumes ?? []) {
    const source = imageSource(v);
    if (source === undefined) continue;
    const reference = source.reference ?? '';
    // The image manager takes a container: the volume stands in for one, so the
    // policy defaulting, events and back-off key (pod UID + image) are upstream's.
    const asContainer: Container = {
      name: v.name,
      image: reference,
      ...(source.pullPolicy !== undefined && { imagePullPolicy: source.pullPolicy }),
    };
    const r: EnsureImageResult = await images.ensureImage(
      pod,
      asContainer,
      secrets,
      sandbox,
      target,
      signal,
    );
    if (!r.ok) {
      out.set(v.name, r);
      continue;
    }
    out.set(v.name, {
      ok: true,
      spec: cri.ImageSpec.fromPartial({
        image: r.imageRef,
        userSpecifiedImage: reference,
        annotations: { ...pod.metadata?.annotations },
      }),
    });
  }
  return out;
}

/**
 * Why `container` cannot start yet: the last failed pull among the image volumes it
 * mounts (upstream reports the last one), or undefined.
 */
export function imageVolumeFailure(
  pulls: ImageVolumePulls,
  container: Container,
): Exclude<ImageVolumePull, { ok: true }> | undefined {
  let failure: Exclude<ImageVolumePull, { ok: true }> | undefined;
  for (const vm of container.volumeMounts ?? []) {
    const pull = pulls.get(vm.name);
    if (pull !== undefined && !pull.ok) failure = pull;
  }
  return failure;
}

/**
 * What one container start adds to the image volume metrics, as upstream's
 * incrementImageVolumeMetrics: undefined when the start stopped on a failed volume pull
 * (upstream returns before counting); otherwise each image volume the container mounts is
 * requested once, and each of its mounts succeeded unless the start failed with a
 * CreateContainerError whose message starts with ImageVolumeMountFailed.
 */
export function imageVolumeMountCounts(
  pulls: ImageVolumePulls,
  container: Container,
  failure: { readonly reason: string; readonly message: string } | undefined,
): { requested: number; succeeded: number; failed: number } | undefined {
  if (imageVolumeFailure(pulls, container) !== undefined) return undefined;
  const mounts = (container.volumeMounts ?? []).filter((vm) => pulls.has(vm.name));
  const failed =
    failure?.reason === 'CreateContainerError' &&
    failure.message.startsWith(IMAGE_VOLUME_MOUNT_FAILED);
  return {
    requested: new Set(mounts.map((vm) => vm.name)).size,
    succeeded: failed ? 0 : mounts.length,
    failed: failed ? mounts.length : 0,
  };
}

/** A volumeMount of an image volume cannot be built (CreateContainerConfigError). */
export class ImageVolumeMountError extends BerthError {
  constructor(message: string) {
    super('BERTH_IMAGE_VOLUME_MOUNT', message);
  }
}

const PROPAGATION: Readonly<Record<string, cri.MountPropagation>> = {
  None: cri.MountPropagation.PROPAGATION_PRIVATE,
  HostToContainer: cri.MountPropagation.PROPAGATION_HOST_TO_CONTAINER,
  Bidirectional: cri.MountPropagation.PROPAGATION_BIDIRECTIONAL,
};

/**
 * The CRI mount of one volumeMount of an image volume. The subPath (subPathExpr expanded
 * from `env`) is checked as for other volumes (relative, no `..`); the runtime resolves
 * it inside the image.
 */
export function imageVolumeMount(
  vm: VolumeMount,
  container: Container,
  spec: cri.ImageSpec,
  env: ReadonlyMap<string, string>,
): cri.Mount {
  if (vm.subPath !== undefined && vm.subPath !== '' && (vm.subPathExpr ?? '') !== '') {
    throw new ImageVolumeMountError('subPath and subPathExpr are mutually exclusive');
  }
  const subPath =
    vm.subPathExpr !== undefined && vm.subPathExpr !== ''
      ? expandSubPathExpr(vm.subPathExpr, env)
      : (vm.subPath ?? '');
  if (subPath !== '') validateSubPath(subPath);
  const mode = vm.mountPropagation ?? 'None';
  const propagation = PROPAGATION[mode];
  if (propagation === undefined) {
    throw new ImageVolumeMountError(`invalid mountPropagation ${JSON.stringify(mode)}`);
  }
  if (
    propagation === cri.MountPropagation.PROPAGATION_BIDIRECTIONAL &&
    container.securityContext?.privileged !== true
  ) {
    throw new ImageVolumeMountError(
      'Bidirectional mount propagation is available only to privileged containers',
    );
  }
  return cri.Mount.fromPartial({
    containerPath: vm.mountPath,
    hostPath: '',
    // The image plugin's attributes say ReadOnly: whatever the volumeMount asks.
    readonly: true,
    propagation,
    image: spec,
    imageSubPath: subPath,
  });
}

/** Parses "v2.1.0", "1.6.20-berth-fake", "2.2.0~rc1" into [major, minor]. */
function majorMinor(version: string): [number, number] | undefined {
  const m = /^v?(\d+)\.(\d+)/.exec(version);
  if (m === null) return undefined;
  return [Number(m[1]), Number(m[2])];
}

function atLeast(v: [number, number], major: number, minor: number): boolean {
  return v[0] > major || (v[0] === major && v[1] >= minor);
}

/**
 * Why the runtime cannot do what `mounts` ask of it, or undefined. Only containerd is
 * known to lack image mounts (before 2.1) and image subPaths (before 2.2); any other
 * runtime, or a version that does not parse, is trusted to report its own errors.
 */
export function imageVolumeUnsupported(
  version: Pick<cri.VersionResponse, 'runtimeName' | 'runtimeVersion'>,
  mounts: readonly cri.Mount[],
): string | undefined {
  const images = mounts.filter((m) => m.image !== undefined && m.image.image !== '');
  if (images.length === 0 || version.runtimeName !== 'containerd') return undefined;
  const v = majorMinor(version.runtimeVersion);
  if (v === undefined) return undefined;
  const runtime = `containerd ${version.runtimeVersion}`;
  if (!atLeast(v, 2, 1)) {
    return (
      `${IMAGE_VOLUME_MOUNT_FAILED}: the container runtime (${runtime}) cannot mount image volumes ` +
      `(mountPath ${images.map((m) => m.containerPath).join(', ')}): they need containerd 2.1 or later`
    );
  }
  const withSubPath = images.filter((m) => m.imageSubPath !== '');
  if (withSubPath.length > 0 && !atLeast(v, 2, 2)) {
    return (
      `${IMAGE_VOLUME_MOUNT_FAILED}: the container runtime (${runtime}) cannot mount a subPath of an image volume ` +
      `(mountPath ${withSubPath.map((m) => m.containerPath).join(', ')}): it needs containerd 2.2 or later`
    );
  }
  return undefined;
}
