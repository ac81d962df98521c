/**
 * The files of one container log as upstream's rotation leaves them:
 * `<n>.log` (live), `<n>.log.<YYYYMMDD-HHMMSS>` (the newest rotated one, plain, so a
 * reader can finish it) and `<n>.log.<stamp>.gz` (older ones). `.tmp` files are
 * half-written archives of an interrupted compression. Shared by the rotation manager
 * and the /containerLogs reader so both agree on names and order.
 */
import { lstat, readdir, realpath } from 'node:fs/promises';
import path from 'node:path';
import { BerthError } from '../util/errors.ts';

export const COMPRESS_SUFFIX = '.gz';
export const TMP_SUFFIX = '.tmp';

/** A container log path the manager refuses to touch (symlink, or outside the root). */
export class UnsafeLogPathError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('BERTH_LOGS_UNSAFE_PATH', message, options);
  }
}

/** Upstream's rotated-file suffix (Go layout 20060102-150405), in UTC. */
export function rotationTimestamp(ms: number): string {
  const d = new Date(ms);
  const p = (n: number): string => String(n).padStart(2, '0');
  return (
    `${d.getUTCFullYear()}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}-` +
    `${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}`
  );
}

/**
 * Splits the `<log>.*` siblings into those in use (sorted oldest first, by name as
 * upstream: the stamp sorts by time) and leftovers of an interrupted rotation: temporary
 * files, and plain files whose `.gz` already exists.
 */
export function splitRotated(
  log: string,
  siblings: readonly string[],
): { inUse: string[]; unused: string[] } {
  const prefix = `${path.basename(log)}.`;
  const names = siblings.filter((s) => s.startsWith(prefix));
  const all = new Set(names);
  const inUse: string[] = [];
  const unused: string[] = [];
  for (const n of names) {
    if (n.endsWith(TMP_SUFFIX) || (!n.endsWith(COMPRESS_SUFFIX) && all.has(n + COMPRESS_SUFFIX)))
      unused.push(n);
    else inUse.push(n);
  }
  const dir = path.dirname(log);
  return {
    inUse: inUse.sort().map((n) => path.join(dir, n)),
    unused: unused.sort().map((n) => path.join(dir, n)),
  };
}

/**
 * Checks that `log` lies below `root` with no symlink on the way (its directory chain
 * resolves to itself) and is not itself a symlink. The runtime reports the path, but a
 * container with a hostPath view of its log directory could have planted a link there.
 * Returns false when the file does not exist (yet).
 */
export async function checkLogPath(log: string, root: string): Promise<boolean> {
  const abs = path.resolve(log);
  const rel = path.relative(path.resolve(root), path.dirname(abs));
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel))
    throw new UnsafeLogPathError(`Cannot manage log "${log}" as it is outside "${root}"`);
  const [realRoot, realDir] = await Promise.all([
    realpath(root),
    realpath(path.dirname(abs)).catch((err: unknown) => {
      throw new UnsafeLogPathError(`Cannot resolve the directory of log "${log}"`, { cause: err });
    }),
  ]);
  if (realDir !== path.join(realRoot, rel))
    throw new UnsafeLogPathError(
      `Cannot manage log "${log}" as its directory is reached through a symlink: resolves to "${realDir}"`,
    );
  const st = await lstat(abs).catch(() => undefined);
  if (st === undefined) return false;
  if (!st.isFile())
    throw new UnsafeLogPathError(`Cannot manage log "${log}" as it is not a regular file`);
  return true;
}

/**
 * Every in-use file of a log, oldest first, ending with the live file: what a reader
 * must read, in order. Symlinks and non-files among the rotated ones are left out.
 */
export async function allLogFiles(log: string): Promise<string[]> {
  const names = await readdir(path.dirname(log)).catch(() => []);
  const { inUse } = splitRotated(log, names);
  const files: string[] = [];
  for (const f of inUse) {
    const st = await lstat(f).catch(() => undefined);
    if (st?.isFile() === true) files.push(f);
  }
  return [...files, log];
}
