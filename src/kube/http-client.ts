/**
 * `HttpKubeClient`: the real `KubeClient`, a thin JSON client over node's http/https
 * (transport.ts says why not undici).
 *
 * - One long-lived keep-alive Agent per credential set, so requests reuse
 *   connections instead of paying a TLS handshake each. `setCredentials` (or `reload`
 *   from the kubeconfig) swaps in a new Agent when the TLS material changes; the old
 *   one finishes its in-flight requests (watches included, up to `drainTimeoutMs`) and
 *   is then closed.
 * - A client-side token bucket (kubeAPIQPS / kubeAPIBurst): every request, and the
 *   start of every watch, takes one token; a running watch holds none.
 * - An answer of 429 or 5xx with Retry-After is waited out (on the injected clock) and
 *   the request sent again, up to 10 times, as client-go's rest client does.
 * - Errors: an answer other than 2xx becomes `KubeApiError` from its metav1.Status;
 *   a transport failure is status 0, reason Unknown, with the cause. Aborting through
 *   the caller's signal rejects with the signal's reason (a watch just ends).
 * - Watches ask for bookmarks and a server-side timeout, and have no body timeout: a
 *   quiet watch is normal, and the reflector's stall timer covers dead ones.
 */
import type { IncomingMessage } from 'node:http';
import type { Clock } from '../util/clock.ts';
import { systemClock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import { BerthError } from '../util/errors.ts';
import { loadKubeconfig, type KubeCredentials } from './kubeconfig.ts';
import { lines, parseEvent } from './watch-stream.ts';
import { queryString, resourceUrlPath } from './paths.ts';
import { TokenBucket } from './rate-limiter.ts';
import { defaultUserAgent } from './user-agent.ts';
import { drain, Endpoint, readText } from './transport.ts';
import {
  errorFromStatus,
  isStatus,
  MAX_RETRY_AFTER_RETRIES,
  retryAfterMs,
  statusFromWatchError,
} from './status.ts';
import {
  KubeApiError,
  type DeleteOptions,
  type KubeClient,
  type ListOptions,
  type ListResult,
  type PatchOptions,
  type PatchType,
  type RequestOptions,
  type ResourcePath,
  type WatchEvent,
  type WatchOptions,
  type WriteOptions,
} from './types.ts';

/** The Content-Type the apiserver expects for each patch type. */
const PATCH_CONTENT_TYPES: Readonly<Record<PatchType, string>> = {
  strategic: 'application/strategic-merge-patch+json',
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  apply: 'application/apply-patch+yaml',
};

/** Options of `HttpKubeClient`; defaults follow the kubelet's. */
export interface HttpKubeClientOptions {
  readonly credentials: KubeCredentials;
  /** Where `reload()` reads credentials again (the kubelet's --kubeconfig). */
  readonly kubeconfig?: { readonly path: string; readonly context?: string };
  readonly clock?: Clock;
  readonly logger?: Logger;
  /** kubeAPIQPS (default 50). Zero or less disables the limiter. */
  readonly qps?: number;
  /** kubeAPIBurst (default 100). */
  readonly burst?: number;
  readonly userAgent?: string;
  /** Headers and body timeout of ordinary requests (default 60 s, the apiserver's own). */
  readonly requestTimeoutMs?: number;
  /** How long a watch may wait for response headers (default 60 s). */
  readonly watchHeadersTimeoutMs?: number;
  /** How long a retired Agent may keep serving in-flight requests (default 10 min). */
  readonly drainTimeoutMs?: number;
}

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

interface Connection {
  readonly endpoint: Endpoint;
  readonly tlsKey: string;
  authorization: string | undefined;
}

interface Sent {
  readonly res: IncomingMessage;
  /** "GET /api/v1/…", the prefix of error messages. */
  readonly context: string;
}

interface SendOptions {
  readonly body?: string;
  readonly contentType?: string;
  readonly signal?: AbortSignal | undefined;
  readonly watch?: boolean;
}

function tlsIdentity(c: KubeCredentials): string {
  return JSON.stringify([
    c.server,
    c.ca ?? '',
    c.cert ?? '',
    c.key ?? '',
    c.insecureSkipTlsVerify,
    c.tlsServerName ?? '',
  ]);
}

function errorText(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return typeof code === 'string' ? `${err.message} (${code})` : err.message;
  }
  return String(err);
}

