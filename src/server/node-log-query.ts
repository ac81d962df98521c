/**
 * GET /logs/?query=…: upstream's node log query (NodeLogQuery, enableSystemLogQuery).
 * A query names up to four services, whose journal is read with journalctl, or one
 * file below the node log directory. Parameters and their checks follow upstream:
 * sinceTime and untilTime are RFC 3339, tailLines is 0–100000, boot is 0 or a previous
 * boot (negative), pattern is a regular expression, a file takes no options, service
 * names are [A-Za-z0-9_@-] only (they become journalctl arguments, never a shell).
 *
 * A service without journal entries (journalctl's _SYSTEMD_UNIT field has no
 * `<name>.service`) is looked for as a file instead, in upstream's order: <root>/<name>,
 * <root>/<name>.log, <root>/<name>/<name>.log. Everything is resolved below the root,
 * as /logs/<path> is, so a symlink never leads out of it. Bad parameters are a 400 with
 * every problem listed; once the answer has started, a failure is a line in the body,
 * as upstream writes it. The whole query has upstream's 30 s deadline.
 */
import { spawn } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { constants, open } from 'node:fs/promises';
import type { Writable } from 'node:stream';
import { createGzip } from 'node:zlib';
import type { Clock } from '../util/clock.ts';
import { HttpError } from './handlers.ts';
import { resolveBelow } from './log-root.ts';
import type { ApiRequest, ApiResponse } from './transport.ts';

/** The parameters that make a /logs/ request a query rather than a file fetch. */
export const QUERY_PARAMS = ['query', 'sinceTime', 'untilTime', 'tailLines', 'pattern', 'boot'];

const MAX_TAIL_LINES = 100_000;
const MAX_SERVICES = 4;
const MAX_SERVICE_LENGTH = 256;
const DEADLINE_MS = 30_000;
const SAFE_SERVICE = /^[a-zA-Z0-9_@-]+$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

export interface NodeLogQuery {
  readonly services: readonly string[];
  /** At most one after validation. */
  readonly files: readonly string[];
  readonly sinceTime?: Date;
  readonly untilTime?: Date;
  readonly tailLines?: number;
  readonly boot?: number;
  readonly pattern?: string;
}

export interface NodeLogQueryOptions {
  /** The node log directory (default /var/log). */
  readonly root: string;
  /** The journalctl executable (default `journalctl` from PATH). */
  readonly journalctl?: string;
  readonly clock: Clock;
}

const hasOptions = (q: NodeLogQuery): boolean =>
  q.sinceTime !== undefined ||
  q.untilTime !== undefined ||
  q.tailLines !== undefined ||
  q.boot !== undefined ||
  q.pattern !== undefined;

function integer(value: string): number | undefined {
  return /^[+-]?\d{1,9}$/.test(value) ? Number(value) : undefined;
}

