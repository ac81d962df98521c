/**
 * The HTTP(S) transport under `HttpKubeClient`: node's own http/https client over one
 * keep-alive Agent per credential set.
 *
 * Why not undici from npm: it parses HTTP with llhttp compiled to WebAssembly, and
 * loading it costs about 14 MiB of resident memory on top of node's http module, which
 * the kubelet API server loads anyway (measured on Node 24: 58.7 vs 72.5 MiB for a
 * process that has made one request each way). The kubelet's memory is a
 * benchmark target, and node's native parser does the same job.
 *
 * - `Endpoint` counts requests in flight so a retired credential set can close its
 *   sockets once the last one finishes (`idle()`), not cut them.
 * - Timeouts are socket inactivity, as undici's headers and body timeouts are: an
 *   ordinary request fails after `timeoutMs` with no bytes; a watch only until its
 *   headers arrive, as a quiet watch is normal.
 * - The caller's AbortSignal destroys the request, before or after the headers; its
 *   listener goes when the response closes.
 */
import type * as http from 'node:http';
import * as https from 'node:https';
import { finished } from 'node:stream/promises';
import { BerthError } from '../util/errors.ts';
import { Agent as HttpAgent, request as httpRequest } from '../util/node-http.ts';
import type { KubeCredentials } from './kubeconfig.ts';

/** How long an unused keep-alive socket stays open (client-go's idle timeout is 90 s; undici's was 30 s here). */
const KEEP_ALIVE_IDLE_MS = 30_000;

/** One request: `timeoutMs` is inactivity; `watch` drops it once the headers arrive. */
export interface TransportRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string | undefined;
  readonly signal?: AbortSignal | undefined;
  readonly timeoutMs: number;
  readonly watch?: boolean;
}

/** A server origin reached through one keep-alive Agent. */
export class Endpoint {
  readonly #agent: http.Agent;
  readonly #request: typeof http.request;
  readonly #hostname: string;
  readonly #port: number;
  /** Path prefix of the server URL ('' normally). */
  readonly prefix: string;
  #inFlight = 0;
  #idle: (() => void) | undefined;

  constructor(c: KubeCredentials) {
    const url = new URL(c.server);
    const secure = url.protocol === 'https:';
    if (!secure && url.protocol !== 'http:') {
      throw new BerthError(
        'BERTH_KUBE_BAD_SERVER',
        `Cannot reach the API server at ${c.server} as only https:// and http:// URLs are supported`,
      );
    }
    this.#hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
    this.#port = url.port === '' ? (secure ? 443 : 80) : Number(url.port);
    this.prefix = url.pathname.replace(/\/+$/, '');
    const common = { keepAlive: true, timeout: KEEP_ALIVE_IDLE_MS };
    if (secure) {
      this.#agent = new https.Agent({
        ...common,
        ...(c.ca === undefined ? {} : { ca: c.ca }),
        ...(c.cert === undefined ? {} : { cert: c.cert }),
        ...(c.key === undefined ? {} : { key: c.key }),
        ...(c.tlsServerName === undefined ? {} : { servername: c.tlsServerName }),
        rejectUnauthorized: !c.insecureSkipTlsVerify,
      });
      this.#request = https.request;
    } else {
      this.#agent = new HttpAgent(common);
      this.#request = httpRequest;
    }
  }

  /** Resolves with the response once its headers arrive; the body is the caller's to read or destroy. */
  send(r: TransportRequest): Promise<http.IncomingMessage> {
    const { signal } = r;
    if (signal?.aborted === true) return Promise.reject(signal.reason as Error);
    return new Promise((resolve, reject) => {
      this.#inFlight++;
      let answered = false;
      let done = false;
      const headers: Record<string, string | number> = { ...r.headers };
      if (r.body !== undefined) headers['content-length'] = Buffer.byteLength(r.body);
      const req = this.#request({
        agent: this.#agent,
        hostname: this.#hostname,
        port: this.#port,
        path: this.prefix + r.path,
        method: r.method,
        headers,
      });
      const onAbort = (): void => {
        req.destroy(signal?.reason as Error);
      };
      const finish = (): void => {
        if (done) return;
        done = true;
        signal?.removeEventListener('abort', onAbort);
        if (--this.#inFlight === 0) this.#idle?.();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      req.setTimeout(r.timeoutMs, () => {
        req.destroy(
          new BerthError('BERTH_KUBE_TIMEOUT', `no bytes from the server for ${r.timeoutMs} ms`),
        );
      });
      req.on('response', (res) => {
        answered = true;
        if (r.watch === true) req.setTimeout(0);
        res.on('close', finish);
        resolve(res);
      });
      // After the headers a failure reaches the body's reader as the body's error.
      req.on('error', (err) => {
        if (answered) return;
        finish();
        reject(err);
      });
      req.on('close', () => {
        if (!answered) finish();
      });
      req.end(r.body);
    });
  }

  /** Resolves once no request is in flight. */
  idle(): Promise<void> {
    if (this.#inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const previous = this.#idle;
      this.#idle = () => {
        this.#idle = undefined;
        previous?.();
        resolve();
      };
    });
  }

  /** Closes every socket, failing requests in flight. */
  destroy(): void {
    this.#agent.destroy();
  }
}

/** The whole body as text. */
export async function readText(res: http.IncomingMessage): Promise<string> {
  res.setEncoding('utf8');
  let text = '';
  for await (const chunk of res as AsyncIterable<string>) text += chunk;
  return text;
}

/** Reads and drops the body, so the socket goes back to the pool. */
export async function drain(res: http.IncomingMessage): Promise<void> {
  res.resume();
  await finished(res);
}
