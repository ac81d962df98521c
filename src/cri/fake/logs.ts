/**
 * Container output in the CRI log format (`<RFC3339Nano> <stream> <F|P> <text>`), kept
 * in memory and, when the sandbox's log directory exists on disk, appended to the
 * container's log file as a real runtime would. Unit tests that use made-up paths such
 * as /var/log/pods/... get the in-memory copy only, and nothing is created for them.
 */
import { appendFile, mkdir, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { FakeLogLine } from './types.ts';

/** Formats a nanosecond epoch timestamp as RFC 3339 with nine fractional digits. */
export function rfc3339Nano(ns: bigint): string {
  const seconds = ns / 1_000_000_000n;
  const fraction = (ns % 1_000_000_000n).toString().padStart(9, '0');
  const whole = new Date(Number(seconds) * 1000).toISOString().slice(0, 19);
  return `${whole}.${fraction}Z`;
}

/**
 * The CRI log records of `text`: one full ("F") record per line; the last one partial
 * ("P") when the output did not end its line.
 */
export function criLogRecords(ns: bigint, line: FakeLogLine): string[] {
  const parts = line.text.split('\n');
  // "a\n" is one line, not a line and an empty one.
  if (parts.length > 1 && parts.at(-1) === '') parts.pop();
  const at = rfc3339Nano(ns);
  const last = parts.length - 1;
  return parts.map(
    (text, i) =>
      `${at} ${line.stream} ${line.partial === true && i === last ? 'P' : 'F'} ${text}\n`,
  );
}

async function isDirectory(path: string): Promise<boolean> {
  return stat(path).then(
    (s) => s.isDirectory(),
    () => false,
  );
}

/**
 * One container's log. Writes are chained so records reach the file in the order they
 * were produced even though each append is asynchronous.
 */
export class ContainerLog {
  readonly #records: string[] = [];
  readonly #path: string;
  readonly #logDirectory: string;
  #writes: Promise<void> = Promise.resolve();

  /** `path` is absolute ('' for none); the file is written only if `logDirectory` exists. */
  constructor(path: string, logDirectory: string) {
    this.#path = path;
    this.#logDirectory = logDirectory;
  }

  /** Everything written so far, in CRI format. */
  get text(): string {
    return this.#records.join('');
  }

  /** Appends the records; resolves when they are on disk (or at once without a file). */
  append(ns: bigint, line: FakeLogLine): Promise<void> {
    const records = criLogRecords(ns, line);
    this.#records.push(...records);
    if (this.#path === '' || this.#logDirectory === '') return this.#writes;
    const data = records.join('');
    const written = this.#writes.then(async () => {
      if (!(await isDirectory(this.#logDirectory))) return;
      await mkdir(dirname(this.#path), { recursive: true });
      await appendFile(this.#path, data);
    });
    // The caller sees a failed write; later writes still run.
    this.#writes = written.catch(() => undefined);
    return written;
  }
}
