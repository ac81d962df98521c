/**
 * The HTTP/1.1 pieces berth needs where it talks over a raw socket instead of
 * node:http, to keep per-byte or per-request work down: the upgrade to the runtime's
 * streaming server (server/streaming.ts) and probe GETs (prober/http-request.ts). One
 * request per connection, no pipelining: a request head out, a response head back, and
 * a chunked body decoder.
 */

/** The most a response head may take; Node's own server and client default to 16 KiB. */
export const MAX_HEAD_BYTES = 16 * 1024;

/** Headers that describe this hop only, or that carry the caller's credentials. */
const DROPPED = new Set(['host', 'authorization', 'proxy-authorization', 'content-length']);

/**
 * The request head for `method path` to `host`, carrying the client's headers (as
 * Node's parser gave them, so free of CR and LF) except those in DROPPED.
 */
export function forwardedRequestHead(
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
  const end = headEnd(data);
  if (end === undefined) {
    if (data.length > MAX_HEAD_BYTES)
      throw new ResponseHeadError(`The response head is over ${MAX_HEAD_BYTES} bytes`);
    return undefined;
  }
  if (end.length > MAX_HEAD_BYTES)
    throw new ResponseHeadError(`The response head is over ${MAX_HEAD_BYTES} bytes`);
  const lines = data.toString('latin1', 0, end.text).split(/\r?\n/);
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
    bytes: data.subarray(0, end.length),
    rest: data.subarray(end.length),
  };
}

/**
 * Where the head ends: `text`, the end of its last line; `length`, past the blank
 * line. Lines may end in a bare LF, which Go's client (the kubelet's) and Node's both
 * accept, so a pod's odd HTTP server probes the same under berth.
 */
function headEnd(data: Buffer): { text: number; length: number } | undefined {
  for (let nl = data.indexOf(0x0a); nl >= 0; nl = data.indexOf(0x0a, nl + 1)) {
    const text = nl > 0 && data[nl - 1] === 0x0d ? nl - 1 : nl;
    if (data[nl + 1] === 0x0a) return { text, length: nl + 2 };
    if (data[nl + 1] === 0x0d && data[nl + 2] === 0x0a) return { text, length: nl + 3 };
  }
  return undefined;
}

/** The value of header `name` (case-insensitive; the first of several). */
export function headerValue(rawHeaders: readonly string[], name: string): string | undefined {
  for (let i = 0; i + 1 < rawHeaders.length; i += 2)
    if (rawHeaders[i]?.toLowerCase() === name) return rawHeaders[i + 1];
  return undefined;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** A header that cannot go on the wire: a bad name, or CR, LF or NUL in its value. */
export function badHeader(name: string, value: string): string | undefined {
  if (!TOKEN.test(name)) return `invalid header field name ${JSON.stringify(name)}`;
  if (/[\r\n\0]/.test(value)) return `invalid header field value for ${JSON.stringify(name)}`;
  return undefined;
}

/** A chunked body that breaks the framing. */
export class ChunkedBodyError extends Error {}

/** The longest chunk-size line accepted (hex size plus extensions). */
const MAX_CHUNK_LINE = 4096;

/**
 * Decodes a chunked body incrementally: push() the bytes as they arrive, and it
 * returns the data they complete; `done` once the last chunk was read (trailers are
 * not needed by any caller and are left unread).
 */
export class ChunkedDecoder {
  #pending: Buffer = Buffer.alloc(0);
  /** Data bytes left in the current chunk; -1 while reading a size line, -2 its CRLF. */
  #left = -1;
  #done = false;

  get done(): boolean {
    return this.#done;
  }

  push(data: Buffer): Buffer[] {
    const out: Buffer[] = [];
    let buf = this.#pending.length === 0 ? data : Buffer.concat([this.#pending, data]);
    while (!this.#done && buf.length > 0) {
      if (this.#left === -1) {
        const eol = buf.indexOf('\r\n');
        if (eol < 0) {
          if (buf.length > MAX_CHUNK_LINE) throw new ChunkedBodyError('chunk size line too long');
          break;
        }
        const size = /^([0-9a-fA-F]{1,15})(?:[ \t]*;.*)?$/.exec(buf.toString('latin1', 0, eol));
        if (size?.[1] === undefined) throw new ChunkedBodyError('malformed chunk size');
        buf = buf.subarray(eol + 2);
        this.#left = Number.parseInt(size[1], 16);
        if (this.#left === 0) this.#done = true;
      } else if (this.#left === -2) {
        if (buf.length < 2) break;
        if (buf[0] !== 0x0d || buf[1] !== 0x0a) throw new ChunkedBodyError('malformed chunk end');
        buf = buf.subarray(2);
        this.#left = -1;
      } else {
        const n = Math.min(this.#left, buf.length);
        out.push(buf.subarray(0, n));
        buf = buf.subarray(n);
        this.#left -= n;
        if (this.#left === 0) this.#left = -2;
      }
    }
    // Copied: the caller may reuse `data`, and what stays is at most a line.
    this.#pending = this.#done ? Buffer.alloc(0) : Buffer.from(buf);
    return out;
  }
}
