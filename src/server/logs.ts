/**
 * Container logs as `kubectl logs` shows them, read from the CRI log files the runtime
 * writes (the format and how its records render: src/logs/cri-format.ts).
 *
 * A rotated log (src/logs) is read as one stream: the rotated files oldest first
 * (gunzipped), then the live file. Upstream reads only the live file unless following;
 * berth reads them all so `--tail`, `--since` and `--limit-bytes` see every line still
 * on disk. Following survives a rotation: when the path names a new inode, the old
 * descriptor is read to its end before the new file is opened, so no line is lost or
 * repeated.
 */
import { once } from 'node:events';
import { createReadStream } from 'node:fs';
import { constants, type FileHandle, lstat, open } from 'node:fs/promises';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { CriLogParser, fixedTimestamp, type LogRecord, recordTimeMs } from '../logs/cri-format.ts';
import { allLogFiles, COMPRESS_SUFFIX, rotationTimestamp } from '../logs/files.ts';
import type { Clock } from '../util/clock.ts';
import { LogWakeup } from './log-wakeup.ts';
import { BerthError, isAborted } from '../util/errors.ts';

/** What the caller asked for (PodLogOptions, already validated). */
export interface LogOptions {
  readonly follow: boolean;
  readonly timestamps: boolean;
  /** Start at the last N records (file lines; a partial record counts as one). */
  readonly tailLines?: number;
  /** Stop after this many bytes of output. */
  readonly limitBytes?: number;
  /** Records older than this (ms since the epoch) are skipped. */
  readonly sinceMs?: number;
}

/** The log file cannot be opened safely (missing, or a symlink). */
export class LogFileError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('BERTH_SERVER_LOG_FILE', message, options);
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
  /**
   * Called whenever following waits for more lines: an HTTP caller sends its response
   * headers then if nothing was written yet, and otherwise lets them go out with the
   * first lines, in one TLS record instead of two.
   */
  readonly beforeWait?: () => void;
}

interface RotatedFile {
  readonly fh: FileHandle;
  readonly gzip: boolean;
}

/**
 * The open files of one container log. Every file is opened up front (O_NOFOLLOW): a
 * descriptor outlives the rename, compression or removal rotation does meanwhile.
 */
export class ContainerLogFiles {
  /** The live path, for noticing a rotation while following; undefined: never reopened. */
  readonly path: string | undefined;
  readonly rotated: readonly RotatedFile[];
  #live: FileHandle;
  readonly #owned: FileHandle[];
  #liveSinceMs: number;

  private constructor(
    path: string | undefined,
    rotated: RotatedFile[],
    live: FileHandle,
    owned: FileHandle[],
    liveSinceMs: number,
  ) {
    this.#liveSinceMs = liveSinceMs;
    this.path = path;
    this.rotated = rotated;
    this.#live = live;
    this.#owned = owned;
  }

  /** One file the caller opened and closes; no rotated files, no reopening. */
  static single(file: FileHandle): ContainerLogFiles {
    return new ContainerLogFiles(undefined, [], file, [], 0);
  }

  /**
   * Opens the live file, then the rotated ones. The live file comes first: if a
   * rotation happens in between, it shows up among the rotated names and is skipped by
   * inode rather than read twice. Throws LogFileError when the live file cannot be
   * opened as a regular file.
   */
  static async open(path: string, nowMs: number): Promise<ContainerLogFiles> {
    const live = await openLogFile(path);
    const owned = [live];
    try {
      const st = await live.stat();
      if (!st.isFile()) throw new LogFileError('Cannot read the container log: not a regular file');
      const rotated: RotatedFile[] = [];
      for (const name of (await allLogFiles(path)).slice(0, -1)) {
        const r = await openRotated(name);
        if (r === undefined) continue;
        owned.push(r.fh);
        const rs = await r.fh.stat();
        if (!rs.isFile() || (rs.ino === st.ino && rs.dev === st.dev)) continue;
        rotated.push(r);
      }
      return new ContainerLogFiles(path, rotated, live, owned, nowMs);
    } catch (err) {
      await Promise.all(owned.map((f) => f.close()));
      throw err;
    }
  }

  get live(): FileHandle {
    return this.#live;
  }

