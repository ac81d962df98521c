/**
 * A stopped container's termination message, as upstream reads it: the file berth
 * mounted at terminationMessagePath (found again through the container's mounts in
 * ContainerStatus), at most 4 KiB; with FallbackToLogsOnError and a failed, silent
 * container, the tail of its log (80 lines, 2 KiB) instead.
 *
 * The host file is opened with O_NOFOLLOW and read only up to the limit, so a container
 * cannot make berth read a host file or an unbounded amount of data.
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import type { cri } from '../cri/index.ts';
import { CriLogParser, lineContent } from '../server/logs.ts';
import { parseContainerAnnotations } from './labels.ts';

/** Upstream's MaxContainerTerminationMessageLength. */
export const MAX_TERMINATION_MESSAGE_BYTES = 4096;
/** Upstream's fallback limits: the last 80 log lines, at most 2048 bytes. */
export const FALLBACK_LOG_LINES = 80;
export const FALLBACK_LOG_BYTES = 2048;

async function readHead(path: string, max: number): Promise<Buffer> {
  const fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    if (!(await fh.stat()).isFile()) return Buffer.alloc(0);
    const buf = Buffer.alloc(max);
    const { bytesRead } = await fh.read(buf, 0, max, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

/** The content of the last `lines` log lines, trimmed to the last `bytes` bytes. */
export async function logTail(path: string, lines: number, bytes: number): Promise<string> {
  const fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const st = await fh.stat();
    if (!st.isFile()) return '';
    // CRI lines carry ~40 bytes of timestamp and tags; read enough of the end for both limits.
    const window = Math.min(st.size, bytes * 4 + lines * 64);
    const buf = Buffer.alloc(window);
    const { bytesRead } = await fh.read(buf, 0, window, st.size - window);
    let data = buf.subarray(0, bytesRead);
    // Unless we read from the start, the first line is cut: drop it.
    if (window < st.size) {
      const nl = data.indexOf(0x0a);
      data = nl < 0 ? Buffer.alloc(0) : data.subarray(nl + 1);
    }
    const parsed = new CriLogParser().push(data);
    const newline = Buffer.from('\n');
    const text = Buffer.concat(parsed.slice(-lines).flatMap((l) => [lineContent(l), newline]));
    return text.subarray(Math.max(0, text.length - bytes)).toString('utf8');
  } finally {
    await fh.close();
  }
}

/** The message to show for an exited container ('' when there is none). */
export async function terminationMessage(status: cri.ContainerStatus): Promise<string> {
  const annotations = parseContainerAnnotations(status.annotations);
  const path = annotations.terminationMessagePath;
  let message = '';
  const mount = path === '' ? undefined : status.mounts.find((m) => m.containerPath === path);
  if (mount !== undefined && mount.hostPath !== '') {
    try {
      message = (await readHead(mount.hostPath, MAX_TERMINATION_MESSAGE_BYTES)).toString('utf8');
    } catch {
      // Missing or replaced by something that is not a regular file: no message.
      message = '';
    }
  }
  if (
    message === '' &&
    annotations.terminationMessagePolicy === 'FallbackToLogsOnError' &&
    status.exitCode !== 0 &&
    status.logPath !== ''
  ) {
    try {
      message = await logTail(status.logPath, FALLBACK_LOG_LINES, FALLBACK_LOG_BYTES);
    } catch {
      message = '';
    }
  }
  return message;
}
