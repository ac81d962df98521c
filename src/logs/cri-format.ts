/**
 * The CRI container log format, as runtimes write it and upstream's kubelet reads it
 * (k8s.io/cri-client/pkg/logs): each file line is one record,
 * `<RFC3339Nano> <stdout|stderr> <tags> <content>`, where the first ':'-separated tag is
 * P for a partial record (a fragment of a longer line, or output that ended without a
 * newline, such as `echo -n`) and F otherwise.
 *
 * Records are rendered one by one, as upstream writes them: a full record's content
 * followed by a newline, a partial record's content as it is, so a P record and the
 * records after it come out joined, and a P record at the end of the log still comes
 * out. A timestamp prefix starts each rendered line, not each record. `--tail` counts
 * records (file lines), not rendered lines, since upstream seeks back that many file
 * lines.
 */

/**
 * One record, as offsets into the parser's own copy of the file bytes. No Buffer per
 * record: at 100-byte lines, per-line copies, views and strings were most of the CPU of
 * `kubectl logs -f` (profiled in bench/api.ts).
 */
export interface LogRecord {
  readonly data: Buffer;
  /** The RFC3339Nano timestamp: data[tsStart..tsEnd). */
  readonly tsStart: number;
  readonly tsEnd: number;
  /** The content, without the file's newline: data[start..end). */
  readonly start: number;
  readonly end: number;
  /**
   * Whether the rendered content ends a line: a full record the file's newline ended.
   * false for a partial record, and for a record cut off at the end of the file.
   */
  readonly newline: boolean;
  /**
   * Whether the next record starts a rendered line (gets the timestamp prefix). Upstream
   * decides this by the last byte it wrote: a newline, or nothing at all.
   */
  readonly endsLine: boolean;
}

export function recordTimestamp(r: LogRecord): string {
  return r.data.toString('latin1', r.tsStart, r.tsEnd);
}

export function recordContent(r: LogRecord): Buffer {
  return r.data.subarray(r.start, r.end);
}

const TIME_RE = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/;

/** RFC3339Nano to milliseconds; Date.parse does not promise more than 3 fraction digits. */
function parseTimeMs(ts: string): number {
  const m = TIME_RE.exec(ts);
  if (m === null) return Number.NaN;
  const frac = (m[2] ?? '').padEnd(3, '0').slice(0, 3);
  return Date.parse(`${m[1] ?? ''}.${frac}${m[3] ?? 'Z'}`);
}

/** When the record was written (ms since the epoch); NaN for a malformed timestamp. */
export function recordTimeMs(r: LogRecord): number {
  return parseTimeMs(recordTimestamp(r));
}

const STAMP_LENGTH = '2006-01-02T15:04:05.000000000Z'.length;
const DOT = 0x2e;
const ZULU = 0x5a;

/**
 * The record's timestamp as upstream prints it (Go's RFC3339NanoFixed: always nine
 * fraction digits, "Z" for a zero offset), or undefined when the stored bytes already
 * are that. containerd writes RFC3339Nano, which drops trailing zeros (and uses the
 * host's zone), so about one stamp in ten needs rewriting.
 */
export function fixedTimestamp(r: LogRecord): string | undefined {
  if (
    r.tsEnd - r.tsStart === STAMP_LENGTH &&
    r.data[r.tsStart + 19] === DOT &&
    r.data[r.tsEnd - 1] === ZULU
  ) {
    return undefined;
  }
  const raw = recordTimestamp(r);
  const m = TIME_RE.exec(raw);
  if (m === null) return undefined;
  const zone = m[3] === '+00:00' || m[3] === '-00:00' ? 'Z' : (m[3] ?? 'Z');
  return `${m[1] ?? ''}.${(m[2] ?? '').padEnd(9, '0').slice(0, 9)}${zone}`;
}

/**
 * Whether data[from..to) is a timestamp Go's time.Parse(RFC3339Nano) takes: upstream's
 * reader skips a line whose stamp it rejects. The stamp containerd writes nearly always
 * (nine fraction digits, "Z") is checked byte by byte, without a string per record.
 */
