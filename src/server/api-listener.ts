/**
 * The TLS listener of the kubelet API (:10250), speaking HTTP/2 and HTTP/1.1 as
 * upstream's Go server does (ALPN "h2", then "http/1.1").
 *
 * Why HTTP/2: the API server's kubelet client negotiates it, and then sends every
 * logs, stats and metrics request over one long-lived connection. Over HTTP/1.1 each
 * `kubectl logs -f` took a connection of its own (cancelling a follow closes it), so
 * each paid a new TLS handshake, and Node's handshake is the slowest part of berth's
 * answer. Upgrades (exec, attach, port-forward over SPDY or WebSocket) stay HTTP/1.1:
 * clients ask for them on a connection of their own with ALPN http/1.1.
 *
 * Connections: HTTP/1.1 ones stay open 90 s between requests and HTTP/2 ones 90 s
 * without a stream, then close gracefully (upstream's IdleTimeout). A stream in
 * progress, such as a quiet `logs -f`, keeps its connection however long it lasts.
 */
import type { IncomingMessage } from 'node:http';
import {
  createSecureServer,
  type Http2SecureServer,
  type SecureServerOptions,
  type ServerHttp2Session,
} from 'node:http2';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import type { ApiRequest, ApiResponse } from './transport.ts';

/** Upstream's http.Server IdleTimeout. */
const IDLE_TIMEOUT_MS = 90_000;
/**
 * How long an HTTP/1.1 connection may stay silent before its first request. Node closes
 * a connection that starts a request and trickles it (headersTimeout) and one that never
 * finishes the TLS handshake (handshakeTimeout), but one that completes the handshake
 * and then says nothing was held forever: any client, certificate or not, could pile
 * them up. Upstream's Go server closes it only after its ReadTimeout (4 h); berth waits as
 * long as it lets a connection idle between requests.
 */
const FIRST_REQUEST_TIMEOUT_MS = IDLE_TIMEOUT_MS;
/** Why an idle wait ended early; shared, as each abort would otherwise build an error. */
const STREAM_OPENED = new DOMException('A stream opened', 'AbortError');
/** Go's HTTP/2 server default; Node's own is unbounded. */
const MAX_CONCURRENT_STREAMS = 250;

export interface ApiListenerHandlers {
  readonly logger: Logger;
  /** Times the idle close of HTTP/2 connections. */
  readonly clock: Clock;
  /** Whether an HTTP/1.1 request with an Upgrade header goes to `upgrade`. */
  readonly shouldUpgrade: (req: IncomingMessage) => boolean;
  readonly request: (req: ApiRequest, res: ApiResponse) => void;
  readonly upgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  /** Tests only: how long a new HTTP/1.1 connection may wait for its first request. */
  readonly firstRequestTimeoutMs?: number;
}

/** The listener, and a way to cut every connection at once (stop()). */
export interface ApiListener {
  readonly server: Http2SecureServer;
  /** Destroys every open connection, streams and upgraded sockets included. */
  destroyConnections(): void;
}

/**
 * What node:http2's server has beside its typings when it accepts HTTP/1.1: the HTTP/1
 * server options it applies to those connections (read at request time).
 */
interface Http1Options {
  shouldUpgradeCallback: (req: IncomingMessage) => boolean;
  keepAliveTimeout: number;
}

/** Creates the listener with `tls` (certificate, client CA, TLS settings); does not listen. */
export function createApiListener(
  tls: SecureServerOptions,
  handlers: ApiListenerHandlers,
): ApiListener {
  const server = createSecureServer({
    ...tls,
    allowHTTP1: true,
    settings: { maxConcurrentStreams: MAX_CONCURRENT_STREAMS },
  });
  const http1 = server as unknown as Http1Options;
  // Only the streaming routes may upgrade; any other Upgrade header is routed (and
  // refused) like a plain request, so it cannot skip the router.
  http1.shouldUpgradeCallback = handlers.shouldUpgrade;
  http1.keepAliveTimeout = IDLE_TIMEOUT_MS;
  const connections = new Set<TLSSocket>();
  server.on('request', (req: ApiRequest, res: ApiResponse) => {
    // A request came: the first-request wait is over (node:http times keep-alive itself).
    if (req.httpVersionMajor === 1) req.socket.setTimeout(0);
    handlers.request(req, res);
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    req.socket.setTimeout(0);
    handlers.upgrade(req, socket, head);
  });
  const firstRequestMs = handlers.firstRequestTimeoutMs ?? FIRST_REQUEST_TIMEOUT_MS;
  server.on('secureConnection', (socket: TLSSocket) => {
    prepareConnection(socket);
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
    // HTTP/2 sessions have closeWhenIdle; node:http destroys a socket whose timeout
    // nobody else answers.
    if (socket.alpnProtocol !== 'h2') socket.setTimeout(firstRequestMs);
  });
  server.on('session', (session: ServerHttp2Session) => {
    closeWhenIdle(session, handlers.clock);
  });
  server.on('tlsClientError', (err) => {
    handlers.logger.debug('TLS handshake failed', { error: String(err) });
  });
  // HTTP/1.1 parse errors (node:http's clientError) and HTTP/2 session errors.
  server.on('clientError', (err: Error, socket: Duplex) => {
    handlers.logger.debug('Client error', { error: String(err) });
    socket.destroy();
  });
  server.on('sessionError', (err) => {
    handlers.logger.debug('HTTP/2 session error', { error: String(err) });
  });
  return {
    server,
    destroyConnections() {
      for (const socket of connections) socket.destroy();
      connections.clear();
    },
  };
}

/**
 * What every connection gets before its first request, as upstream's Go server gives it.
 * - No Nagle delay. node:https sets it for each connection; node:http2's server does not
 *   (its `noDelay` is false even for the HTTP/1.1 it accepts), so an exec's status and
 *   close, or a port-forward's last segment, could wait for the API server's ACK.
 * - No renegotiation: Go's TLS server never renegotiates, and refusing it keeps a
 *   connection's client certificate fixed, which the authenticator relies on.
 */
export function prepareConnection(
  socket: Pick<TLSSocket, 'setNoDelay' | 'disableRenegotiation'>,
): void {
  socket.setNoDelay(true);
  socket.disableRenegotiation();
}

/**
 * Closes `session` gracefully once it has had no stream for IDLE_TIMEOUT_MS. Node's
 * own session timeout counts a quiet stream as idleness and destroys the session with
 * the stream in it, which would cut a `logs -f` on a container that says nothing.
 */
function closeWhenIdle(session: ServerHttp2Session, clock: Clock): void {
  let open = 0;
  let idle: AbortController | undefined;
  const arm = (): void => {
    const wait = new AbortController();
    idle = wait;
    clock.sleep(IDLE_TIMEOUT_MS, wait.signal).then(
      () => {
        if (open === 0 && !session.closed) session.close();
      },
      () => undefined,
    );
  };
  const disarm = (): void => {
    idle?.abort(STREAM_OPENED);
    idle = undefined;
  };
  session.on('stream', (stream) => {
    open += 1;
    disarm();
    stream.once('close', () => {
      open -= 1;
      if (open === 0 && !session.closed) arm();
    });
  });
  session.once('close', disarm);
  arm();
}
