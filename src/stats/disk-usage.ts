/**
 * Filesystem numbers of one directory as upstream's pkg/volume/util/fs measures them:
 * `statFs` is fs.Info (statfs of the filesystem holding it), `diskUsage` is
 * fs.DiskUsage without project quotas (a du-style walk). The volume stats collector
 * (src/volumes/stats.ts) measures volumes with them.
 */
import { lstat, opendir, stat, statfs } from 'node:fs/promises';
import * as path from 'node:path';

/** What statfs says about the filesystem holding a directory; bytes are block counts times bsize. */
export interface StatFsInfo {
  readonly capacityBytes: number;
  readonly availableBytes: number;
  readonly usedBytes: number;
  readonly inodes: number;
  readonly inodesFree: number;
  readonly inodesUsed: number;
}

/** statfs(2) as upstream's fs.Info: block counts times the fundamental block size. */
export async function statFs(dir: string): Promise<StatFsInfo> {
  const s = await statfs(dir);
  return {
    capacityBytes: s.blocks * s.bsize,
    availableBytes: s.bavail * s.bsize,
    usedBytes: (s.blocks - s.bfree) * s.bsize,
    inodes: s.files,
    inodesFree: s.ffree,
    inodesUsed: s.files - s.ffree,
  };
}

/**
 * Upstream's fs.DiskUsage without quotas: allocated 512-byte blocks and inodes under
 * `dir`, hard links counted once, other filesystems (mounts inside) not entered, files
 * removed during the walk ignored. Checks `signal` per directory.
 */
export async function diskUsage(
  dir: string,
  signal: AbortSignal,
): Promise<{ bytes: number; inodes: number }> {
  // The top follows a symlink (upstream stats it); entries below are not followed.
  const top = await stat(dir, { bigint: true });
  const seen = new Set<bigint>();
  let bytes = 0n;
  let inodes = 0;
  const count = (st: { nlink: bigint; ino: bigint; blocks: bigint }): void => {
    if (st.nlink > 1n) {
      if (seen.has(st.ino)) return;
      seen.add(st.ino);
    }
    bytes += st.blocks * 512n;
    inodes++;
  };
  count(top);
  const pending = [dir];
  for (let d = pending.pop(); d !== undefined; d = pending.pop()) {
    signal.throwIfAborted();
    let handle;
    try {
      handle = await opendir(d);
    } catch (err) {
      if (isMissing(err)) continue;
      throw err;
    }
    for await (const entry of handle) {
      const p = path.join(d, entry.name);
      let st;
      try {
        st = await lstat(p, { bigint: true });
      } catch (err) {
        if (isMissing(err)) continue;
        throw err;
      }
      if (st.dev !== top.dev) continue;
      count(st);
      if (st.isDirectory()) pending.push(p);
    }
  }
  return { bytes: Number(bytes), inodes };
}

function isMissing(err: unknown): boolean {
  return (err as { code?: unknown }).code === 'ENOENT';
}
