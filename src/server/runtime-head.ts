/**
 * The HTTP/1.1 pieces of berth's upgrade request to the runtime's streaming server,
 * which goes over a raw socket (see streaming.ts for why): the request head it sends
 * and the response head it reads back. Only what an upgrade needs: one request, one
 * response head, no pipelining.
 */

/** The most a response head may take; Node's own server and client default to 16 KiB. */
export const MAX_HEAD_BYTES = 16 * 1024;

/** Headers that describe this hop only, or that carry the caller's credentials. */
const DROPPED = new Set(['host', 'authorization', 'proxy-authorization', 'content-length']);

/**
 * The request head for `method path` to `host`, carrying the client's headers (as
 * Node's parser gave them, so free of CR and LF) except those in DROPPED.
 */
export function requestHead(
  method: string,
  path: string,
  host: string,
  rawHeaders: readonly string[],
): string {
  let out = `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\n`;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? '';
    if (DROPPED.has(name.toLowerCase())) continue;
    out += `${name}: ${rawHeaders[i + 1] ?? ''}\r\n`;
  }
  return `${out}\r\n`;
}

export interface ResponseHead {
  readonly status: number;
  readonly statusText: string;
  /** Name, value, name, value… as received. */
  readonly rawHeaders: readonly string[];
  /** The head's own bytes, through the blank line. */
  readonly bytes: Buffer;
  /** What followed the head in `data`: the first bytes of the stream or the body. */
  readonly rest: Buffer;
}

/** The response head is malformed or too large. */
export class ResponseHeadError extends Error {}

/**
 * The response head at the start of `data`; undefined while it is incomplete. Throws
 * ResponseHeadError for a malformed head or one beyond MAX_HEAD_BYTES.
 */
export function parseResponseHead(data: Buffer): ResponseHead | undefined {
  const end = data.indexOf('\r\n\r\n');
  if (end < 0) {
    if (data.length > MAX_HEAD_BYTES)
      throw new ResponseHeadError(`The response head is over ${MAX_HEAD_BYTES} bytes`);
    return undefined;
  }
  if (end + 4 > MAX_HEAD_BYTES)
    throw new ResponseHeadError(`The response head is over ${MAX_HEAD_BYTES} bytes`);
  const lines = data.toString('latin1', 0, end).split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(lines[0] ?? '');
  if (status === null)
    throw new ResponseHeadError(`Bad status line ${JSON.stringify(lines[0] ?? '')}`);
  const rawHeaders: string[] = [];
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0 || /[\s]/.test(line.slice(0, colon)))
      throw new ResponseHeadError(`Bad header line ${JSON.stringify(line)}`);
    rawHeaders.push(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  return {
    status: Number(status[1]),
    statusText: status[2] ?? '',
    rawHeaders,
    bytes: data.subarray(0, end + 4),
    rest: data.subarray(end + 4),
  };
}

/** The value of header `name` (case-insensitive; the first of several). */
export function headerValue(rawHeaders: readonly string[], name: string): string | undefined {
  for (let i = 0; i + 1 < rawHeaders.length; i += 2)
    if (rawHeaders[i]?.toLowerCase() === name) return rawHeaders[i + 1];
  return undefined;
}
