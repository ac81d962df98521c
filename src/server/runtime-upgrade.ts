/**
 * The runtime's side of a stream berth translates (ws-translate.ts): its SPDY upgrade,
 * written and read by berth itself over a raw socket, the pooled buffers its bytes are
 * read into, and the connection opened before the stream's URL is known (StreamDialer).
 */
import { connect, type Socket } from 'node:net';
import { BufferPool } from '../util/buffer-pool.ts';
import { headerValue, parseResponseHead, ResponseHeadError } from '../util/http1.ts';

/** Read buffers for the runtime side; backpressure bounds those in flight. */
export const RUNTIME_POOL = new BufferPool(64 * 1024, 16);

/**
 * What reads the runtime's bytes once it upgraded: `n` bytes at the start of `buffer`,
 * a pooled buffer the sink gives back (RUNTIME_POOL.give) when it no longer needs it.
 * Returning false pauses the socket until `resume()`.
 */
export type Sink = (buffer: Buffer, n: number) => boolean;

export interface Runtime {
  readonly socket: Socket;
  /** Sets where the bytes go from now on; those read past the 101 go to it first. */
  sink(next: Sink): void;
  /** Resumes reading after a sink returned false. */
  resume(): void;
}

/**
 * A connection to the runtime's streaming server, reading into pooled buffers (net's
 * onread), whose reader and failure handler are set when its upgrade begins: a stream's
 * connection may be opened before its URL is known (StreamDialer).
 */
export class RuntimeConnection {
  readonly socket: Socket;
  /** host:port, to compare with a URL's. */
  readonly address: string;
  #reader: Sink | undefined;
  #failure: string | undefined;
  #onFailure: ((message: string) => void) | undefined;

