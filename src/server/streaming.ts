/**
 * The exec/attach/portForward upgrade proxy: the kubelet answers the API server's
 * SPDY or WebSocket upgrade by opening the same upgrade to the URL the CRI runtime's
 * streaming server returned, relaying its 101 and headers, forwarding both head
 * buffers and piping both sockets. The runtime speaks the channel protocols, so
 * berth needs no SPDY or WebSocket framing of its own.
 */
import { request, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../util/logger.ts';

/** Headers that describe this hop only, or that carry the caller's credentials. */
const DROPPED = new Set(['host', 'authorization', 'proxy-authorization', 'content-length']);

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

function headerBlock(statusLine: string, raw: readonly string[]): string {
  let out = `${statusLine}\r\n`;
  for (let i = 0; i + 1 < raw.length; i += 2) out += `${raw[i] ?? ''}: ${raw[i + 1] ?? ''}\r\n`;
  return `${out}\r\n`;
}

function forwardHeaders(
  headers: IncomingHttpHeaders,
  host: string,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = { host };
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined || DROPPED.has(k)) continue;
    out[k] = v;
  }
  return out;
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
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    writeRawResponse(client, 500, 'The runtime returned an invalid streaming URL');
    return;
  }
  // The runtime's streaming server is expected on loopback; anything else is refused
  // rather than turning the kubelet into a proxy to arbitrary hosts.
  if (url.protocol !== 'http:' || !isLoopback(url.hostname)) {
    writeRawResponse(client, 500, 'The runtime returned a non-loopback streaming URL');
    return;
  }
  const upstreamReq = request({
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: url.port === '' ? 80 : Number(url.port),
    path: `${url.pathname}${url.search}`,
    method: req.method ?? 'GET',
    headers: forwardHeaders(req.headers, url.host),
  });
  let answered = false;
  client.on('error', (err) => {
    logger.debug('Stream client socket error', { error: String(err) });
    upstreamReq.destroy();
  });
  client.on('close', () => {
    if (!answered) upstreamReq.destroy();
  });
  upstreamReq.on('error', (err) => {
    logger.debug('Stream runtime request failed', { error: String(err) });
    if (!answered) writeRawResponse(client, 502, 'Cannot reach the runtime streaming server');
    else client.destroy();
  });
  upstreamReq.on('upgrade', (res: IncomingMessage, upstream: Duplex, upstreamHead: Buffer) => {
    answered = true;
    upstream.on('error', (err) => {
      logger.debug('Stream runtime socket error', { error: String(err) });
      client.destroy();
    });
    if (client.destroyed) {
      upstream.destroy();
      return;
    }
    client.write(
      headerBlock(`HTTP/1.1 101 ${res.statusMessage ?? 'Switching Protocols'}`, res.rawHeaders),
    );
    if (upstreamHead.length > 0) client.write(upstreamHead);
    if (head.length > 0) upstream.write(head);
    upstream.pipe(client);
    client.pipe(upstream);
    // Every byte either way passes through the runtime-side socket, so its idle timer
    // measures the stream's. The timer is the socket's own (real time), as a socket is.
    if (options.idleTimeoutMs > 0 && upstream instanceof Socket) {
      upstream.setTimeout(options.idleTimeoutMs, () => {
        logger.info('Closing an idle stream', {
          path: req.url,
          idleTimeoutMs: options.idleTimeoutMs,
        });
        upstream.destroy();
        client.destroy();
      });
    }
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
  });
  upstreamReq.on('response', (res: IncomingMessage) => {
    // No upgrade (an error from the runtime): relay its answer as it is.
    answered = true;
    res.on('error', () => client.destroy());
    // The body is relayed decoded and the connection closed after it, so framing
    // headers of the runtime's answer do not apply any more.
    const raw: string[] = ['Connection', 'close'];
    for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
      const name = res.rawHeaders[i] ?? '';
      if (/^(connection|transfer-encoding|content-length|keep-alive)$/i.test(name)) continue;
      raw.push(name, res.rawHeaders[i + 1] ?? '');
    }
    client.write(headerBlock(`HTTP/1.1 ${res.statusCode ?? 502} ${res.statusMessage ?? ''}`, raw));
    res.pipe(client);
  });
  upstreamReq.end();
}
