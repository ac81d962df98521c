/**
 * Resolving pod-supplied relative paths (subPath, items[].path) inside a volume without
 * ever following a symlink out of it, and removing a volume tree without crossing a
 * mount point or following a symlink.
 *
 * Node has no openat(2), so each step opens `/proc/self/fd/<parent>/<name>` with
 * O_PATH|O_NOFOLLOW: the kernel resolves the parent through the descriptor (the inode
 * we already checked, whatever was renamed meanwhile) and never follows `<name>` if it
 * is a symlink. The final descriptor is handed to mount(8) as `/proc/<pid>/fd/<n>`, so
 * a symlink swapped in after the check cannot redirect the bind (CVE-2017-1002101).
 *
 * Symlink semantics (upstream evaluates symlinks and accepts targets that stay in the
 * volume): a relative symlink is followed when every step of its target stays inside
 * the root (`..` may climb back up to, never above, the root); an absolute symlink is
 * refused, since for a container-written link it names a container path, not a host
 * one. `..` elements and absolute paths in the requested path itself are refused, as
 * upstream's subPath validation does.
 */
import { constants as C } from 'node:fs';
import {
  chmod,
  lstat,
  mkdir,
  open,
  readdir,
  readlink,
  realpath,
  rmdir,
  unlink,
} from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import * as path from 'node:path';
import { mountsUnder, readMountinfo, type MountEntry } from './mounter.ts';
import { VolumeError } from './types.ts';

/** Linux O_PATH (Node does not export it): a descriptor for path operations only. */
export const O_PATH = 0o10000000;
const MAX_SYMLINK_HOPS = 40; // Linux's own MAXSYMLINKS

function errno(err: unknown): string | undefined {
  const c = (err as { code?: unknown } | null)?.code;
  return typeof c === 'string' ? c : undefined;
}

function escape(what: string, detail: string): VolumeError {
  return new VolumeError('BERTH_VOLUME_PATH_ESCAPE', `${what} ${detail}`);
}

/**
 * Splits a pod-supplied relative path into components, refusing what upstream's
 * validation refuses: an absolute path and any `..` element. Empty and `.` elements
 * are dropped. `what` names the field in the message, e.g. "subPath `a/b`".
 */
export function relativeComponents(rel: string, what: string): string[] {
  if (path.isAbsolute(rel)) throw escape(what, 'must not be an absolute path');
  const parts = rel.split('/');
  if (parts.includes('..')) throw escape(what, "must not contain '..'");
  if (rel.includes('\0')) throw escape(what, 'must not contain NUL');
  return parts.filter((p) => p !== '' && p !== '.');
}

/** An open descriptor for a path that was resolved inside its root. */
export interface SafePath {
  readonly fd: number;
  /** `/proc/<pid>/fd/<fd>`: usable by child processes (mount) while open. */
  readonly procPath: string;
  readonly isDirectory: boolean;
  close(): Promise<void>;
}

export interface SafeOpenOptions {
  /** Create missing components as directories with this mode (exact, chmod'ed). */
  readonly createMode?: number;
  /** For messages: the name of the path (default "path `<rel>`"). */
  readonly what?: string;
}

function fdPath(h: FileHandle, name?: string): string {
  return name === undefined ? `/proc/self/fd/${h.fd}` : `/proc/self/fd/${h.fd}/${name}`;
}

async function openRoot(root: string, what: string): Promise<FileHandle> {
  try {
    return await open(root, O_PATH | C.O_DIRECTORY | C.O_NOFOLLOW);
  } catch (err) {
    if (errno(err) === 'ELOOP' || errno(err) === 'ENOTDIR') {
      throw escape(what, `cannot be resolved: volume root ${root} is not a directory`);
    }
    throw new VolumeError('BERTH_VOLUME_INVALID', `Cannot open volume root ${root}`, {
      cause: err,
    });
  }
}

/** Opens `name` under `parent` without following it; creates a directory if asked. */
async function openStep(
  parent: FileHandle,
  name: string,
  createMode: number | undefined,
): Promise<FileHandle | undefined> {
  const p = fdPath(parent, name);
  try {
    return await open(p, O_PATH | C.O_NOFOLLOW);
  } catch (err) {
    if (errno(err) !== 'ENOENT' || createMode === undefined) {
      if (errno(err) === 'ENOENT') return undefined;
      throw err;
    }
  }
  let created = true;
  try {
    await mkdir(p, createMode);
  } catch (err) {
    // Somebody else created it meanwhile: the open below checks what it is.
    if (errno(err) !== 'EEXIST') throw err;
    created = false;
  }
  const h = await open(p, O_PATH | C.O_NOFOLLOW);
  // chmod (only what we made) through the descriptor's magic link: the inode we
  // opened, not a path that could be swapped meanwhile.
  if (created && (await h.stat()).isDirectory()) await chmod(fdPath(h), createMode);
  return h;
}

