/**
 * Container logs as `kubectl logs` shows them, read from the CRI log files the runtime
 * writes: each file line is `<RFC3339Nano> <stdout|stderr> <P|F> <content>`, where P
 * marks a fragment of a longer line that continues in the next file line.
 */
import { once } from 'node:events';
import { constants, type FileHandle, open } from 'node:fs/promises';
import type { Writable } from 'node:stream';
import type { Clock } from '../util/clock.ts';
import { BerthError, isAborted } from '../util/errors.ts';

/** What the caller asked for (PodLogOptions, already validated). */
export interface LogOptions {
  readonly follow: boolean;
  readonly timestamps: boolean;
  /** Last N lines only. */
  readonly tailLines?: number;
  /** Stop after this many bytes of output. */
  readonly limitBytes?: number;
  /** Lines older than this (ms since the epoch) are skipped. */
  readonly sinceMs?: number;
}

/** A log line rebuilt from its fragments. */
interface LogLine {
  readonly timestamp: string;
  readonly timeMs: number;
  readonly content: Buffer;
}

/** The log file cannot be opened safely (missing, or a symlink). */
export class LogFileError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('BERTH_SERVER_LOG_FILE', message, options);
  }
}

/** RFC3339Nano to milliseconds; Date.parse does not promise more than 3 fraction digits. */
function parseTimeMs(ts: string): number {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$/.exec(ts);
  if (m === null) return Number.NaN;
  const frac = (m[2] ?? '.0').slice(0, 4);
  return Date.parse(`${m[1] ?? ''}${frac}${m[3] ?? 'Z'}`);
}

/** Incremental parser: file bytes in, whole log lines out (partials joined). */
export class CriLogParser {
  #rest: Buffer = Buffer.alloc(0);
  #partial: Buffer[] = [];
  #partialTs: string | undefined;

  /** Feeds bytes; returns the lines they complete. */
  push(chunk: Buffer): LogLine[] {
    const data = this.#rest.length === 0 ? chunk : Buffer.concat([this.#rest, chunk]);
    const out: LogLine[] = [];
    let start = 0;
    for (;;) {
      const nl = data.indexOf(0x0a, start);
      if (nl < 0) break;
      const line = this.#parseFileLine(data.subarray(start, nl));
      if (line !== undefined) out.push(line);
      start = nl + 1;
    }
    this.#rest = Buffer.from(data.subarray(start));
    return out;
  }

  #parseFileLine(raw: Buffer): LogLine | undefined {
    const s1 = raw.indexOf(0x20);
    const s2 = s1 < 0 ? -1 : raw.indexOf(0x20, s1 + 1);
    if (s2 < 0) return undefined; // not a CRI line: skipped, as upstream does
    const timestamp = raw.subarray(0, s1).toString();
    const s3 = raw.indexOf(0x20, s2 + 1);
    const tags = raw.subarray(s2 + 1, s3 < 0 ? raw.length : s3).toString();
    const content = s3 < 0 ? Buffer.alloc(0) : raw.subarray(s3 + 1);
    const partial = tags.split(':').includes('P');
    this.#partialTs ??= timestamp;
    this.#partial.push(Buffer.from(content));
    if (partial) return undefined;
    const first = this.#partialTs;
    const line = {
      timestamp: first,
      timeMs: parseTimeMs(first),
      content: Buffer.concat([...this.#partial, Buffer.from('\n')]),
    };
    this.#partial = [];
    this.#partialTs = undefined;
    return line;
  }
}

/** Opens a log file for reading without following a symlink at its last component. */
export async function openLogFile(path: string): Promise<FileHandle> {
  try {
    return await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    throw new LogFileError(`Cannot open the container log as it is missing or not a regular file`, {
      cause: err,
    });
  }
}

export interface StreamLogsOptions extends LogOptions {
  readonly clock: Clock;
  readonly signal: AbortSignal;
  /** For follow: whether the container still runs (following ends once it stopped). */
  readonly isRunning: () => Promise<boolean>;
  /** Follow poll period (default 250 ms). */
  readonly pollMs?: number;
}

/** Writes the log file's lines to `out` as requested; resolves when done (or aborted). */
export async function streamLogs(
  file: FileHandle,
  out: Writable,
  o: StreamLogsOptions,
): Promise<void> {
  const parser = new CriLogParser();
  let offset = 0;
  let budget = o.limitBytes ?? Number.POSITIVE_INFINITY;
  const buf = Buffer.alloc(64 * 1024);

  const readAvailable = async (): Promise<LogLine[]> => {
    const lines: LogLine[] = [];
    for (;;) {
      const { bytesRead } = await file.read(buf, 0, buf.length, offset);
      if (bytesRead === 0) return lines;
      offset += bytesRead;
      lines.push(...parser.push(buf.subarray(0, bytesRead)));
    }
  };
  const write = async (lines: readonly LogLine[]): Promise<void> => {
    for (const line of lines) {
      if (budget <= 0 || isAborted(o.signal)) return;
      if (o.sinceMs !== undefined && line.timeMs < o.sinceMs) continue;
      let bytes = o.timestamps
        ? Buffer.concat([Buffer.from(`${line.timestamp} `), line.content])
        : line.content;
      if (bytes.length > budget) bytes = bytes.subarray(0, budget);
      budget -= bytes.length;
      if (!out.write(bytes)) await once(out, 'drain', { signal: o.signal });
    }
  };

  let first = await readAvailable();
  if (o.sinceMs !== undefined) {
    const since = o.sinceMs;
    first = first.filter((l) => l.timeMs >= since);
  }
  if (o.tailLines !== undefined) first = o.tailLines === 0 ? [] : first.slice(-o.tailLines);
  await write(first);
  if (!o.follow) return;
  const pollMs = o.pollMs ?? 250;
  let idle = 0;
  while (budget > 0 && !isAborted(o.signal)) {
    try {
      await o.clock.sleep(pollMs, o.signal);
    } catch {
      return; // aborted: the client went away
    }
    const lines = await readAvailable();
    if (lines.length > 0) {
      idle = 0;
      await write(lines);
      continue;
    }
    // Check the runtime only about once a second while the file is quiet.
    idle += pollMs;
    if (idle >= 1000) {
      idle = 0;
      if (!(await o.isRunning())) {
        await write(await readAvailable());
        return;
      }
    }
  }
}
