/**
 * GET /logs/<path>: the node's log files under /var/log (upstream's system log handler),
 * a directory as an HTML listing, a regular file as its bytes. Segments are already
 * free of `..`, `.` and encoded slashes (parseTarget); here the path is resolved and
 * must stay below the root, so a symlink, planted by a container in a hostPath log
 * directory or not, never leads out of /var/log. Only directories and regular files
 * are served (a FIFO or a device would block or leak). A request with query parameters
 * (`?query=`, NodeLogQuery) is a node log query (node-log-query.ts) when
 * enableSystemLogQuery is on, and a 400 saying so when it is off.
 */
import { createReadStream } from 'node:fs';
import { constants, open, readdir, type FileHandle } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import type { Clock } from '../util/clock.ts';
import { HttpError, type ParsedTarget } from './handlers.ts';
import { resolveBelow } from './log-root.ts';
import { QUERY_PARAMS, serveNodeLogQuery } from './node-log-query.ts';
import type { ApiRequest, ApiResponse } from './transport.ts';

export interface NodeLogsOptions {
  /** The directory served (default /var/log). */
  readonly root: string;
  /** enableSystemLogQuery (and the NodeLogQuery gate): serve `?query=` (default false). */
  readonly systemLogQuery?: boolean;
  /** The journalctl executable for queries (default `journalctl` from PATH). */
  readonly journalctl?: string;
  readonly clock: Clock;
}

const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** Serves /logs and /logs/<path>. */
export async function serveNodeLogs(
  options: NodeLogsOptions,
  target: ParsedTarget,
  req: ApiRequest,
  res: ApiResponse,
  signal: AbortSignal,
): Promise<void> {
  if (req.method !== 'GET' && req.method !== 'HEAD')
    throw new HttpError(405, 'Cannot serve /logs/: GET only');
  const asked = QUERY_PARAMS.filter((p) => target.query.has(p));
  if (asked.length > 0) {
    if (options.systemLogQuery !== true) {
      throw new HttpError(
        400,
        `Cannot serve a node log query (${asked.join(', ')}) as enableSystemLogQuery is off on this node; request a file under /logs/ instead`,
      );
    }
    if (target.segments.length > 1)
      throw new HttpError(400, 'Cannot serve a node log query below /logs/: use /logs/?query=');
    await serveNodeLogQuery(
      {
        root: options.root,
        clock: options.clock,
        ...(options.journalctl === undefined ? {} : { journalctl: options.journalctl }),
      },
      target.query,
      req,
      res,
      signal,
    );
    return;
  }
  const rest = target.segments.slice(1);
  const real = await resolveBelow(options.root, rest);
  // O_NONBLOCK: opening a FIFO must not hang the request; O_NOFOLLOW: the resolved path
  // was swapped for a link after realpath.
  let fh: FileHandle;
  try {
    fh = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    throw new HttpError(404, `Cannot serve /logs/${rest.join('/')}: cannot be opened`, {
      cause: err,
    });
  }
  try {
    const st = await fh.stat();
    if (st.isDirectory()) {
      await fh.close();
      const entries = await readdir(real, { withFileTypes: true });
      const base = ['', 'logs', ...rest].map(encodeURIComponent).join('/');
      const items = entries
        .map((e) => (e.isDirectory() ? `${e.name}/` : e.name))
        .sort()
        .map(
          (n) =>
            `<a href="${escapeHtml(`${base}/${encodeURIComponent(n.replace(/\/$/, ''))}`)}">${escapeHtml(n)}</a>`,
        );
      const body = `<pre>\n${items.join('\n')}${items.length > 0 ? '\n' : ''}</pre>\n`;
      res.writeHead(200, {
        'Content-Type': 'text/html; charset=utf-8',
        'Content-Length': Buffer.byteLength(body),
      });
      res.end(req.method === 'HEAD' ? undefined : body);
      return;
    }
    if (!st.isFile())
      throw new HttpError(403, `Cannot serve /logs/${rest.join('/')}: not a regular file`);
    res.writeHead(200, {
      'Content-Type': 'text/plain; charset=utf-8',
      'Content-Length': st.size,
      'X-Content-Type-Options': 'nosniff',
    });
    if (req.method === 'HEAD' || st.size === 0) {
      res.end();
      return;
    }
    // A file still growing is served up to the size announced.
    await pipeline(
      createReadStream('', { fd: fh, autoClose: false, start: 0, end: Math.max(0, st.size - 1) }),
      res,
      { signal },
    );
  } finally {
    await fh.close().catch(() => undefined);
  }
}
