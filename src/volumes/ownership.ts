/**
 * fsGroup ownership of a volume's files, as upstream's SetVolumeOwnership
 * (pkg/volume/volume_linux.go): every entry gets the group `fsGroup` (lchown, so a
 * symlink's target outside the volume is never touched), files gain group rw (r only on
 * a read-only volume) and directories also setgid and group exec, so files the
 * container creates later inherit the group. `OnRootMismatch` skips the walk when the
 * root already has the group and the bits, which is what makes it cheap on large
 * volumes; `Always` (the default) walks every time.
 */
import type { Dirent } from 'node:fs';
import { chmod, lchown, lstat, opendir } from 'node:fs/promises';
import * as path from 'node:path';

const RW_MASK = 0o660;
const RO_MASK = 0o440;
const EXEC_MASK = 0o110;
const SETGID = 0o2000;

export type FsGroupChangePolicy = 'Always' | 'OnRootMismatch';

export interface OwnershipOptions {
  readonly fsGroup: number;
  readonly readOnly?: boolean;
  /** The pod's securityContext.fsGroupChangePolicy (default Always). */
  readonly policy?: string | undefined;
  readonly signal?: AbortSignal;
}

function maskFor(isDir: boolean, readOnly: boolean): number {
  const base = readOnly ? RO_MASK : RW_MASK;
  return isDir ? base | EXEC_MASK | SETGID : base;
}

/** True when the root already carries the group and every bit the walk would add. */
async function rootMatches(root: string, o: OwnershipOptions): Promise<boolean> {
  const st = await lstat(root);
  if (st.gid !== o.fsGroup) return false;
  const mask = maskFor(st.isDirectory(), o.readOnly === true);
  return (st.mode & mask) === mask;
}

async function changeOne(p: string, o: OwnershipOptions): Promise<void> {
  const st = await lstat(p);
  if (st.gid !== o.fsGroup) await lchown(p, -1, o.fsGroup);
  if (st.isSymbolicLink()) return;
  const mask = maskFor(st.isDirectory(), o.readOnly === true);
  // chown clears setgid on some filesystems: apply the mode after it, always from lstat.
  if ((st.mode & mask) !== mask || st.gid !== o.fsGroup) await chmod(p, (st.mode & 0o7777) | mask);
}

/**
 * Applies fsGroup ownership under `root` (root included). Returns false when
 * OnRootMismatch found nothing to do.
 */
export async function setVolumeOwnership(root: string, o: OwnershipOptions): Promise<boolean> {
  if (o.policy === 'OnRootMismatch' && (await rootMatches(root, o))) return false;
  const stack = [root];
  for (let p = stack.pop(); p !== undefined; p = stack.pop()) {
    o.signal?.throwIfAborted();
    await changeOne(p, o);
    const st = await lstat(p);
    if (!st.isDirectory()) continue;
    const dir = await opendir(p);
    for await (const entry of dir as AsyncIterable<Dirent>) {
      stack.push(path.join(p, entry.name));
    }
  }
  return true;
}
