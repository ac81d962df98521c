/**
 * subPath and subPathExpr mounts. The subPath is resolved inside the volume through
 * descriptors (safe-path.ts) and the resolved inode is bind-mounted to
 * `<rootDir>/pods/<uid>/volume-subpaths/<volume>/<container>/<mountIndex>`; CRI gets
 * that path, so a symlink a container swaps in later cannot redirect the mount
 * (upstream's fix for CVE-2017-1002101).
 */
import { mkdir, open, rmdir, unlink, lstat, stat } from 'node:fs/promises';
import * as path from 'node:path';
import type { Mounter } from './mounter.ts';
import { relativeComponents, safeOpen } from './safe-path.ts';

/**
 * Expands `$(VAR)` from `env` as upstream's expansion does: unknown variables stay
 * literally, `$$` is an escaped `$`.
 */
export function expandSubPathExpr(expr: string, env: ReadonlyMap<string, string>): string {
  return expr.replace(/\$\$|\$\(([^)]*)\)/g, (m, name: string | undefined) => {
    if (m === '$$') return '$';
    return name !== undefined && env.has(name) ? (env.get(name) ?? '') : m;
  });
}

/**
 * Checks a subPath as upstream's makeMounts does (no absolute path, no `..` element).
 * Throws BERTH_VOLUME_PATH_ESCAPE.
 */
export function validateSubPath(subPath: string): void {
  relativeComponents(subPath, `subPath \`${subPath}\``);
}

export interface BindSubPathOptions {
  /** The volume's host directory (the root nothing may escape). */
  readonly volumePath: string;
  readonly subPath: string;
  /** Where the bind goes: .../volume-subpaths/<volume>/<container>/<index>. */
  readonly target: string;
  /**
   * Create missing directories of the subPath (writable volumes), each with the volume
   * root's mode, setgid and sticky bits included, as upstream's SafeMakeDir: in an fsGroup
   * emptyDir that is 02777 (03777 on a tmpfs) and the group is inherited, so the
   * container's fsGroup can write there; a 0755 directory would leave it root's alone.
   */
  readonly create: boolean;
  readonly mounter: Mounter;
  readonly signal?: AbortSignal;
}

async function prepareTarget(target: string, isDirectory: boolean): Promise<void> {
  await mkdir(path.dirname(target), { recursive: true, mode: 0o750 });
  const st = await lstat(target).catch(() => undefined);
  if (st !== undefined && st.isDirectory() !== isDirectory) {
    // A leftover of the other kind (the subPath changed type): bind needs a match.
    if (st.isDirectory()) await rmdir(target);
    else await unlink(target);
  } else if (st !== undefined) {
    return;
  }
  if (isDirectory) {
    await mkdir(target, { mode: 0o750 });
  } else {
    const h = await open(target, 'a', 0o640);
    await h.close();
  }
}

/**
 * Resolves and bind-mounts one subPath, returning the host path for CRI. An existing
 * bind on `target` is reused: a restarted container keeps what it had, and unmounting
 * would propagate into containers sharing the mount (HostToContainer/Bidirectional).
 */
export async function bindSubPath(options: BindSubPathOptions): Promise<string> {
  const { mounter, target, signal } = options;
  validateSubPath(options.subPath);
  if (await mounter.isMountPoint(target)) return target;
  const resolved = await safeOpen(options.volumePath, options.subPath, {
    what: `subPath \`${options.subPath}\``,
    ...(options.create ? { createMode: (await stat(options.volumePath)).mode & 0o7777 } : {}),
  });
  try {
    await prepareTarget(target, resolved.isDirectory);
    await mounter.bindMount(resolved.procPath, target, { readOnly: false }, signal);
  } finally {
    await resolved.close();
  }
  return target;
}