/** Parses and checks the query parameters; a 400 lists every problem found. */
export function parseNodeLogQuery(params: URLSearchParams): NodeLogQuery {
  const errors: string[] = [];
  const services: string[] = [];
  const files: string[] = [];
  const queries = params.getAll('query');
  for (const q of queries) {
    // A slash (either way) says "file"; anything else non-blank is a service name.
    if (/[/\\]/.test(q)) files.push(q);
    else if (q.trim() !== '') services.push(q);
  }
  const out: {
    -readonly [K in keyof NodeLogQuery]: NodeLogQuery[K];
  } = { services, files };
  const time = (name: 'sinceTime' | 'untilTime'): void => {
    const v = params.get(name);
    if (v === null || v === '') return;
    const t = RFC3339.test(v) ? new Date(v) : undefined;
    if (t === undefined || Number.isNaN(t.getTime()))
      errors.push(`${name}: Invalid value: "${v}": invalid time format (RFC 3339 expected)`);
    else out[name] = t;
  };
  time('sinceTime');
  time('untilTime');
  for (const name of ['tailLines', 'boot'] as const) {
    const v = params.get(name);
    if (v === null || v === '') continue;
    const n = integer(v);
    if (n === undefined) errors.push(`${name}: Invalid value: "${v}": not an integer`);
    else out[name] = n;
  }
  const pattern = params.get('pattern');
  if (pattern !== null && pattern !== '') out.pattern = pattern;

  if (services.length === 0 && files.length === 0)
    errors.push(
      queries.length > 0 ? 'query: Invalid value: query cannot be empty' : 'query: Required value',
    );
  for (const s of services) {
    if (s.length > MAX_SERVICE_LENGTH)
      errors.push(`query: Invalid value: "${s.slice(0, 40)}…": longer than ${MAX_SERVICE_LENGTH}`);
    else if (!SAFE_SERVICE.test(s))
      errors.push(`query: Invalid value: "${s}": input contains unsupported characters`);
  }
  if (services.length > MAX_SERVICES)
    errors.push(`query: Too many: ${services.length}: must have at most ${MAX_SERVICES} items`);
  if (files.length > 0 && services.length > 0)
    errors.push('query: Invalid value: cannot specify a file and service');
  else if (files.length > 1) errors.push('query: Invalid value: cannot specify more than one file');
  else if (files.length === 1 && hasOptions(out))
    errors.push('query: Invalid value: cannot specify file with options');
  if (out.sinceTime !== undefined && out.untilTime !== undefined && out.sinceTime > out.untilTime)
    errors.push('untilTime: Invalid value: must be after `sinceTime`');
  if (out.boot !== undefined && out.boot > 0)
    errors.push(`boot: Invalid value: ${out.boot}: must be less than 1`);
  if (out.tailLines !== undefined && (out.tailLines < 0 || out.tailLines > MAX_TAIL_LINES))
    errors.push(
      `tailLines: Invalid value: ${out.tailLines}: must be between 0 and ${MAX_TAIL_LINES}, inclusive`,
    );
  if (out.pattern !== undefined) {
    try {
      new RegExp(out.pattern, 'u');
    } catch (err) {
      errors.push(`pattern: Invalid value: "${out.pattern}": ${(err as Error).message}`);
    }
  }
  if (errors.length > 0) throw new HttpError(400, errors.join(', '));
  return out;
}

/** journalctl's own time syntax, in UTC to match --utc. */
function journalTime(t: Date): string {
  return t
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, '');
}

/** The journalctl arguments for `services` (upstream's, with untilTime as the until). */
export function journalctlArgs(q: NodeLogQuery, services: readonly string[]): string[] {
  const args = ['--utc', '--no-pager'];
  if (q.sinceTime !== undefined) args.push(`--since=${journalTime(q.sinceTime)}`);
  if (q.untilTime !== undefined) args.push(`--until=${journalTime(q.untilTime)}`);
  if (q.tailLines !== undefined) args.push('--pager-end', `--lines=${q.tailLines}`);
  for (const s of services) args.push(`--unit=${s}`);
  if (q.pattern !== undefined) args.push(`--grep=${q.pattern}`, '--case-sensitive=true');
  if (q.boot !== undefined) args.push('--boot', String(q.boot));
  args.push('--output=short-precise');
  return args;
}

interface Run {
  readonly spawned: boolean;
  readonly stdout: string;
}

/** Runs journalctl; `out` (when given) gets stdout and stderr as they come. */
function journalctl(
  command: string,
  args: readonly string[],
  signal: AbortSignal,
  out?: Writable,
): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], signal });
    let stdout = '';
    let spawned = false;
    const done = (): void => {
      resolve({ spawned, stdout });
    };
    child.on('spawn', () => (spawned = true));
    if (out !== undefined) {
      child.stdout.pipe(out, { end: false });
      child.stderr.pipe(out, { end: false });
    } else {
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
      child.stderr.resume();
    }
    // A command that cannot start only errors; one that ran closes (killed or not).
    child.on('error', () => {
      if (!spawned) done();
    });
    child.on('close', done);
  });
}

/** A query's file as path segments below the root (either slash separates). */
const pathParts = (relative: string): string[] =>
  relative.split(/[/\\]+/).filter((p) => p !== '' && p !== '.');

