/**
 * emptyDir volumes: a directory on the node's disk, or a tmpfs for medium Memory. The
 * tmpfs helper also backs secret and projected volumes so their data never touches
 * disk.
 */
import { chmod, chown, mkdir } from 'node:fs/promises';
import type { EmptyDirVolumeSource } from 'kubernetes-types/core/v1.js';
import { parseQuantity } from '../util/quantity.ts';
import type { Mounter } from './mounter.ts';
import { VolumeError } from './types.ts';

/** Upstream makes emptyDir world-writable: any container user must be able to write. */
export const EMPTY_DIR_MODE = 0o777;

/**
 * The tmpfs size for a Memory emptyDir: its sizeLimit when set and positive. Without
 * one the tmpfs gets the kernel default (half of RAM); upstream would use the pod's
 * memory limit, which berth does not compute here.
 */
export function emptyDirSizeBytes(source: EmptyDirVolumeSource): number | undefined {
  if (source.sizeLimit === undefined) return undefined;
  let n: number;
  try {
    n = parseQuantity(source.sizeLimit);
  } catch (err) {
    throw new VolumeError(
      'BERTH_VOLUME_INVALID',
      `invalid emptyDir sizeLimit ${JSON.stringify(source.sizeLimit)}`,
      { cause: err },
    );
  }
  return n > 0 ? n : undefined;
}

/**
 * Creates `dir` and mounts a tmpfs on it unless one is already there (setUp runs again
 * on every pod sync). Returns true when it mounted.
 */
export async function setUpMemoryDir(
  dir: string,
  sizeBytes: number | undefined,
  mounter: Mounter,
  signal?: AbortSignal,
): Promise<boolean> {
  await mkdir(dir, { recursive: true, mode: 0o750 });
  if (await mounter.isMountPoint(dir)) return false;
  await mounter.mountTmpfs(dir, sizeBytes, signal);
  return true;
}

/** Sets up one emptyDir at `dir` (idempotent), owned by group `fsGroup` when given. */
export interface EmptyDirOptions {
  readonly mounter: Mounter;
  readonly signal?: AbortSignal;
  /** The pod's securityContext.fsGroup. */
  readonly fsGroup?: number | undefined;
}

export async function setUpEmptyDir(
  dir: string,
  source: EmptyDirVolumeSource,
  options: EmptyDirOptions,
): Promise<void> {
  const { mounter, signal, fsGroup } = options;
  const medium = source.medium ?? '';
  switch (medium) {
    case '':
      await mkdir(dir, { recursive: true, mode: EMPTY_DIR_MODE });
      break;
    case 'Memory':
      await setUpMemoryDir(dir, emptyDirSizeBytes(source), mounter, signal);
      break;
    default:
      throw new VolumeError(
        'BERTH_VOLUME_INVALID',
        `emptyDir medium ${JSON.stringify(medium)} is not supported`,
      );
  }
  if (fsGroup === undefined) {
    // chmod after mkdir/mount: the mode must not depend on the umask or tmpfs defaults.
    await chmod(dir, EMPTY_DIR_MODE);
    return;
  }
  // fsGroup ownership (upstream's SetVolumeOwnership) on the volume root only: it is
  // all berth created, and walking what containers wrote would mean chowning paths
  // they control. setgid makes new files inherit the group.
  await chown(dir, -1, fsGroup);
  await chmod(dir, EMPTY_DIR_MODE | 0o2000);
}
