/**
 * One GET over a raw socket (TCP, or TLS without certificate checks), for probes and
 * lifecycle hooks: Connection: close, at most MAX_BODY_BYTES of the body kept.
 *
 * Not node:http: probes run once a second per container, and its ClientRequest,
 * IncomingMessage, agent and parser cost 411-441 µs of CPU per request against
 * 274-286 µs for this (3000 GETs to a local server, Node 24, this machine); most of
 * the difference was also garbage to collect. What the wire needs is small: one
 * request head, one response head (interim 1xx heads skipped), and a body framed by
 * Content-Length, chunked, or the end of the connection.
 */
import { connect as connectTcp, isIP } from 'node:net';
import { connect as connectTls } from 'node:tls';
import {
  badHeader,
  ChunkedDecoder,
  headerValue,
  parseResponseHead,
  type ResponseHead,
} from '../util/http1.ts';
import { NetError } from './net-error.ts';

/** Upstream reads at most 10 KiB of a probe's or hook's response body. */
export const MAX_BODY_BYTES = 10 * 1024;

export interface RawResponse {
  readonly statusCode: number;
  readonly location: string | undefined;
  /** At most MAX_BODY_BYTES of the body, as UTF-8. */
  readonly body: string;
}

/**
 * The request head. `headers` has lower-case names; a `host` entry replaces the URL's
 * host. Throws for a header that cannot be sent, in Go's words, as the kubelet does.
 */
export function probeRequestHead(url: URL, headers: Readonly<Record<string, string>>): string {
  let out = `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${headers['host'] ?? url.host}\r\n`;
  for (const [name, value] of Object.entries(headers)) {
    const bad = badHeader(name, value);
    if (bad !== undefined) throw new Error(`net/http: ${bad}`);
    if (name === 'host' || name === 'connection') continue;
    out += `${name}: ${value}\r\n`;
  }
  return `${out}Connection: close\r\n\r\n`;
}

/** Reads one response from the bytes of a connection; see push() and end(). */
export class ResponseReader {
  #pending: Buffer = Buffer.alloc(0);
  #head: ResponseHead | undefined;
  readonly #body: Buffer[] = [];
  #size = 0;
  /** Content-Length bytes still to come; Infinity: chunked or until the end. */
  #left = Number.POSITIVE_INFINITY;
  #chunked: ChunkedDecoder | undefined;

  /** The response once `chunk` completes it (or fills the body cap); else undefined. */
  push(chunk: Buffer): RawResponse | undefined {
    let data = chunk;
    if (this.#head === undefined) {
      this.#pending = Buffer.concat([this.#pending, chunk]);
      let head = parseResponseHead(this.#pending);
      // Interim answers (100 Continue, 103 Early Hints) come before the real one.
      while (head !== undefined && head.status >= 100 && head.status < 200) {
        this.#pending = head.rest;
        head = parseResponseHead(this.#pending);
      }
      if (head === undefined) return undefined;
      this.#head = head;
      this.#pending = Buffer.alloc(0);
      data = head.rest;
      if (head.status === 204 || head.status === 304) return this.#result();
      const encoding = headerValue(head.rawHeaders, 'transfer-encoding')?.toLowerCase() ?? '';
      const length = Number(headerValue(head.rawHeaders, 'content-length') ?? Number.NaN);
      if (encoding.includes('chunked')) this.#chunked = new ChunkedDecoder();
      else if (Number.isSafeInteger(length) && length >= 0) this.#left = length;
    }
    return this.#bodyBytes(data);
  }

  /** The connection ended: the response if it is complete up to here; throws if not. */
  end(): RawResponse {
    if (this.#head === undefined) throw new Error('EOF');
    if (this.#chunked !== undefined || this.#left !== Number.POSITIVE_INFINITY)
      throw new Error('unexpected EOF');
    return this.#result();
  }

  #bodyBytes(data: Buffer): RawResponse | undefined {
    const parts = this.#chunked === undefined ? [data] : this.#chunked.push(data);
    for (const part of parts) {
      const take = part.subarray(0, Math.min(part.length, this.#left));
      this.#left -= take.length;
      if (this.#size < MAX_BODY_BYTES) {
        this.#body.push(take.subarray(0, MAX_BODY_BYTES - this.#size));
        this.#size += Math.min(take.length, MAX_BODY_BYTES - this.#size);
      }
    }
    // Enough read: the rest is not wanted, and a large body must not cost more.
    if (this.#size >= MAX_BODY_BYTES || this.#left === 0 || this.#chunked?.done === true)
      return this.#result();
    return undefined;
  }

  #result(): RawResponse {
    const head = this.#head;
    if (head === undefined) throw new Error('EOF');
    return {
      statusCode: head.status,
      location: headerValue(head.rawHeaders, 'location'),
      body: Buffer.concat(this.#body).toString('utf8'),
    };
  }
}

/**
 * Sends GET `url` and reads the answer. Rejects with the socket's error, a framing
 * error, or the signal's reason once `signal` aborts; the socket is closed either way.
 */
export function requestOnce(
  url: URL,
  headers: Readonly<Record<string, string>>,
  signal: AbortSignal,
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason as Error);
      return;
    }
    let head: string;
    try {
      head = probeRequestHead(url, headers);
    } catch (err) {
      reject(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const https = url.protocol === 'https:';
    const port = url.port !== '' ? Number(url.port) : https ? 443 : 80;
    const socket = https
      ? connectTls({
          host,
          port,
          // Probes and hooks skip certificate checks, as upstream does; SNI only for names.
          rejectUnauthorized: false,
          ...(isIP(host) === 0 && { servername: host }),
        })
      : connectTcp({ host, port });
    const reader = new ResponseReader();
    let settled = false;
    const settle = (done: () => void): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      socket.destroy();
      done();
    };
    const onAbort = (): void => {
      settle(() => {
        reject(signal.reason as Error);
      });
    };
    const read = (step: () => RawResponse | undefined): void => {
      try {
        const res = step();
        if (res !== undefined)
          settle(() => {
            resolve(res);
          });
      } catch (err) {
        settle(() => {
          reject(err instanceof Error ? err : new Error(String(err)));
        });
      }
    };
    signal.addEventListener('abort', onAbort, { once: true });
    socket.on('data', (chunk: Buffer) => {
      read(() => reader.push(chunk));
    });
    socket.on('end', () => {
      read(() => reader.end());
    });
    socket.on('error', (err: Error) => {
      // Read before settle() destroys the socket; undefined before it connected.
      const { localAddress, localPort } = socket;
      const local =
        localAddress === undefined || localPort === undefined
          ? undefined
          : { host: localAddress, port: localPort };
      settle(() => {
        reject(new NetError(err, { host, port }, local));
      });
    });
    socket.on('close', () => {
      settle(() => {
        reject(new Error('connection closed'));
      });
    });
    // Queued until the connection (and for https the handshake) is up.
    socket.write(head);
  });
}
