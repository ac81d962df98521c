/**
 * The runtime's side of a stream berth translates (ws-translate.ts): its SPDY upgrade,
 * written and read by berth itself over a raw socket, and the pooled buffers its bytes
 * are read into.
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
 * Opens the runtime's SPDY upgrade for `url`; resolves once it answered 101, rejects
 * with a message for anything else. Reads land in pooled buffers (net's onread), as in
 * the byte proxy (streaming.ts): a fresh buffer per read made V8 collect the whole
 * heap over and over on a port-forward.
 *
 * `preface`, SPDY frames for the upgraded connection, goes out with the request itself
 * rather than after the 101: the runtime's server (k8s.io's httpstream, behind
 * containerd's and CRI-O's) reads what the client sent past the request before any new
 * bytes, so an exec's streams can open without waiting a round trip for its answer.
 */
export function openRuntime(
  url: URL,
  protocol: string,
  signal: AbortSignal,
  preface?: Buffer,
): Promise<Runtime> {
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
    const socket = connect({
      host: url.hostname,
      port: url.port === '' ? 80 : Number(url.port),
      onread: {
        buffer: () => RUNTIME_POOL.take(),
        callback: (n, buffer) => {
          const b = buffer as Buffer;
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
        },
      },
    });
    socket.setNoDelay(true);
    socket.on('error', (err) => {
      fail(`cannot reach the runtime streaming server: ${err.message}`);
    });
    socket.on('end', () => {
      fail('the runtime streaming server closed without an answer');
    });
    const head = Buffer.from(
      `POST ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n` +
        `Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: ${protocol}\r\n` +
        `Content-Length: 0\r\n\r\n`,
      'latin1',
    );
    // One write: the socket connects first, and two writes queued meanwhile could leave
    // in two segments.
    socket.write(preface === undefined ? head : Buffer.concat([head, preface]));
  });
}
