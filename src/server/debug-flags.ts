/**
 * PUT /debug/flags/v: upstream's StringFlagPutHandler with klog's GlogSetter, so an
 * operator can raise berth's verbosity on a running node (`kubectl get --raw` through
 * the node proxy, or curl) and lower it again, without a restart.
 */
import type { LogVerbosity } from '../util/logger.ts';
import type { ApiRequest, ApiResponse } from './transport.ts';

/** More than any verbosity needs; upstream reads the whole body, berth bounds it. */
const MAX_BODY = 64 * 1024;

function plain(res: ApiResponse, status: number, text: string): void {
  res
    .writeHead(status, { 'Content-Type': 'text/plain', 'X-Content-Type-Options': 'nosniff' })
    .end(`${text}\n`);
}

async function readBody(req: ApiRequest, signal: AbortSignal): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req.iterator({ destroyOnReturn: true })) {
    signal.throwIfAborted();
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > MAX_BODY) return undefined;
    chunks.push(buf);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Go's strconv.ParseUint(val, 10, 32) as GlogSetter calls it, with Go's error text. */
export function parseVerbosity(val: string): number | string {
  const quoted = JSON.stringify(val);
  if (!/^[0-9]+$/.test(val)) return `strconv.ParseUint: parsing ${quoted}: invalid syntax`;
  const v = Number(val);
  if (v > 0xffff_ffff) return `strconv.ParseUint: parsing ${quoted}: value out of range`;
  return v;
}

/**
 * Serves /debug/flags/v: `verbosity` undefined means enableDebugFlagsHandler is false,
 * answered as upstream's disabled endpoint.
 */
export async function serveDebugFlags(
  verbosity: LogVerbosity | undefined,
  req: ApiRequest,
  res: ApiResponse,
  signal: AbortSignal,
): Promise<void> {
  if (verbosity === undefined) {
    res
      .writeHead(405, {
        'Content-Type': 'text/plain; charset=utf-8',
        'X-Content-Type-Options': 'nosniff',
      })
      .end('flags endpoint is disabled.\n');
    return;
  }
  if (req.method !== 'PUT') {
    plain(res, 406, 'unsupported http method');
    return;
  }
  const body = await readBody(req, signal);
  if (body === undefined) {
    plain(res, 400, 'error reading request body: http: request body too large');
    return;
  }
  const v = parseVerbosity(body);
  if (typeof v === 'string') {
    plain(res, 400, v);
    return;
  }
  verbosity.set(v);
  plain(res, 200, `successfully set klog.logging.verbosity to ${body}`);
}