/** The real `KubeClient` over node's http/https (see the top of this file). */
export class HttpKubeClient implements KubeClient {
  readonly #options: HttpKubeClientOptions;
  readonly #clock: Clock;
  readonly #limiter: TokenBucket;
  readonly #userAgent: string;
  readonly #requestTimeoutMs: number;
  #credentials: KubeCredentials;
  #connection: Connection | undefined;
  readonly #retiring = new Set<Promise<void>>();
  readonly #retiringEndpoints = new Set<Endpoint>();
  /** Bodies of running watches: close() ends them, as they would hold an Agent open for minutes. */
  readonly #watches = new Set<IncomingMessage>();
  #closed = false;

  constructor(options: HttpKubeClientOptions) {
    this.#options = options;
    this.#credentials = options.credentials;
    this.#clock = options.clock ?? systemClock;
    this.#limiter = new TokenBucket({
      qps: options.qps ?? 50,
      burst: options.burst ?? 100,
      clock: this.#clock,
    });
    this.#userAgent = options.userAgent ?? defaultUserAgent();
    this.#requestTimeoutMs = options.requestTimeoutMs ?? 60_000;
  }

  /** A client for the kubeconfig at `path`; `reload()` reads the same file again. */
  static async fromKubeconfig(
    path: string,
    options: Omit<HttpKubeClientOptions, 'credentials' | 'kubeconfig'> & {
      readonly context?: string;
    } = {},
  ): Promise<HttpKubeClient> {
    const { context, ...rest } = options;
    const kubeconfig = context === undefined ? { path } : { path, context };
    const credentials = await loadKubeconfig(path, context === undefined ? {} : { context });
    return new HttpKubeClient({ ...rest, credentials, kubeconfig });
  }

  /** The server URL in use. */
  get server(): string {
    return this.#credentials.server;
  }

  /**
   * Switches to new credentials. A new token applies to the next request; new TLS
   * material (a rotated client certificate) gets a new Agent, and the old one is
   * closed once its in-flight requests finish. Returns true when the Agent changed.
   */
  setCredentials(credentials: KubeCredentials): boolean {
    if (this.#closed) {
      throw new BerthError('BERTH_KUBE_CLOSED', 'Cannot set credentials as the client is closed');
    }
    const previous = this.#connection;
    this.#credentials = credentials;
    if (previous === undefined) return false;
    if (previous.tlsKey === tlsIdentity(credentials)) {
      previous.authorization = authorization(credentials);
      return false;
    }
    this.#connection = undefined;
    this.#retire(previous.endpoint);
    this.#options.logger?.info('Kubernetes API credentials rotated, new connections', {
      server: credentials.server,
    });
    return true;
  }

  /** Reads the kubeconfig again and applies it (see `setCredentials`). */
  async reload(): Promise<boolean> {
    const source = this.#options.kubeconfig;
    if (source === undefined) {
      throw new BerthError(
        'BERTH_KUBE_NO_KUBECONFIG',
        'Cannot reload credentials as the client was not created from a kubeconfig',
      );
    }
    const credentials = await loadKubeconfig(
      source.path,
      source.context === undefined ? {} : { context: source.context },
    );
    return this.setCredentials(credentials);
  }

  #retire(endpoint: Endpoint): void {
    const done = new AbortController();
    const drainMs = this.#options.drainTimeoutMs ?? 600_000;
    const retire = (async () => {
      // Whichever comes first: the last in-flight request ends, or the drain time is up.
      const timer = this.#clock.sleep(drainMs, done.signal).catch(() => undefined);
      await Promise.race([endpoint.idle(), timer]);
      done.abort();
      endpoint.destroy();
    })();
    this.#retiring.add(retire);
    this.#retiringEndpoints.add(endpoint);
    void retire.finally(() => {
      this.#retiring.delete(retire);
      this.#retiringEndpoints.delete(endpoint);
    });
  }

  #connect(): Connection {
    if (this.#connection !== undefined) return this.#connection;
    const c = this.#credentials;
    this.#connection = {
      endpoint: new Endpoint(c),
      tlsKey: tlsIdentity(c),
      authorization: authorization(c),
    };
    return this.#connection;
  }

  /**
   * Sends the request; an answer of 429 or 5xx with Retry-After is waited out and the
   * request sent again, up to 10 times, as client-go's rest client does: the apiserver
   * sheds load that way, and a caller's own back-off (a reflector's, up to 30 s) would
   * otherwise keep it away long after the overload ended.
   */
  async #send(method: Method, path: string, o: SendOptions): Promise<Sent> {
    for (let retries = 0; ; retries++) {
      const sent = await this.#sendOnce(method, path, o, retries < MAX_RETRY_AFTER_RETRIES);
      if (typeof sent !== 'number') return sent;
      await this.#clock.sleep(sent, o.signal);
    }
  }

  /** One attempt; a number is the wait the server asked for before the next (when `mayRetry`). */
  async #sendOnce(
    method: Method,
    path: string,
    o: SendOptions,
    mayRetry: boolean,
  ): Promise<Sent | number> {
    if (this.#closed) {
      throw new BerthError('BERTH_KUBE_CLOSED', `Cannot ${method} ${path} as the client is closed`);
    }
    await this.#limiter.take(o.signal);
    const conn = this.#connect();
    const context = `${method} ${path}`;
    const headers: Record<string, string> = {
      accept: 'application/json',
      'user-agent': this.#userAgent,
    };
    if (conn.authorization !== undefined) headers['authorization'] = conn.authorization;
    if (o.contentType !== undefined) headers['content-type'] = o.contentType;
    let res: IncomingMessage;
    try {
      res = await conn.endpoint.send({
        method,
        path,
        headers,
        body: o.body,
        signal: o.signal,
        timeoutMs:
          o.watch === true
            ? (this.#options.watchHeadersTimeoutMs ?? 60_000)
            : this.#requestTimeoutMs,
        watch: o.watch === true,
      });
    } catch (err) {
      if (o.signal?.aborted === true) throw o.signal.reason;
      throw new KubeApiError(0, 'Unknown', `${context}: ${errorText(err)}`, { cause: err });
    }
    const code = res.statusCode ?? 0;
    const waitMs = mayRetry ? retryAfterMs(code, res.headers['retry-after']) : undefined;
    if (waitMs !== undefined) {
      await drain(res).catch(() => undefined);
      return waitMs;
    }
    if (code < 200 || code > 299) {
      let text = '';
      try {
        text = await readText(res);
      } catch {
        if (o.signal?.aborted === true) throw o.signal.reason;
      }
      let status: unknown;
      try {
        status = JSON.parse(text);
      } catch {
        status = undefined;
      }
      if (isStatus(status)) throw errorFromStatus(status, code, context);
      const snippet = text.trim().slice(0, 200);
      throw errorFromStatus(
        snippet === '' ? undefined : { message: `the server answered ${code}: ${snippet}` },
        code,
        context,
      );
    }
    return { res, context };
  }

  async #json<T>(method: Method, path: string, o: SendOptions): Promise<T> {
    const { res, context } = await this.#send(method, path, {
      ...o,
      ...(o.body !== undefined && o.contentType === undefined
        ? { contentType: 'application/json' }
        : {}),
    });
    try {
      return JSON.parse(await readText(res)) as T;
    } catch (err) {
      if (o.signal?.aborted === true) throw o.signal.reason;
      throw new KubeApiError(
        0,
        'Unknown',
        `${context}: cannot read the answer (${errorText(err)})`,
        {
          cause: err,
        },
      );
    }
  }

  get<T>(path: ResourcePath, name: string, options: RequestOptions = {}): Promise<T> {
    return this.#json<T>('GET', resourceUrlPath(path, name), { signal: options.signal });
  }

  list<T>(path: ResourcePath, options: ListOptions = {}): Promise<ListResult<T>> {
    const query = queryString({
      labelSelector: options.labelSelector,
      fieldSelector: options.fieldSelector,
      resourceVersion: options.resourceVersion,
      limit: options.limit,
      continue: options.continue,
    });
    return this.#json<ListResult<T>>('GET', resourceUrlPath(path) + query, {
      signal: options.signal,
    });
  }

  create<T>(path: ResourcePath, body: T, options: WriteOptions = {}): Promise<T> {
    // A subresource create (pods/<name>/eviction, …/binding) names the parent object.
    const name =
      options.subresource === undefined
        ? undefined
        : (body as { metadata?: { name?: string } }).metadata?.name;
    const url =
      resourceUrlPath(path, name, options.subresource) +
      queryString({ fieldManager: options.fieldManager });
    return this.#json<T>('POST', url, { body: JSON.stringify(body), signal: options.signal });
  }

  update<T>(path: ResourcePath, name: string, body: T, options: WriteOptions = {}): Promise<T> {
    const url =
      resourceUrlPath(path, name, options.subresource) +
      queryString({ fieldManager: options.fieldManager });
    return this.#json<T>('PUT', url, { body: JSON.stringify(body), signal: options.signal });
  }

  async patch<T>(
    path: ResourcePath,
    name: string,
    patch: unknown,
    type: PatchType,
    options: PatchOptions = {},
  ): Promise<T> {
    if (type === 'apply' && (options.fieldManager === undefined || options.fieldManager === '')) {
      throw new BerthError(
        'BERTH_KUBE_FIELD_MANAGER_REQUIRED',
        `Cannot apply ${path.resource}/${name} as server-side apply needs a fieldManager`,
      );
    }
    const url =
      resourceUrlPath(path, name, options.subresource) +
      queryString({
        fieldManager: options.fieldManager,
        force: type === 'apply' && options.force === true ? true : undefined,
      });
    return this.#json<T>('PATCH', url, {
      // JSON is YAML, so an apply patch object is sent as JSON too.
      body: typeof patch === 'string' ? patch : JSON.stringify(patch),
      contentType: PATCH_CONTENT_TYPES[type],
      signal: options.signal,
    });
  }

  async delete(path: ResourcePath, name: string, options: DeleteOptions = {}): Promise<void> {
    const body = {
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      ...(options.gracePeriodSeconds === undefined
        ? {}
        : { gracePeriodSeconds: options.gracePeriodSeconds }),
      ...(options.preconditions === undefined ? {} : { preconditions: options.preconditions }),
    };
    const { res } = await this.#send('DELETE', resourceUrlPath(path, name), {
      body: JSON.stringify(body),
      contentType: 'application/json',
      signal: options.signal,
    });
    // The answer (the object or a Status) is not needed, but must be read to free the connection.
    await drain(res).catch(() => undefined);
  }

  watch<T>(path: ResourcePath, options: WatchOptions = {}): AsyncIterable<WatchEvent<T>> {
    return this.#watch<T>(path, options);
  }

  async *#watch<T>(path: ResourcePath, options: WatchOptions): AsyncGenerator<WatchEvent<T>> {
    const { signal } = options;
    const url =
      resourceUrlPath(path) +
      queryString({
        watch: 1,
        allowWatchBookmarks: options.allowWatchBookmarks === false ? undefined : true,
        labelSelector: options.labelSelector,
        fieldSelector: options.fieldSelector,
        resourceVersion: options.resourceVersion,
        timeoutSeconds: options.timeoutSeconds,
      });
    let sent: Sent;
    try {
      sent = await this.#send('GET', url, { signal, watch: true });
    } catch (err) {
      if (signal?.aborted === true) return;
      throw err;
    }
    const { res, context } = sent;
    this.#watches.add(res);
    try {
      for await (const line of lines(res as AsyncIterable<Uint8Array>)) {
        // Events already buffered when the caller aborts are dropped: abort means stop now.
        if (isAborted(signal) || this.#closed) return;
        const event = parseEvent<T>(line, context);
        if (event.type === 'ERROR') throw statusFromWatchError(event.object, context);
        yield event;
      }
    } catch (err) {
      // Ended by the caller's signal or by close(): both are a normal end.
      if (isAborted(signal) || this.#closed) return;
      if (err instanceof KubeApiError) throw err;
      throw new KubeApiError(0, 'Unknown', `${context}: watch stream failed (${errorText(err)})`, {
        cause: err,
      });
    } finally {
      this.#watches.delete(res);
      // Ends the request when the consumer stops early; a no-op after a normal end.
      res.destroy();
    }
  }

  /**
   * Stops new requests, ends running watches (their iterations end quietly), lets
   * other in-flight requests finish, closes every connection. Idempotent.
   */
  async close(): Promise<void> {
    this.#closed = true;
    for (const body of this.#watches) body.destroy();
    const current = this.#connection;
    this.#connection = undefined;
    if (current !== undefined) this.#retire(current.endpoint);
    await Promise.all([...this.#retiring]);
  }

  /** Closes every connection now, failing in-flight requests. Idempotent. */
  destroy(): Promise<void> {
    this.#closed = true;
    for (const body of this.#watches) body.destroy();
    const endpoints = [...this.#retiringEndpoints];
    if (this.#connection !== undefined) endpoints.push(this.#connection.endpoint);
    this.#connection = undefined;
    for (const e of endpoints) e.destroy();
    return Promise.resolve();
  }
}

// Re-read after awaits; a call keeps TS from narrowing `aborted` to its first value.
const isAborted = (signal: AbortSignal | undefined): boolean => signal?.aborted === true;

function authorization(c: KubeCredentials): string | undefined {
  return c.token === undefined ? undefined : `Bearer ${c.token}`;
}