  /**
   * After a rotation: the files rotated since the one being read (oldest first, the
   * reader may be several rotations behind, e.g. slowed by its client) and the new live
   * file. undefined while the path still names the file being read, or while the
   * runtime has not created the new one yet. `nowMs`: when the new live file is taken
   * up, which bounds the stamp of its own rotation later.
   */
  async reopenIfRotated(
    nowMs: number,
  ): Promise<{ rotated: RotatedFile[]; live: FileHandle } | undefined> {
    if (this.path === undefined) return undefined;
    const [now, cur] = await Promise.all([
      lstat(this.path).catch(() => undefined),
      this.#live.stat(),
    ]);
    if (now?.isFile() !== true || (now.ino === cur.ino && now.dev === cur.dev)) return undefined;
    const live = await openLogFile(this.path).catch(() => undefined);
    if (live === undefined) return undefined;
    this.#owned.push(live);
    const names = (await allLogFiles(this.path)).slice(0, -1);
    // The file being read is among them under its rotated name: found by inode while it
    // is plain; once compressed (a new inode) by its stamp, the first one not older than
    // the moment it became the live file.
    let mine = -1;
    for (const [i, n] of names.entries()) {
      const st = await lstat(n).catch(() => undefined);
      if (st?.ino === cur.ino && st.dev === cur.dev) mine = i;
    }
    if (mine < 0) {
      const since = rotationTimestamp(this.#liveSinceMs);
      mine = names.findIndex((n) => stampOf(n) >= since);
      if (mine < 0) mine = names.length;
    }
    const rotated: RotatedFile[] = [];
    for (const n of names.slice(mine + 1)) {
      const r = await openRotated(n);
      if (r === undefined) continue;
      this.#owned.push(r.fh);
      const st = await r.fh.stat();
      if (st.isFile() && !(st.ino === now.ino && st.dev === now.dev)) rotated.push(r);
    }
    this.#live = live;
    this.#liveSinceMs = nowMs;
    return { rotated, live };
  }

  /** Closes a file read to its end (the old live file after a rotation). */
  async release(file: FileHandle): Promise<void> {
    const i = this.#owned.indexOf(file);
    if (i < 0) return;
    this.#owned.splice(i, 1);
    await file.close().catch(() => undefined);
  }

  /** Closes what this object opened. Idempotent. */
  async close(): Promise<void> {
    const files = this.#owned.splice(0);
    await Promise.all(files.map((f) => f.close().catch(() => undefined)));
  }
}

/** A rotated file, or its archive when compression renamed it meanwhile. */
async function openRotated(name: string): Promise<RotatedFile | undefined> {
  for (const candidate of name.endsWith(COMPRESS_SUFFIX)
    ? [name]
    : [name, name + COMPRESS_SUFFIX]) {
    const fh = await open(candidate, constants.O_RDONLY | constants.O_NOFOLLOW).catch(
      () => undefined,
    );
    if (fh !== undefined) return { fh, gzip: candidate.endsWith(COMPRESS_SUFFIX) };
  }
  return undefined;
}

/** The `YYYYMMDD-HHMMSS` of a rotated file's name ('' when it has none). */
function stampOf(name: string): string {
  return /\.(\d{8}-\d{6})(?:\.gz)?$/.exec(name)?.[1] ?? '';
}

function rotatedStream(r: RotatedFile): Readable {
  const raw = createReadStream('', { fd: r.fh, autoClose: false, start: 0 });
  return r.gzip ? raw.pipe(createGunzip()) : raw;
}

/** The last `n` items pushed, in order, without holding more than `n`. */
class Ring<T> {
  readonly #items: T[] = [];
  readonly #n: number;
  #next = 0;
  constructor(n: number) {
    this.#n = n;
  }
  push(item: T): void {
    if (this.#n === 0) return;
    if (this.#items.length < this.#n) this.#items.push(item);
    else this.#items[this.#next] = item;
    this.#next = (this.#next + 1) % this.#n;
  }
  /** Whether `n` items are held (more may have been pushed). */
  get full(): boolean {
    return this.#items.length === this.#n;
  }
  drain(): T[] {
    const out =
      this.#items.length < this.#n
        ? [...this.#items]
        : [...this.#items.slice(this.#next), ...this.#items.slice(0, this.#next)];
    this.#items.length = 0;
    this.#next = 0;
    return out;
  }
}

const SPACE = 0x20;
const NEWLINE = 0x0a;

/** Writes a container log (rotated files, then the live one, then followed) to `out`. */
export async function streamLogFiles(
  files: ContainerLogFiles,
  out: Writable,
  o: StreamLogsOptions,
): Promise<void> {
  // One parser across files: a partial record may continue in the next file.
  const parser = new CriLogParser();
  let budget = o.limitBytes ?? Number.POSITIVE_INFINITY;
  const done = (): boolean => budget <= 0 || isAborted(o.signal);
  const buf = Buffer.alloc(64 * 1024);
  let live = files.live;
  let offset = 0;

  const readAvailable = async (): Promise<LogRecord[]> => {
    const records: LogRecord[] = [];
    for (;;) {
      const { bytesRead } = await live.read(buf, 0, buf.length, offset);
      if (bytesRead === 0) return records;
      offset += bytesRead;
      records.push(...parser.push(buf.subarray(0, bytesRead)));
    }
  };
  // Whether the next record written starts an output line, and so gets the timestamp.
  // Like upstream's, it follows every record read, also those --since skips.
  let lineStart = true;
  // Records are written in batches of about this many bytes: one write per record made
  // a chunk of the HTTP response (and a TLS record) per line.
  const BATCH = 64 * 1024;
  const write = async (records: readonly LogRecord[]): Promise<void> => {
    let batch: LogRecord[] = [];
    // Per record in the batch: its timestamp prefix when it gets one (null: none,
    // undefined: the stored bytes), as upstream prints it.
    let stamps: (string | undefined | null)[] = [];
    let size = 0;
    const flush = async (cut: number): Promise<void> => {
      if (batch.length === 0) return;
      const bytes = Buffer.allocUnsafe(size);
      let at = 0;
      for (const [i, r] of batch.entries()) {
        const stamp = stamps[i];
        if (stamp !== null) {
          at +=
            stamp === undefined
              ? r.data.copy(bytes, at, r.tsStart, r.tsEnd)
              : bytes.write(stamp, at, 'latin1');
          bytes[at++] = SPACE;
        }
        at += r.data.copy(bytes, at, r.start, r.end);
        if (r.newline) bytes[at++] = NEWLINE;
      }
      batch = [];
      stamps = [];
      size = 0;
      if (!out.write(cut > 0 ? bytes.subarray(0, bytes.length - cut) : bytes))
        await once(out, 'drain', { signal: o.signal });
    };
    for (const r of records) {
      if (done()) break;
      const prefixed = lineStart;
      lineStart = r.endsLine;
      if (o.sinceMs !== undefined && recordTimeMs(r) < o.sinceMs) continue;
      const stamp = o.timestamps && prefixed ? fixedTimestamp(r) : null;
      const length =
        (stamp === null ? 0 : (stamp?.length ?? r.tsEnd - r.tsStart) + 1) +
        r.end -
        r.start +
        (r.newline ? 1 : 0);
      batch.push(r);
      stamps.push(stamp);
      size += length;
      if (length >= budget) {
        // --limit-bytes cuts the last record short.
        const cut = length - budget;
        budget = 0;
        await flush(cut);
        return;
      }
      budget -= length;
      if (size >= BATCH) await flush(0);
    }
    await flush(0);
  };
  // With tailLines the records already on disk go through a ring: only the last N
  // remain, as upstream starts N file lines before the end.
  const ring = o.tailLines === undefined ? undefined : new Ring<LogRecord>(o.tailLines);
  const emit = async (records: readonly LogRecord[]): Promise<void> => {
    if (ring === undefined) await write(records);
    else for (const r of records) ring.push(r);
  };

  for (const r of files.rotated) {
    for await (const chunk of rotatedStream(r)) {
      await emit(parser.push(chunk as Buffer));
      if (done()) return;
    }
  }
  await emit(await readAvailable());
  if (!o.follow) {
    // A record the file ends in without a newline is still shown, as upstream shows
    // it; after N whole records --tail has stopped before it.
    const last = parser.incomplete();
    if (last !== undefined && ring?.full !== true) await emit([last]);
  }
  if (ring !== undefined) await write(ring.drain());
  if (!o.follow) return;
  const wakeup = new LogWakeup(files.path === undefined ? undefined : path.dirname(files.path));
  const pollMs = o.pollMs ?? 250;
  // Times on the injected clock: a write wakes the loop early, so counting loop turns
  // would no longer measure time.
  let checkedAt = o.clock.monotonic();
  let pending: Awaited<ReturnType<ContainerLogFiles['reopenIfRotated']>>;
  let pendingAt = 0;
  try {
    while (!done()) {
      o.beforeWait?.();
      try {
        await wakeup.wait(pollMs, o.clock, o.signal);
      } catch {
        return; // aborted: the client went away
      }
      const lines = await readAvailable();
      if (lines.length > 0) {
        checkedAt = o.clock.monotonic();
        await write(lines);
        continue;
      }
      // Quiet at the end of the file: it may have been rotated. The runtime may still be
      // finishing a write to the old file when the new one appears, so the switch waits
      // until the old descriptor has been quiet for a poll period.
      if (pending !== undefined && o.clock.monotonic() - pendingAt < pollMs) continue;
      if (pending !== undefined) {
        const prev = live;
        await files.release(prev);
        for (const r of pending.rotated) {
          for await (const chunk of rotatedStream(r)) {
            await write(parser.push(chunk as Buffer));
            if (done()) return;
          }
          await files.release(r.fh);
        }
        live = pending.live;
        offset = 0;
        pending = undefined;
        continue;
      }
      pending = await files.reopenIfRotated(o.clock.now());
      pendingAt = o.clock.monotonic();
      if (pending !== undefined) continue;
      // Check the runtime only about once a second while the file is quiet.
      if (o.clock.monotonic() - checkedAt >= 1000) {
        checkedAt = o.clock.monotonic();
        if (!(await o.isRunning())) {
          await write(await readAvailable());
          return;
        }
      }
    }
  } finally {
    wakeup.close();
  }
}