function validTimestamp(data: Buffer, from: number, to: number): boolean {
  if (to - from === STAMP_LENGTH && data[to - 1] === ZULU) {
    const at = (i: number): number => (data[from + i] ?? 0) - 0x30;
    for (let i = 0; i < STAMP_LENGTH - 1; i++) {
      const sep = FIXED_SEPARATORS.get(i);
      const b = data[from + i];
      if (sep !== undefined ? b !== sep : b === undefined || b < 0x30 || b > 0x39) return false;
    }
    const two = (i: number): number => at(i) * 10 + at(i + 1);
    const [month, day, hour, minute, second] = [two(5), two(8), two(11), two(14), two(17)];
    return (
      month >= 1 && month <= 12 && day >= 1 && day <= 31 && hour < 24 && minute < 60 && second < 60
    );
  }
  return !Number.isNaN(parseTimeMs(data.toString('latin1', from, to)));
}

/** Non-digit positions of 2006-01-02T15:04:05.000000000Z. */
const FIXED_SEPARATORS = new Map<number, number>([
  [4, 0x2d],
  [7, 0x2d],
  [10, 0x54],
  [13, 0x3a],
  [16, 0x3a],
  [19, 0x2e],
]);

const SPACE = 0x20;
const NEWLINE = 0x0a;
const TAG_PARTIAL = 0x50; // 'P'
const COLON = 0x3a;
const EMPTY = Buffer.alloc(0);
const STDOUT = Buffer.from('stdout');
const STDERR = Buffer.from('stderr');

/**
 * Parses data[from..to), a file line without its newline; undefined when it is not a CRI
 * record (upstream skips those): a timestamp Go would not parse, no stream of stdout or
 * stderr, or no space after the tags. `complete`: the file's newline ended it.
 */
export function parseRecord(
  data: Buffer,
  from: number,
  to: number,
  complete: boolean,
): LogRecord | undefined {
  const s1 = data.indexOf(SPACE, from);
  if (s1 < 0 || s1 >= to) return undefined;
  const s2 = data.indexOf(SPACE, s1 + 1);
  if (s2 < 0 || s2 >= to) return undefined;
  const s3 = data.indexOf(SPACE, s2 + 1);
  if (s3 < 0 || s3 >= to) return undefined;
  if (
    s2 - s1 - 1 !== STDOUT.length ||
    (data.compare(STDOUT, 0, STDOUT.length, s1 + 1, s2) !== 0 &&
      data.compare(STDERR, 0, STDERR.length, s1 + 1, s2) !== 0)
  ) {
    return undefined;
  }
  if (!validTimestamp(data, from, s1)) return undefined;
  // Only the first tag counts (more may follow, ':'-separated, in a later CRI).
  const partial = data[s2 + 1] === TAG_PARTIAL && (s2 + 2 === s3 || data[s2 + 2] === COLON);
  const start = s3 + 1;
  const newline = complete && !partial;
  return {
    data,
    tsStart: from,
    tsEnd: s1,
    start,
    end: to,
    newline,
    endsLine: newline || start === to,
  };
}

/** Incremental parser: file bytes in, records out. */
export class CriLogParser {
  #rest: Buffer = EMPTY;

  /** Feeds bytes (the caller may reuse `chunk` afterwards); returns the records they complete. */
  push(chunk: Buffer): LogRecord[] {
    // One copy per chunk: the records returned are views into it.
    const data = this.#rest.length === 0 ? Buffer.from(chunk) : Buffer.concat([this.#rest, chunk]);
    const out: LogRecord[] = [];
    let start = 0;
    for (;;) {
      const nl = data.indexOf(NEWLINE, start);
      if (nl < 0) break;
      const record = parseRecord(data, start, nl, true);
      if (record !== undefined) out.push(record);
      start = nl + 1;
    }
    this.#rest = start === data.length ? EMPTY : data.subarray(start);
    return out;
  }

  /**
   * The record the bytes so far end in without a newline (the runtime was cut off, or is
   * still writing it), if any. Upstream outputs it when it reads to the end of the file
   * without following; the parser keeps it for a later push.
   */
  incomplete(): LogRecord | undefined {
    if (this.#rest.length === 0) return undefined;
    return parseRecord(this.#rest, 0, this.#rest.length, false);
  }
}

/**
 * The rendered bytes of `records` (content only, no timestamps), as upstream writes them
 * into a caller's buffer.
 */
export function renderContent(records: readonly LogRecord[]): Buffer {
  const newline = Buffer.from('\n');
  return Buffer.concat(
    records.flatMap((r) => (r.newline ? [recordContent(r), newline] : [recordContent(r)])),
  );
}
