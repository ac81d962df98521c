/**
 * What the kubelet API's listeners share: TLS settings, binding, the plain-HTTP healthz
 * listener and the kubelet_http_* request accounting (labelled by server_type, as
 * upstream labels the read-write :10250 and the read-only port apart).
 */
import { constants } from 'node:crypto';
import type { IncomingMessage, OutgoingHttpHeaders, Server } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import type { Server as NetServer, Socket } from 'node:net';
import type { Duplex, Writable } from 'node:stream';
import type { KubeletMetrics } from '../metrics/registry.ts';
import { createServer as createHttpServer } from '../util/node-http.ts';

/**
 * The CIS-approved TLS 1.2 suites; TLS 1.3 suites are all strong and left as Node's.
 *
 * No stateless session tickets: by default OpenSSL ends every TLS 1.3 handshake with two
 * tickets, each the whole session (the client's certificate in it) serialized and
 * encrypted, 1.5 KB for the two, written before the connection's first request is
 * read. The kubelet's clients never come back with one: the API server dials afresh for
 * every exec, attach and port-forward with a Go client that keeps no session cache. A
 * Node server with this option costs 0.07 ms less CPU per connection (600 handshakes,
 * ad hoc); its TLS 1.3 tickets are bare session IDs that no cache holds, so no session
 * is resumed, and every connection's certificate is checked afresh.
 */
export const TLS_SETTINGS = {
  minVersion: 'TLSv1.2',
  ciphers: [
    'ECDHE-ECDSA-AES128-GCM-SHA256',
    'ECDHE-RSA-AES128-GCM-SHA256',
    'ECDHE-ECDSA-AES256-GCM-SHA384',
    'ECDHE-RSA-AES256-GCM-SHA384',
    'ECDHE-ECDSA-CHACHA20-POLY1305',
    'ECDHE-RSA-CHACHA20-POLY1305',
  ].join(':'),
  honorCipherOrder: true,
  secureOptions: constants.SSL_OP_NO_TICKET,
} as const;

export const STREAM_ROUTES: ReadonlySet<string> = new Set(['exec', 'attach', 'portForward']);

/** Root paths reported as such in kubelet_http_requests_*; anything else is "other". */
const METRIC_PATHS: ReadonlySet<string> = new Set([
  ...STREAM_ROUTES,
  'containerLogs',
  'runningpods',
  'pods',
  'healthz',
  'metrics',
  'stats',
  'configz',
  'run',
  'logs',
  'checkpoint',
  'debug',
]);

export type ServerType = 'readwrite' | 'readonly';

/** A request to the kubelet API: HTTP/1.1 (node:http) or HTTP/2 (node:http2's compat API). */
export type ApiRequest = IncomingMessage | Http2ServerRequest;

/** What the handlers need of a response; node:http's and node:http2's both have it. */
export interface ApiResponse extends Writable {
  readonly headersSent: boolean;
  writeHead(statusCode: number, headers?: OutgoingHttpHeaders): this;
  /**
   * Sends the headers before any body (node:http). HTTP/2's writeHead sends them at
   * once, so there it is a no-op (and absent from its typings).
   */
  flushHeaders?(): void;
}

/**
 * The connection `req` came on. HTTP/2's `req.socket` is a fresh proxy per stream, so
 * anything cached per connection (the client certificate) is keyed on the session's.
 */
export function connectionOf(req: ApiRequest): Socket {
  return 'stream' in req ? (req.stream.session?.socket ?? req.socket) : req.socket;
}

/** The first path segment of a request target ("" for "/"). */
export function firstSegment(req: ApiRequest): string {
  return (req.url ?? '').split(/[/?]/)[1] ?? '';
}

/** Counts a request in kubelet_http_* and returns what to call when it is over. */
export function trackRequest(
  metrics: KubeletMetrics | undefined,
  req: ApiRequest,
  longRunning: boolean,
  serverType: ServerType,
): () => void {
  if (metrics === undefined) return () => undefined;
  const first = firstSegment(req);
  const labels = {
    method: req.method ?? '',
    path: METRIC_PATHS.has(first) ? first : 'other',
    server_type: serverType,
    long_running: String(longRunning),
  };
  metrics.httpRequests.inc(labels);
  metrics.httpInflightRequests.inc(labels);
  const started = performance.now();
  let done = false;
  return () => {
    if (done) return;
    done = true;
    metrics.httpInflightRequests.dec(labels);
    metrics.httpRequestsDuration.observe(labels, (performance.now() - started) / 1000);
  };
}

/** The healthz listener: /healthz answers "ok", everything else 404. */
export function createHealthzServer(): Server {
  const healthz = createHttpServer((req, res) => {
    if (req.url === '/healthz' || req.url?.startsWith('/healthz?') === true) {
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' }).end('ok');
    } else {
      res
        .writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' })
        .end('404 page not found\n');
    }
  });
  healthz.on('clientError', (_err, socket: Duplex) => socket.destroy());
  return healthz;
}

/** Binds `server`; rejects if the port cannot be bound. */
export function listen(server: NetServer, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => {
      reject(err);
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      // A listening server's later errors are logged by the owner's handler, not thrown.
      server.on('error', () => undefined);
      resolve();
    });
  });
}
