/**
 * A stopped container's termination message, as upstream reads it: the end of the file
 * berth mounted at terminationMessagePath (found again through the container's mounts
 * in ContainerStatus), at most 4 KiB; with FallbackToLogsOnError and a failed, silent
 * container, the end of its log instead: the last 80 records rendered as `kubectl logs`
 * renders them (a partial record, such as the output of `echo -n`, without a newline
 * added), at most their last 2 KiB.
 *
 * The host file is opened with O_NOFOLLOW and read only up to the limit, so a container
 * cannot make berth read a host file or an unbounded amount of data.
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import type { cri } from '../cri/index.ts';
import { CriLogParser, type LogRecord, renderContent } from '../logs/cri-format.ts';
import { parseContainerAnnotations } from '../container/labels.ts';

/** Upstream's MaxContainerTerminationMessageLength. */
export const MAX_TERMINATION_MESSAGE_BYTES = 4096;
/** Upstream's fallback limits: the last 80 log records, at most 2048 bytes. */
export const FALLBACK_LOG_LINES = 80;
export const FALLBACK_LOG_BYTES = 2048;

/** The last `max` bytes of the file, as upstream's tail.ReadAtMost. */
async function readTail(path: string, max: number): Promise<Buffer> {
  const fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const st = await fh.stat();
    if (!st.isFile()) return Buffer.alloc(0);
    const length = Math.min(st.size, max);
    const buf = Buffer.alloc(length);
    const { bytesRead } = await fh.read(buf, 0, length, st.size - length);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

/**
 * The last `records` log records rendered without timestamps, trimmed to their last
 * `bytes` bytes (upstream's ReadLogs with TailLines into a ring buffer).
 */
export async function logTail(path: string, records: number, bytes: number): Promise<string> {
  const fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const st = await fh.stat();
    if (!st.isFile()) return '';
    // A record carries ~40 bytes of timestamp and tags besides its content: this much of
    // the end holds the last `records` records, or more than `bytes` of their content.
    const window = Math.min(st.size, bytes * 4 + records * 64);
    const buf = Buffer.alloc(window);
    const { bytesRead } = await fh.read(buf, 0, window, st.size - window);
    let data = buf.subarray(0, bytesRead);
    // Unless we read from the start, the first line is cut: drop it.
    if (window < st.size) {
      const nl = data.indexOf(0x0a);
      data = nl < 0 ? Buffer.alloc(0) : data.subarray(nl + 1);
    }
    const parser = new CriLogParser();
    const complete = parser.push(data);
    const tail: LogRecord[] = complete.slice(-records);
    // A last record without its newline counts only when fewer records precede it:
    // upstream stops after `records` whole ones.
    const last = parser.incomplete();
    if (last !== undefined && complete.length < records) tail.push(last);
    const text = renderContent(tail);
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
      message = (await readTail(mount.hostPath, MAX_TERMINATION_MESSAGE_BYTES)).toString('utf8');
    } catch {
      // Missing or replaced by something that is not a regular file: no message.
      message = '';
    }
  }
  if (
    message === '' &&
    annotations.terminationMessagePolicy === 'FallbackToLogsOnError' &&
    status.exitCode !== 0 &&
    // A container that could not even start has no log to fall back to.
    status.reason !== 'ContainerCannotRun' &&
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