async function copyFile(
  root: string,
  relative: string,
  out: Writable,
  signal: AbortSignal,
): Promise<'copied' | 'missing'> {
  const parts = pathParts(relative);
  if (parts.includes('..'))
    throw new HttpError(403, `Cannot read ${relative}: ".." is not allowed`);
  let real: string;
  try {
    real = await resolveBelow(root, parts);
  } catch (err) {
    if (err instanceof HttpError && err.status === 404) return 'missing';
    throw err;
  }
  const fh = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const st = await fh.stat();
    // A directory named like the service: the heuristics look further (upstream's too).
    if (st.isDirectory()) return 'missing';
    if (!st.isFile()) throw new HttpError(403, `Cannot read ${relative}: not a regular file`);
    if (st.size === 0) return 'copied';
    const stream = createReadStream('', { fd: fh, autoClose: false, end: st.size - 1, signal });
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      if (!out.write(chunk)) await new Promise((r) => out.once('drain', r));
    }
    return 'copied';
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** Serves a node log query (see the top of this file). */
export async function serveNodeLogQuery(
  options: NodeLogQueryOptions,
  params: URLSearchParams,
  req: ApiRequest,
  res: ApiResponse,
  signal: AbortSignal,
): Promise<void> {
  const q = parseNodeLogQuery(params);
  const file = q.files[0];
  if (file !== undefined) {
    // Checked before the answer starts, so a missing file is a 400 as upstream's.
    await resolveBelow(options.root, pathParts(file)).catch((err: unknown) => {
      throw new HttpError(400, `query: Invalid value: "${file}": ${(err as Error).message}`);
    });
  }
  const deadline = new AbortController();
  const stop = AbortSignal.any([signal, deadline.signal]);
  // Aborted only by the deadline until the finally block below.
  const timer = options.clock.sleep(DEADLINE_MS, stop).then(
    () => {
      deadline.abort();
    },
    () => undefined,
  );
  const gzip = req.headers['accept-encoding'] === 'gzip';
  res.writeHead(200, {
    'Content-Type': 'text/plain;charset=UTF-8',
    ...(gzip ? { 'Content-Encoding': 'gzip' } : {}),
  });
  const out: Writable = gzip ? createGzip({ level: 1 }) : res;
  if (gzip) out.pipe(res);
  const line = (text: string): void => {
    out.write(`\n${text}\n`);
  };
  try {
    if (file !== undefined) {
      await copyFile(options.root, file, out, stop);
      return;
    }
    const command = options.journalctl ?? 'journalctl';
    const units = await journalctl(command, ['--field', '_SYSTEMD_UNIT'], stop);
    const known = new Set(units.stdout.split('\n').map((u) => u.trim()));
    const native = q.services.filter((s) => known.has(`${s}.service`));
    const inFiles = q.services.filter((s) => !known.has(`${s}.service`));
    if (native.length > 0) {
      const run = await journalctl(command, journalctlArgs(q, native), stop, out);
      if (!run.spawned && (q.boot ?? 0) === 0) line('error: journal output not available');
    }
    if (inFiles.length > 0 && hasOptions(q)) {
      line(
        `options present and query resolved to log files for [${inFiles.join(' ')}]\ntry without specifying options`,
      );
      return;
    }
    for (const s of inFiles) {
      let found = false;
      for (const name of [s, `${s}.log`, `${s}/${s}.log`]) {
        if ((await copyFile(options.root, name, out, stop)) === 'copied') {
          found = true;
          break;
        }
      }
      if (!found) line(`log not found for ${s}`);
    }
  } catch (err) {
    if (!signal.aborted && !deadline.signal.aborted)
      line(`error getting logs: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    // journalctl killed at the deadline only ends early, so the reason is said here.
    if (deadline.signal.aborted && !signal.aborted)
      line('error: the query ran past its 30s deadline');
    deadline.abort();
    await timer;
    out.end();
    if (gzip) await new Promise((r) => res.once('finish', r).once('close', r));
  }
}
