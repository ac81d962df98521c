/**
 * maxOpenFiles: upstream's rlimit.SetNumFiles, which sets RLIMIT_NOFILE's soft and hard
 * limits for the kubelet process. Node has no setrlimit, so util-linux's prlimit (on
 * every node that has mount) sets them on berth's own pid; a failure is logged and
 * berth goes on, as upstream does.
 */
import { execFile } from 'node:child_process';

/** Runs a program; rejects with its stderr on a non-zero exit. */
export type Runner = (file: string, args: readonly string[], signal: AbortSignal) => Promise<void>;

export const execRunner: Runner = (file, args, signal) =>
  new Promise((resolve, reject) => {
    execFile(file, args, { signal, timeout: 10_000 }, (err, _stdout, stderr) => {
      if (err === null) resolve();
      else reject(new Error(`${file} ${args.join(' ')}: ${stderr.trim() || err.message}`));
    });
  });

/** Sets RLIMIT_NOFILE of `pid` to `limit` (soft and hard). */
export async function setOpenFilesLimit(
  limit: number,
  signal: AbortSignal,
  options: { pid?: number; run?: Runner } = {},
): Promise<void> {
  const pid = options.pid ?? process.pid;
  const n = String(Math.trunc(limit));
  await (options.run ?? execRunner)(
    'prlimit',
    ['--pid', String(pid), `--nofile=${n}:${n}`],
    signal,
  );
}
