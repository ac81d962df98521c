/**
 * The exec/attach/portForward upgrade proxy: the kubelet answers the API server's
 * SPDY or WebSocket upgrade by opening the same upgrade to the URL the CRI runtime's
 * streaming server returned, relaying its 101 and headers, forwarding both head
 * buffers and piping both sockets. The runtime speaks the channel protocols, so
 * berth needs no SPDY or WebSocket framing of its own.
 *
 * The runtime side is a raw socket whose reads land in pooled buffers (net's onread)
 * rather than an http.request: a port-forward or an exec's output moves megabytes that
 * way, and a fresh buffer per read made V8 run full collections over berth's whole
 * heap (util/buffer-pool.ts). So berth writes the request head and reads the response
 * head itself (util/http1.ts).
 */
import type { IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import type { Duplex } from 'node:stream';
import { BufferPool } from '../util/buffer-pool.ts';
import type { Logger } from '../util/logger.ts';
import {
  forwardedRequestHead,
  headerValue,
  parseResponseHead,
  ResponseHeadError,
  type ResponseHead,
} from '../util/http1.ts';

/**
 * Read buffers for every stream: a stream holds one per write still in flight, and
 * backpressure bounds those, so a few idle ones cover the common case.
 */
const POOL = new BufferPool(64 * 1024, 16);

/** A runtime answer other than 101 with no Content-Length ends after this much quiet. */
const ANSWER_QUIET_MS = 1000;

/** Writes a whole HTTP response to a raw socket (upgrade requests have no ServerResponse). */
export function writeRawResponse(socket: Duplex, status: number, message: string): void {
  if (socket.destroyed) return;
  const body = Buffer.from(`${message}\n`);
  const reason = STATUS_TEXT[status] ?? 'Error';
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain; charset=utf-8\r\n` +
      `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body.toString()}`,
  );
}

const STATUS_TEXT: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

function isLoopback(hostname: string): boolean {
  return hostname === '127.0.0.1' || hostname === 'localhost' || hostname === '[::1]';
}

/**
 * The runtime's streaming URL, or why it is refused: the streaming server is expected on
 * loopback, and anything else is refused rather than turning the kubelet into a proxy
 * to arbitrary hosts.
 */
export function runtimeStreamUrl(target: string): URL | string {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return 'The runtime returned an invalid streaming URL';
  }
  if (url.protocol !== 'http:' || !isLoopback(url.hostname))
    return 'The runtime returned a non-loopback streaming URL';
  return url;
}

function headerBlock(statusLine: string, raw: readonly string[]): string {
  let out = `${statusLine}\r\n`;
  for (let i = 0; i + 1 < raw.length; i += 2) out += `${raw[i] ?? ''}: ${raw[i + 1] ?? ''}\r\n`;
  return `${out}\r\n`;
}

/**
 * The head relayed for a runtime answer that is not an upgrade (an error): its body is
 * relayed as it came, so its framing headers stay; the connection closes after it.
 */
function answerHead(res: ResponseHead): string {
  const raw: string[] = ['Connection', 'close'];
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
    const name = res.rawHeaders[i] ?? '';
    if (/^(connection|keep-alive)$/i.test(name)) continue;
    raw.push(name, res.rawHeaders[i + 1] ?? '');
  }
  return headerBlock(`HTTP/1.1 ${res.status} ${res.statusText}`, raw);
}

export interface ProxyOptions {
  readonly logger: Logger;
  /**
   * streamingConnectionIdleTimeout: a stream with no bytes either way for this long is
   * closed on both sides; 0 never.
   */
  readonly idleTimeoutMs: number;
}

/**
 * Proxies the upgrade `req` (its socket and the bytes read past its head) to the CRI
 * streaming `target`. Never throws: failures answer the client or close both sides.
 */
export function proxyUpgrade(
  req: IncomingMessage,
  client: Duplex,
  head: Buffer,
  target: string,
  options: ProxyOptions,
): void {
  const { logger } = options;
  const url = runtimeStreamUrl(target);
  if (typeof url === 'string') {
    writeRawResponse(client, 500, url);
    return;
  }
  /** head: reading the runtime's answer; stream: upgraded; answer: relaying a refusal. */
  let phase: 'head' | 'stream' | 'answer' = 'head';
  let pending: Buffer = Buffer.alloc(0);
  let bodyLeft = Number.POSITIVE_INFINITY;
  let paused = false;

  const relay = (chunk: Buffer, buffer: Buffer): boolean =>
    client.write(chunk, () => {
      POOL.give(buffer);
    });

  /** The body of a refusal: Content-Length bytes, else until the runtime goes quiet. */
  const relayAnswer = (chunk: Buffer, buffer: Buffer | undefined): boolean => {
    const part = chunk.subarray(0, Math.min(chunk.length, bodyLeft));
    bodyLeft -= part.length;
    const ok = buffer === undefined ? client.write(part) : relay(part, buffer);
    if (bodyLeft === 0) {
      client.end();
      upstream.destroy();
    }
    return ok;
  };

  const onHead = (res: ResponseHead): boolean => {
    if (res.status === 101) {
      phase = 'stream';
      client.write(res.bytes);
      if (res.rest.length > 0) client.write(res.rest);
      if (head.length > 0) upstream.write(head);
      // The client side is TLS: one socket read often holds many small records (the API
      // server writes each SPDY frame field on its own), and each would be a write to
      // the runtime. Corked until the next tick, they go out as one.
      client.on('data', () => {
        if (upstream.writableCorked > 0) return;
        upstream.cork();
        process.nextTick(() => {
          upstream.uncork();
        });
      });
      client.pipe(upstream);
      // Every byte either way passes through the runtime-side socket, so its idle timer
      // measures the stream's. The timer is the socket's own (real time), as a socket is.
      if (options.idleTimeoutMs > 0) {
        upstream.setTimeout(options.idleTimeoutMs, () => {
          logger.info('Closing an idle stream', {
            path: req.url,
            idleTimeoutMs: options.idleTimeoutMs,
          });
          upstream.destroy();
          client.destroy();
        });
      }
      return !client.writableNeedDrain;
    }
    // No upgrade (an error from the runtime): relay its answer as it is.
    phase = 'answer';
    client.write(answerHead(res));
    const length = Number(headerValue(res.rawHeaders, 'content-length') ?? Number.NaN);
    if (Number.isSafeInteger(length) && length >= 0) bodyLeft = length;
    else {
      // Ended, not destroyed: the client keeps what it has yet to flush.
      upstream.setTimeout(ANSWER_QUIET_MS, () => {
        client.end();
        upstream.destroy();
      });
    }
    if (res.rest.length > 0 || bodyLeft === 0) return relayAnswer(res.rest, undefined);
    return true;
  };

  const onBytes = (n: number, buffer: Buffer): boolean => {
    if (phase === 'stream') return relay(buffer.subarray(0, n), buffer);
    if (phase === 'answer') return relayAnswer(buffer.subarray(0, n), buffer);
    pending = Buffer.concat([pending, buffer.subarray(0, n)]);
    POOL.give(buffer);
    let res: ResponseHead | undefined;
    try {
      res = parseResponseHead(pending);
    } catch (err) {
      if (!(err instanceof ResponseHeadError)) throw err;
      logger.debug('Stream runtime answered badly', { error: err.message });
      writeRawResponse(client, 502, 'The runtime streaming server sent a malformed answer');
      upstream.destroy();
      return false;
    }
    return res === undefined ? true : onHead(res);
  };

  const upstream = connect({
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: url.port === '' ? 80 : Number(url.port),
    onread: {
      buffer: () => POOL.take(),
      // The buffer is the one `buffer()` returned; returning false pauses the socket
      // (isPaused() does not say so: it tracks flowing mode, which onread bypasses).
      callback: (n, buffer) => {
        const more = onBytes(n, buffer as Buffer);
        if (!more) paused = true;
        return more;
      },
    },
  });
  upstream.setNoDelay(true);
  upstream.write(
    forwardedRequestHead(
      req.method ?? 'GET',
      `${url.pathname}${url.search}`,
      url.host,
      req.rawHeaders,
    ),
  );
  client.on('drain', () => {
    if (!paused) return;
    paused = false;
    upstream.resume();
  });
  client.on('error', (err) => {
    logger.debug('Stream client socket error', { error: String(err) });
    upstream.destroy();
  });
  client.on('close', () => upstream.destroy());
  upstream.on('error', (err) => {
    logger.debug('Stream runtime socket failed', { error: String(err) });
    if (phase === 'head')
      writeRawResponse(client, 502, 'Cannot reach the runtime streaming server');
    else client.destroy();
  });
  upstream.on('end', () => {
    if (phase === 'head')
      writeRawResponse(client, 502, 'The runtime streaming server closed without an answer');
    else client.end();
  });
  // A close without an end (a reset, a timeout) cuts the client too; after an end the
  // client is left to flush what it still holds.
  upstream.on('close', () => {
    if (!client.writableEnded) client.destroy();
  });
}