/**
 * Resolves `rel` inside `root` (see the file comment for the symlink rules) and returns
 * an open O_PATH descriptor for it. Throws BERTH_VOLUME_PATH_ESCAPE on `..`, absolute
 * paths and symlinks leading out of the root; BERTH_VOLUME_INVALID when a component is
 * missing (without createMode) or not a directory.
 */
export async function safeOpen(
  root: string,
  rel: string,
  options: SafeOpenOptions = {},
): Promise<SafePath> {
  const what = options.what ?? `path \`${rel}\``;
  const queue = relativeComponents(rel, what);
  const stack: FileHandle[] = [await openRoot(root, what)];
  let hops = 0;
  let ok = false;
  try {
    for (let c = queue.shift(); c !== undefined; c = queue.shift()) {
      if (c === '' || c === '.') continue;
      if (c === '..') {
        // Only symlink targets bring `..` here; climbing above the root is an escape.
        if (stack.length === 1) throw escape(what, 'resolves to a symlink outside the volume');
        await stack.pop()?.close();
        continue;
      }
      const parent = stack[stack.length - 1];
      if (parent === undefined) throw new Error('unreachable: empty stack');
      const h = await openStep(parent, c, options.createMode);
      if (h === undefined) {
        throw new VolumeError('BERTH_VOLUME_INVALID', `${what} does not exist in ${root}`);
      }
      const st = await h.stat();
      if (st.isSymbolicLink()) {
        // readlink through the parent's descriptor; whatever it says is walked with
        // the same checks, so a swap between the open and here gains nothing.
        const target = await readlink(fdPath(parent, c)).finally(() => h.close());
        if (++hops > MAX_SYMLINK_HOPS) throw escape(what, 'has too many levels of symlinks');
        if (path.isAbsolute(target)) {
          throw escape(what, `is a symlink to an absolute path (${target})`);
        }
        queue.unshift(...target.split('/'));
        continue;
      }
      if (!st.isDirectory() && queue.some((q) => q !== '' && q !== '.')) {
        await h.close();
        throw new VolumeError('BERTH_VOLUME_INVALID', `${what}: ${c} is not a directory`);
      }
      stack.push(h);
    }
    const last = stack[stack.length - 1];
    if (last === undefined) throw new Error('unreachable: empty stack');
    const st = await last.stat();
    ok = true;
    for (const h of stack.slice(0, -1)) await h.close();
    let closed = false;
    return {
      fd: last.fd,
      procPath: `/proc/${process.pid}/fd/${last.fd}`,
      isDirectory: st.isDirectory(),
      close: async () => {
        if (closed) return;
        closed = true;
        await last.close();
      },
    };
  } finally {
    if (!ok) for (const h of stack) await h.close().catch(() => undefined);
  }
}

export interface SafeRemoveOptions {
  /** Mount table source (default /proc/self/mountinfo); tests inject the fake's. */
  readonly listMounts?: () => Promise<MountEntry[]>;
}

function mountedBelow(root: string, what: string): VolumeError {
  return new VolumeError(
    'BERTH_VOLUME_MOUNT_FAILED',
    `Cannot remove ${root}: ${what} is a mount point`,
  );
}

async function removeChildren(dir: FileHandle, dev: number, root: string): Promise<void> {
  for (const name of await readdir(fdPath(dir))) {
    const p = fdPath(dir, name);
    const st = await lstat(p);
    if (!st.isDirectory()) {
      // unlink never follows the last component: a symlink goes, its target stays.
      await unlink(p);
      continue;
    }
    if (st.dev !== dev) throw mountedBelow(root, name);
    // A directory swapped for a symlink since the lstat fails here (ELOOP/ENOTDIR).
    const child = await open(p, C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW);
    try {
      if ((await child.stat()).dev !== dev) throw mountedBelow(root, name);
      await removeChildren(child, dev, root);
    } finally {
      await child.close();
    }
    await rmdir(p);
  }
}

/**
 * Removes `root` and everything below it. Refuses (BERTH_VOLUME_MOUNT_FAILED) when a
 * mount point is at or below `root`, or a directory on another device is met; never
 * follows a symlink (they are unlinked). A missing root is not an error.
 */
export async function safeRemoveAll(root: string, options: SafeRemoveOptions = {}): Promise<void> {
  let st;
  try {
    st = await lstat(root);
  } catch (err) {
    if (errno(err) === 'ENOENT') return;
    throw err;
  }
  if (!st.isDirectory()) {
    await unlink(root);
    return;
  }
  const real = await realpath(root);
  const table = await (options.listMounts ?? readMountinfo)();
  const mounts = [...mountsUnder(table, real), ...mountsUnder(table, root)];
  const first = mounts[0];
  if (first !== undefined) throw mountedBelow(root, first.mountPoint);
  const h = await open(root, C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW);
  try {
    await removeChildren(h, (await h.stat()).dev, root);
  } finally {
    await h.close();
  }
  await rmdir(root);
}