  constructor(host: string, port: number) {
    this.address = addressOf(host, port);
    this.socket = connect({
      host,
      port,
      onread: {
        buffer: () => RUNTIME_POOL.take(),
        callback: (n, buffer) => {
          const b = buffer as Buffer;
          if (this.#reader !== undefined) return this.#reader(b, n);
          // The server says nothing before a request; nothing to keep.
          RUNTIME_POOL.give(b);
          return true;
        },
      },
    });
    this.socket.setNoDelay(true);
    this.socket.on('error', (err) => {
      this.#fail(`cannot reach the runtime streaming server: ${err.message}`);
    });
    this.socket.on('end', () => {
      this.#fail('the runtime streaming server closed without an answer');
    });
  }

  /** False once it failed, ended or was closed: an upgrade then needs a new one. */
  get usable(): boolean {
    return this.#failure === undefined && !this.socket.destroyed;
  }

  /** Where reads go from now on, and what hears of a failure or an end (at once if past). */
  attach(reader: Sink, onFailure: (message: string) => void): void {
    this.#reader = reader;
    this.#onFailure = onFailure;
    if (this.#failure !== undefined) onFailure(this.#failure);
  }

  #fail(message: string): void {
    if (this.#failure !== undefined) return;
    this.#failure = message;
    this.#onFailure?.(message);
  }
}

const addressOf = (host: string, port: number): string => `${host}:${String(port)}`;

const portOf = (url: URL): number => (url.port === '' ? 80 : Number(url.port));

/**
 * Opens a stream's runtime connection while the CRI call that names its URL is still in
 * flight, so the upgrade request can leave the moment the URL comes. The runtime's
 * streaming server keeps one address while it runs (containerd and CRI-O listen on one
 * port), so the last stream's address is dialled. A URL elsewhere (the runtime
 * restarted on another port) gets a connection of its own, and the early one is closed
 * unused. Without this, the connect waited for berth's event loop to finish answering
 * the client's upgrade: 0.6 ms of every exec, before the runtime could start it.
 */
export class StreamDialer {
  #last: { readonly host: string; readonly port: number } | undefined;

  /** A connection to the last stream's address; undefined before the first stream. */
  early(): RuntimeConnection | undefined {
    return this.#last === undefined
      ? undefined
      : new RuntimeConnection(this.#last.host, this.#last.port);
  }

  /** Remembers where `url` (a streaming URL that passed runtimeStreamUrl) points. */
  remember(url: URL): void {
    this.#last = { host: url.hostname, port: portOf(url) };
  }
}

/**
 * Opens the runtime's SPDY upgrade for `url`; resolves once it answered 101, rejects
 * with a message for anything else. Reads land in pooled buffers, as in the byte proxy
 * (streaming.ts): a fresh buffer per read made V8 collect the whole heap over and over
 * on a port-forward.
 *
 * - `preface`, SPDY frames for the upgraded connection, goes out with the request itself
 *   rather than after the 101: the runtime's server (k8s.io's httpstream, behind
 *   containerd's and CRI-O's) reads what the client sent past the request before any
 *   new bytes, so an exec's streams open without waiting a round trip for its answer.
 * - `early`, a connection StreamDialer opened, carries the upgrade if it goes to the
 *   URL's address and has not failed; otherwise it is closed unused.
 */
export function openRuntime(
  url: URL,
  protocol: string,
  signal: AbortSignal,
  options: { readonly preface?: Buffer; readonly early?: RuntimeConnection | undefined } = {},
): Promise<Runtime> {
  const { preface, early } = options;
  const connection =
    early?.usable === true && early.address === addressOf(url.hostname, portOf(url))
      ? early
      : new RuntimeConnection(url.hostname, portOf(url));
  if (early !== undefined && early !== connection) early.socket.destroy();
  const { socket } = connection;
  return new Promise((resolve, reject) => {
    let pending: Buffer = Buffer.alloc(0);
    let settled = false;
    let sink: Sink | undefined;
    let paused = false;
    const fail = (message: string): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      reject(new Error(message));
    };
    const onAbort = (): void => {
      fail('the client went away');
    };
    signal.addEventListener('abort', onAbort, { once: true });
    const onHeadBytes = (chunk: Buffer): void => {
      pending = Buffer.concat([pending, chunk]);
      let head;
      try {
        head = parseResponseHead(pending);
      } catch (err) {
        if (!(err instanceof ResponseHeadError)) throw err;
        fail(`the runtime streaming server sent a malformed answer: ${err.message}`);
        return;
      }
      if (head === undefined) return;
      signal.removeEventListener('abort', onAbort);
      if (head.status !== 101) {
        const body = head.rest.toString('utf8', 0, Math.min(head.rest.length, 512)).trim();
        fail(`unable to upgrade connection: ${body === '' ? head.statusText : body}`);
        return;
      }
      const agreed = headerValue(head.rawHeaders, 'x-stream-protocol-version');
      if (agreed !== undefined && agreed !== protocol) {
        fail(`the runtime agreed to protocol ${agreed}, not ${protocol}`);
        return;
      }
      settled = true;
      pending = head.rest;
      resolve({
        socket,
        sink: (next) => {
          sink = next;
          const held = pending;
          pending = Buffer.alloc(0);
          if (held.length > 0 && !next(held, held.length)) paused = true;
        },
        resume: () => {
          if (!paused) return;
          paused = false;
          socket.resume();
        },
      });
    };
    connection.attach((b, n) => {
      if (sink !== undefined) {
        const more = sink(b, n);
        if (!more) paused = true;
        return more;
      }
      // Before the 101, or before the sink is set (bytes kept, buffer given back).
      const chunk = Buffer.from(b.subarray(0, n));
      RUNTIME_POOL.give(b);
      if (!settled) onHeadBytes(chunk);
      else pending = Buffer.concat([pending, chunk]);
      return true;
    }, fail);
    if (signal.aborted) {
      onAbort();
      return;
    }
    const head = Buffer.from(
      `POST ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n` +
        `Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: ${protocol}\r\n` +
        `Content-Length: 0\r\n\r\n`,
      'latin1',
    );
    // One write: two queued while the socket connects could leave in two segments.
    socket.write(preface === undefined ? head : Buffer.concat([head, preface]));
  });
}
