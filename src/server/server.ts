/**
 * The kubelet API server (:10250, HTTPS) and the healthz endpoint (127.0.0.1:10248,
 * plain HTTP). Every request is authenticated, then authorized on nodes/<node>/<sub>,
 * then routed; upgrade requests (exec, attach, portForward) go through the same gate on
 * the 'upgrade' event. Lifecycle: NEW -> RUNNING -> STOPPED; stop() is idempotent and
 * destroys connections in flight, upgraded streams included.
 */
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, Server } from 'node:http';
import { Socket, type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { CONNECTION_CLOSED, isAbortError } from '../util/errors.ts';
import { createServer as createHttpServer } from '../util/node-http.ts';
import {
  alwaysAllow,
  Authenticator,
  AuthorizerError,
  subresourcesFor,
  verbFor,
  WebhookAuthorizer,
  type Authorizer,
  type UserInfo,
} from './auth.ts';
import {
  HttpError,
  parseTarget,
  runningPods,
  serveContainerLogs,
  serveRun,
  type HandlerDeps,
  type ParsedTarget,
} from './handlers.ts';
import { kubeletHealthChecks, serveMonitoring, type MonitoringDeps } from './monitoring.ts';
import { serveNodeLogs } from './node-logs.ts';
import { streamingUrl, type StreamKind } from './stream-target.ts';
import { StreamDialer } from './runtime-upgrade.ts';
import { proxyUpgrade, writeRawResponse } from './streaming.ts';
import { serveTranslated, translationFor } from './ws-translate.ts';
import { createApiListener, type ApiListener } from './api-listener.ts';
import type { KubeletServerDeps, KubeletServerOptions, KubeletServerState } from './options.ts';
import {
  createHealthzServer,
  firstSegment,
  listen,
  STREAM_ROUTES,
  TLS_SETTINGS,
  trackRequest,
  type ApiRequest,
  type ApiResponse,
  type ServerType,
} from './transport.ts';

const DEBUG_ROUTES: ReadonlySet<string> = new Set([
  ...STREAM_ROUTES,
  'containerLogs',
  'runningpods',
  'run',
  'logs',
]);
/** What the read-only port serves: upstream's default handlers, never the debug ones. */
const READ_ONLY_ROUTES: ReadonlySet<string> = new Set(['healthz', 'pods', 'stats', 'metrics']);

/** The kubelet's HTTPS API and healthz listeners. */
export class KubeletServer {
  readonly #o: KubeletServerOptions;
  readonly #d: KubeletServerDeps;
  readonly #handlers: HandlerDeps;
  readonly #authn: Authenticator;
  readonly #authz: Authorizer;
  readonly #monitoring: MonitoringDeps;
  #state: KubeletServerState = 'NEW';
  #https: ApiListener | undefined;
  #unsubscribe: (() => void) | undefined;
  #healthz: Server | undefined;
  #readOnly: Server | undefined;
  /** Upgraded sockets: closeAllConnections() no longer sees them. */
  readonly #streams = new Set<Duplex>();
  /** Opens a translated stream's runtime connection during its CRI call. */
  readonly #dialer = new StreamDialer();

  constructor(options: KubeletServerOptions, deps: KubeletServerDeps) {
    this.#o = options;
    this.#d = deps;
    this.#handlers = {
      cri: deps.cri,
      clock: deps.clock,
      nodeName: options.nodeName,
      podLogsDir: options.podLogsDir,
      pods: deps.pods,
      ...(deps.runtimeCache !== undefined && { runtimeCache: deps.runtimeCache }),
    };
    this.#monitoring = {
      logger: deps.logger,
      metrics: deps.metrics,
      stats: deps.stats,
      configz: options.configz,
      debugFlags: options.debugFlags,
      healthChecks: kubeletHealthChecks(deps.syncLoopHealth),
    };
    this.#authn = new Authenticator({
      kube: deps.kube,
      clock: deps.clock,
      x509Enabled: options.clientCAFile !== null,
      webhookEnabled: options.webhookAuthentication,
      webhookCacheTTLMs: options.authenticationCacheTTLMs,
      anonymousEnabled: options.anonymous,
    });
    this.#authz =
      options.authorizationMode === 'AlwaysAllow'
        ? alwaysAllow
        : new WebhookAuthorizer({
            kube: deps.kube,
            clock: deps.clock,
            allowedTTLMs: options.authorizedTTLMs,
            deniedTTLMs: options.unauthorizedTTLMs,
          });
  }

  get state(): KubeletServerState {
    return this.#state;
  }

  /** The bound HTTPS port (after start). */
  get port(): number {
    return (this.#https?.server.address() as AddressInfo | null)?.port ?? 0;
  }

  /** The bound read-only port (after start); 0 when it is disabled. */
  get readOnlyPort(): number {
    return (this.#readOnly?.address() as AddressInfo | null)?.port ?? 0;
  }

  /** Reads the certificates and listens; rejects if a port cannot be bound. */
  async start(): Promise<void> {
    if (this.#state !== 'NEW')
      throw new Error(`Cannot start the kubelet server in state ${this.#state}`);
    this.#state = 'RUNNING';
    const source = this.#d.certificate;
    const [files, ca] = await Promise.all([
      source !== undefined || this.#o.tlsCertFile === null || this.#o.tlsPrivateKeyFile === null
        ? Promise.resolve(undefined)
        : Promise.all([readFile(this.#o.tlsCertFile), readFile(this.#o.tlsPrivateKeyFile)]),
      this.#o.clientCAFile === null ? Promise.resolve(undefined) : readFile(this.#o.clientCAFile),
    ]);
    if (source === undefined && files === undefined)
      throw new Error('Cannot serve the kubelet API as it has no serving certificate');
    const rotating = source?.current();
    const pair =
      files !== undefined
        ? { cert: files[0], key: files[1] }
        : rotating !== undefined
          ? { cert: rotating.certPem, key: rotating.keyPem }
          : {};
    const listener = createApiListener(
      {
        ...pair,
        ...(ca !== undefined && { ca }),
        // The chain is checked (socket.authorized) but a request without a valid
        // certificate may still authenticate with a token, as upstream allows.
        requestCert: true,
        rejectUnauthorized: false,
        ...TLS_SETTINGS,
        ...(this.#o.tlsMinVersion !== undefined && { minVersion: this.#o.tlsMinVersion }),
      },
      {
        logger: this.#d.logger,
        clock: this.#d.clock,
        shouldUpgrade: (req) => this.#isStreamUpgrade(req),
        request: (req, res) => {
          this.#onRequest(req, res, 'readwrite');
        },
        upgrade: (req, socket, head) => {
          this.#onUpgrade(req, socket, head);
        },
      },
    );
    const { server } = listener;
    this.#https = listener;
    if (source !== undefined) {
      // A rotated certificate is used for new connections, without a restart. The
      // context is replaced whole, so the client CA and TLS settings go with it.
      this.#unsubscribe = source.onRotate(() => {
        const next = source.current();
        if (next === undefined) return;
        listener.server.setSecureContext({
          cert: next.certPem,
          key: next.keyPem,
          ...(ca !== undefined && { ca }),
          ...TLS_SETTINGS,
        });
        this.#d.logger.info('Serving certificate rotated', {});
      });
      if (rotating === undefined)
        this.#d.logger.info('Waiting for a serving certificate (serverTLSBootstrap)', {});
    }
    await listen(server, this.#o.port, this.#o.address);
    this.#d.logger.info('Kubelet API listening', { address: this.#o.address, port: this.port });
    if (this.#o.healthzPort > 0) {
      this.#healthz = createHealthzServer();
      await listen(this.#healthz, this.#o.healthzPort, this.#o.healthzAddress);
    }
    const readOnlyPort = this.#o.readOnlyPort ?? 0;
    if (readOnlyPort > 0) {
      const readOnly = createHttpServer((req, res) => {
        this.#onRequest(req, res, 'readonly');
      });
      readOnly.on('clientError', (_err, socket: Duplex) => socket.destroy());
      this.#readOnly = readOnly;
      await listen(readOnly, readOnlyPort, this.#o.address);
      this.#d.logger.info('Kubelet read-only API listening', {
        address: this.#o.address,
        port: this.readOnlyPort,
      });
    }
  }

  /** Stops listening and destroys every open connection and stream. Idempotent. */
  async stop(): Promise<void> {
    if (this.#state === 'STOPPED') return;
    this.#state = 'STOPPED';
    this.#unsubscribe?.();
    const https = this.#https;
    const closing = [https?.server, this.#healthz, this.#readOnly]
      .filter((s) => s !== undefined)
      .map(
        (s) =>
          new Promise<void>((resolve) => {
            s.close(() => {
              resolve();
            });
          }),
      );
    https?.destroyConnections();
    this.#healthz?.closeAllConnections();
    this.#readOnly?.closeAllConnections();
    for (const s of this.#streams) s.destroy();
    this.#streams.clear();
    await Promise.all(closing);
  }

  #isStreamUpgrade(req: IncomingMessage): boolean {
    if (req.headers.upgrade === undefined || !this.#o.debuggingHandlers) return false;
    return STREAM_ROUTES.has(firstSegment(req));
  }

  /** Authenticates and authorizes; the returned error status is what to answer. */
  async #gate(
    req: ApiRequest,
    websocketStream: boolean,
    signal: AbortSignal,
  ): Promise<{ target: ParsedTarget; user: UserInfo }> {
    const user = await this.#authn.authenticate(req, signal);
    if (user === undefined) throw new HttpError(401, 'Unauthorized');
    const target = parseTarget(req.url ?? '/');
    const verb = verbFor(req.method ?? 'GET', websocketStream);
    if (verb === undefined) throw new HttpError(405, `Cannot serve method ${req.method ?? ''}`);
    const subresources = subresourcesFor(`/${target.segments.join('/')}`);
    for (const subresource of subresources) {
      const allowed = await this.#authz.authorize(
        { user, verb, nodeName: this.#o.nodeName, subresource },
        signal,
      );
      if (allowed) return { target, user };
    }
    throw new HttpError(
      403,
      `Forbidden (user=${user.username}, verb=${verb}, resource=nodes, subresource(s)=[${subresources.join(', ')}])`,
    );
  }

  #onRequest(req: ApiRequest, res: ApiResponse, serverType: ServerType): void {
    const abort = new AbortController();
    const finished = trackRequest(this.#d.metrics, req, false, serverType);
    res.on('close', () => {
      finished();
      abort.abort(CONNECTION_CLOSED);
    });
    res.on('error', (err) => {
      this.#d.logger.debug('Response error', { error: String(err) });
    });
    const serving =
      serverType === 'readonly'
        ? this.#serveReadOnly(req, res, abort.signal)
        : this.#serve(req, res, abort.signal);
    serving.catch((err: unknown) => {
      this.#fail(err, req, (status, message) => {
        if (res.headersSent) {
          res.destroy();
          return;
        }
        res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' }).end(`${message}\n`);
      });
    });
  }

  /** The read-only port: no authentication, and only the routes upstream serves there. */
  async #serveReadOnly(req: ApiRequest, res: ApiResponse, signal: AbortSignal): Promise<void> {
    const target = parseTarget(req.url ?? '/');
    if (!READ_ONLY_ROUTES.has(target.segments[0] ?? ''))
      throw new HttpError(404, '404 page not found');
    await this.#route(target, req, res, signal);
  }

  async #serve(req: ApiRequest, res: ApiResponse, signal: AbortSignal): Promise<void> {
    const { target } = await this.#gate(req, false, signal);
    await this.#route(target, req, res, signal);
  }

  async #route(
    target: ParsedTarget,
    req: ApiRequest,
    res: ApiResponse,
    signal: AbortSignal,
  ): Promise<void> {
    const first = target.segments[0] ?? '';
    if (!this.#o.debuggingHandlers && DEBUG_ROUTES.has(first)) {
      throw new HttpError(404, '404 page not found');
    }
    // shouldUpgradeCallback sent only stream routes to 'upgrade'; an Upgrade header
    // anywhere else is refused rather than half-served.
    if (req.headers.upgrade !== undefined) {
      throw new HttpError(400, `Cannot upgrade /${first}: the route has no streaming protocol`);
    }
    if (await serveMonitoring(this.#monitoring, target, req, res, signal)) return;
    if (first === 'pods' && target.segments.length === 1) {
      if (req.method !== 'GET' && req.method !== 'HEAD')
        throw new HttpError(405, 'Cannot serve /pods: GET only');
      const items = [...this.#d.pods().values()];
      res
        .writeHead(200, { 'Content-Type': 'application/json' })
        .end(JSON.stringify({ kind: 'PodList', apiVersion: 'v1', metadata: {}, items }));
      return;
    }
    if (first === 'runningpods' && target.segments.length === 1) {
      if (req.method !== 'GET') throw new HttpError(405, 'Cannot serve /runningpods/: GET only');
      const list = await runningPods(this.#handlers, signal);
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(list));
      return;
    }
    if (first === 'containerLogs') {
      if (req.method !== 'GET') throw new HttpError(405, 'Cannot serve container logs: GET only');
      await serveContainerLogs(this.#handlers, target, res, signal);
      return;
    }
    if (first === 'run') {
      if (req.method !== 'POST') throw new HttpError(405, 'Cannot serve /run: POST only');
      await serveRun(this.#handlers, target, res, signal);
      return;
    }
    if (first === 'logs' && this.#o.systemLogHandler !== false) {
      const logs = {
        root: this.#o.nodeLogsDir ?? '/var/log',
        systemLogQuery: this.#o.systemLogQuery === true,
        clock: this.#d.clock,
        ...(this.#o.journalctl === undefined ? {} : { journalctl: this.#o.journalctl }),
      };
      await serveNodeLogs(logs, target, req, res, signal);
      return;
    }
    if (STREAM_ROUTES.has(first))
      throw new HttpError(400, `Cannot serve /${first} without an upgrade (SPDY or WebSocket)`);
    throw new HttpError(404, '404 page not found');
  }

  #onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    this.#streams.add(socket);
    const abort = new AbortController();
    const finished = trackRequest(this.#d.metrics, req, true, 'readwrite');
    socket.on('error', (err) => {
      this.#d.logger.debug('Stream socket error', { error: String(err) });
    });
    socket.on('close', () => {
      finished();
      this.#streams.delete(socket);
      abort.abort(CONNECTION_CLOSED);
    });
    // Streams live long; the server's idle timeouts must not cut them.
    if (socket instanceof Socket) socket.setTimeout(0);
    const websocket = req.headers.upgrade?.toLowerCase() === 'websocket';
    void (async () => {
      const { target } = await this.#gate(req, websocket && req.method === 'GET', abort.signal);
      const kind = target.segments[0] as StreamKind;
      const translation = websocket ? translationFor(kind, req) : undefined;
      // Authorized: the runtime's connection opens while the CRI call names the URL.
      const early = translation === undefined ? undefined : this.#dialer.early();
      let answer;
      try {
        answer = await streamingUrl(this.#handlers, kind, target, abort.signal);
      } catch (err) {
        early?.socket.destroy();
        throw err;
      }
      const options = {
        logger: this.#d.logger,
        idleTimeoutMs: this.#o.streamingConnectionIdleTimeoutMs ?? 0,
      };
      if (translation !== undefined) {
        serveTranslated(req, socket, head, answer.url, translation, answer.streams, {
          ...options,
          dialer: this.#dialer,
          early,
        });
      } else proxyUpgrade(req, socket, head, answer.url, options);
    })().catch((err: unknown) => {
      this.#fail(err, req, (status, message) => {
        writeRawResponse(socket, status, message);
      });
    });
  }

  #fail(err: unknown, req: ApiRequest, reply: (status: number, message: string) => void): void {
    if (isAbortError(err)) return;
    if (err instanceof HttpError) {
      reply(err.status, err.message);
      return;
    }
    if (err instanceof AuthorizerError) {
      this.#d.logger.warn('Authorization failed', { path: req.url, error: String(err.cause) });
      reply(500, 'Internal Server Error: the authorizer failed');
      return;
    }
    this.#d.logger.error('Kubelet API request failed', { path: req.url, error: String(err) });
    reply(500, `Internal Server Error: ${err instanceof Error ? err.message : String(err)}`);
  }
}
