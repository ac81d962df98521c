/**
 * The volume manager's contracts. The manager (manager.ts) owns the per-pod directory
 * tree under `<rootDir>/pods/<uid>/volumes/<plugin>/<name>`; content volumes
 * (configMap, secret, downwardAPI, projected) get their files from a
 * `VolumeSourceResolver` (sources/) and are written with the atomic writer.
 */
import type { Container, Pod, Volume } from 'kubernetes-types/core/v1.js';
import type { cri } from '../cri/index.ts';
import { BerthError } from '../util/errors.ts';

/** One file of a content volume. */
export interface PayloadFile {
  readonly data: Buffer;
  /** Permission bits (e.g. 0o644); the writer applies them exactly. */
  readonly mode: number;
}

/**
 * Relative path inside the volume (already checked: not absolute, no `..` element, no
 * leading `..`) -> file.
 */
export type Payload = ReadonlyMap<string, PayloadFile>;

export interface ResolvedPayload {
  readonly payload: Payload;
  /** Secrets and projected volumes live on tmpfs so their content never touches disk. */
  readonly medium: 'disk' | 'memory';
  /** Upstream plugin directory name, e.g. kubernetes.io~configmap. */
  readonly plugin: string;
}

/** Produces the files of configMap, secret, downwardAPI and projected volumes. */
export interface VolumeSourceResolver {
  /**
   * The payload of a content volume, or undefined when `volume` is not one.
   * Throws VolumeError (its message becomes the FailedMount event).
   */
  payload(pod: Pod, volume: Volume, signal: AbortSignal): Promise<ResolvedPayload | undefined>;
}

/**
 * Pod and container fields for downward API volumes and env (kuberuntime/downward.ts).
 */
export interface DownwardResolver {
  /**
   * The value of a fieldRef. Volumes may also use metadata.labels and
   * metadata.annotations (all entries as `key="value"` lines, sorted).
   */
  podField(pod: Pod, fieldPath: string, use: 'env' | 'volume'): string;
  /** The value of a resourceFieldRef (limits.cpu, requests.memory, ...). */
  resourceField(pod: Pod, containerName: string, resource: string, divisor?: string): string;
}

/** A volume that is set up on the host and can be mounted into containers. */
export interface MountedVolume {
  readonly name: string;
  /** Absolute host path handed to CRI. */
  readonly hostPath: string;
  /** The volume itself is read-only (configMap, secret, ...: always). */
  readonly readOnly: boolean;
  /** Upstream plugin directory name, e.g. kubernetes.io~empty-dir. */
  readonly plugin: string;
  /**
   * A block volume (volumeMode: Block): hostPath is the device (a symlink to it) that
   * containers get through volumeDevices, never a mount.
   */
  readonly block?: boolean;
}

export interface PodVolumes {
  readonly byName: ReadonlyMap<string, MountedVolume>;
}

export interface VolumeManager {
  /**
   * Sets up every volume of the pod, or refreshes content volumes (an unchanged payload
   * is not rewritten). Throws VolumeError with the FailedMount message.
   */
  setUpPod(pod: Pod, signal: AbortSignal): Promise<PodVolumes>;
  /**
   * The CRI mounts for one container (volumeMounts with readOnly, subPath, subPathExpr
   * expanded from `env`, mountPropagation). subPaths are resolved without following
   * symlinks out of the volume. Throws VolumeError (CreateContainerConfigError).
   */
  containerMounts(
    pod: Pod,
    container: Container,
    volumes: PodVolumes,
    env: ReadonlyMap<string, string>,
    signal: AbortSignal,
  ): Promise<cri.Mount[]>;
  /** Unmounts and removes everything of the pod under pods/<uid>. Idempotent. */
  tearDownPod(uid: string, signal: AbortSignal): Promise<void>;
  /**
   * node.status.volumesInUse: the attachable volumes (kubernetes.io/csi/<driver>^<handle>)
   * mounted or being mounted, sorted.
   */
  volumesInUse(): string[];
  /** Tears down the pod directories whose UID is not in `active` (after a restart). */
  cleanupOrphans(active: ReadonlySet<string>, signal: AbortSignal): Promise<string[]>;
}

export type VolumeErrorCode =
  | 'BERTH_VOLUME_PATH_ESCAPE'
  | 'BERTH_VOLUME_INVALID'
  | 'BERTH_VOLUME_HOSTPATH_TYPE'
  | 'BERTH_VOLUME_SOURCE_NOT_FOUND'
  | 'BERTH_VOLUME_SOURCE_ERROR'
  | 'BERTH_VOLUME_MOUNT_FAILED'
  /** A claim that is missing, unbound, being deleted or not this pod's. */
  | 'BERTH_VOLUME_CLAIM'
  /** A CSI driver call or the wait for its attachment failed (retried). */
  | 'BERTH_VOLUME_CSI';

export class VolumeError extends BerthError {
  declare readonly code: VolumeErrorCode;
  // Not useless: it narrows the accepted codes to VolumeErrorCode.
  // eslint-disable-next-line @typescript-eslint/no-useless-constructor
  constructor(code: VolumeErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}
