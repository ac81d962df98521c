/**
 * hostPath volumes: the host path is handed to CRI as is (no per-pod directory), after
 * the type check upstream does in its hostPath plugin.
 */
import { mkdir, open, stat } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import * as path from 'node:path';
import { VolumeError } from './types.ts';

export type HostPathType =
  | ''
  | 'DirectoryOrCreate'
  | 'Directory'
  | 'FileOrCreate'
  | 'File'
  | 'Socket'
  | 'CharDevice'
  | 'BlockDevice';

const TYPES: ReadonlySet<string> = new Set([
  '',
  'DirectoryOrCreate',
  'Directory',
  'FileOrCreate',
  'File',
  'Socket',
  'CharDevice',
  'BlockDevice',
]);

function errno(err: unknown): string | undefined {
  const c = (err as { code?: unknown } | null)?.code;
  return typeof c === 'string' ? c : undefined;
}

function failed(p: string, what: string): VolumeError {
  return new VolumeError(
    'BERTH_VOLUME_HOSTPATH_TYPE',
    `hostPath type check failed: ${p} is not ${what}`,
  );
}

/** API validation's rules for hostPath.path: absolute, no `..` element. */
export function validateHostPath(p: string): void {
  if (!path.isAbsolute(p)) {
    throw new VolumeError(
      'BERTH_VOLUME_INVALID',
      `hostPath ${JSON.stringify(p)} must be an absolute path`,
    );
  }
  if (p.split('/').includes('..')) {
    throw new VolumeError(
      'BERTH_VOLUME_INVALID',
      `hostPath ${JSON.stringify(p)} must not contain '..'`,
    );
  }
}

async function statOrUndefined(p: string): Promise<Stats | undefined> {
  try {
    // stat, not lstat: upstream's checks follow symlinks on the host path, which the
    // pod author (not a container) chose.
    return await stat(p);
  } catch (err) {
    if (errno(err) === 'ENOENT') return undefined;
    throw new VolumeError(
      'BERTH_VOLUME_HOSTPATH_TYPE',
      `hostPath type check failed: cannot stat ${p}`,
      {
        cause: err,
      },
    );
  }
}

/**
 * Checks (and for the *OrCreate types creates) `p` as upstream does: DirectoryOrCreate
 * makes it and its parents 0755, FileOrCreate makes an empty 0644 file (its parent must
 * exist), unset checks nothing. Throws BERTH_VOLUME_HOSTPATH_TYPE.
 */
export async function checkHostPathType(p: string, type: string | undefined): Promise<void> {
  validateHostPath(p);
  const t = type ?? '';
  if (!TYPES.has(t)) {
    throw new VolumeError(
      'BERTH_VOLUME_INVALID',
      `hostPath type ${JSON.stringify(t)} is not supported`,
    );
  }
  const ht = t as HostPathType;
  if (ht === '') return;
  const st = await statOrUndefined(p);
  switch (ht) {
    case 'DirectoryOrCreate':
      if (st === undefined) {
        await mkdir(p, { recursive: true, mode: 0o755 });
        return;
      }
      if (!st.isDirectory()) throw failed(p, 'a directory');
      return;
    case 'Directory':
      if (st?.isDirectory() !== true) throw failed(p, 'a directory');
      return;
    case 'FileOrCreate':
      if (st === undefined) {
        await createFile(p);
        return;
      }
      if (!st.isFile()) throw failed(p, 'a file');
      return;
    case 'File':
      if (st?.isFile() !== true) throw failed(p, 'a file');
      return;
    case 'Socket':
      if (st?.isSocket() !== true) throw failed(p, 'a socket file');
      return;
    case 'CharDevice':
      if (st?.isCharacterDevice() !== true) throw failed(p, 'a character device');
      return;
    case 'BlockDevice':
      if (st?.isBlockDevice() !== true) throw failed(p, 'a block device');
      return;
  }
}

async function createFile(p: string): Promise<void> {
  const parent = await statOrUndefined(path.dirname(p));
  if (parent?.isDirectory() !== true) {
    throw new VolumeError(
      'BERTH_VOLUME_HOSTPATH_TYPE',
      `hostPath type check failed: cannot create ${p}: parent directory does not exist`,
    );
  }
  // O_CREAT without O_TRUNC: a file created meanwhile by someone else is kept as is.
  const h = await open(p, 'a', 0o644);
  await h.close();
}
