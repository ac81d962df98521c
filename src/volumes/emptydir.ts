/**
 * emptyDir volumes: a directory on the node's disk, or a tmpfs for medium Memory. The
 * tmpfs helper also backs secret and projected volumes so their data never touches
 * disk.
 */
import { chmod, chown, mkdir, stat } from 'node:fs/promises';
import type { EmptyDirVolumeSource } from 'kubernetes-types/core/v1.js';
import { parseQuantity } from '../util/quantity.ts';
import type { Mounter } from './mounter.ts';
import { VolumeError } from './types.ts';

/** Upstream makes emptyDir world-writable: any container user must be able to write. */
export const EMPTY_DIR_MODE = 0o777;
/** What upstream's fsGroup ownership adds to a directory: setgid, group rw and exec. */
const FS_GROUP_DIR_BITS = 0o2000 | 0o660 | 0o110;

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
  // As upstream's setupDir, only the permission bits are made 0777 (mkdir's umask), so a
  // tmpfs keeps the sticky bit of its default 1777.
  if (((await stat(dir)).mode & 0o777) !== EMPTY_DIR_MODE) await chmod(dir, EMPTY_DIR_MODE);
  if (fsGroup === undefined) return;
  // fsGroup ownership (upstream's SetVolumeOwnership) on the volume root only: it is
  // all berth created, and walking what containers wrote would mean chowning paths
  // they control. As upstream, the mode gains group rwx and setgid (so new files
  // inherit the group) on top of what it had: 02777 on disk, 03777 on a tmpfs. A subPath
  // directory berth creates later copies this mode (subpath.ts).
  await chown(dir, -1, fsGroup);
  const mode = (await stat(dir)).mode & 0o7777;
  if ((mode | FS_GROUP_DIR_BITS) !== mode) await chmod(dir, mode | FS_GROUP_DIR_BITS);
}
