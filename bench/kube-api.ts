/**
 * The benchmark's own view of the Kubernetes API: JSON requests and a pod watch over
 * node:https with the cluster's admin certificate. Deliberately independent of berth's
 * API client, so the yardstick does not move with the code it measures. Loopback only.
 */
import { readFile } from 'node:fs/promises';
import { Agent, request } from 'node:https';
import { performance } from 'node:perf_hooks';
import type { Pod } from 'kubernetes-types/core/v1.js';

export interface ApiCredentials {
  readonly server: string;
  readonly caFile: string;
  readonly certFile: string;
  readonly keyFile: string;
}

export class ApiError extends Error {
  readonly code = 'BERTH_BENCH_API';
  readonly status: number;

  constructor(method: string, path: string, status: number, body: string) {
    super(`Cannot ${method} ${path}: the apiserver answered ${status}: ${body.slice(0, 500)}`);
    this.name = 'ApiError';
    this.status = status;
  }
}

/** A JSON client for one apiserver on loopback; `close()` ends its kept-alive sockets. */
export class KubeApi {
  readonly #base: URL;
  readonly #agent: Agent;

  private constructor(base: URL, agent: Agent) {
    this.#base = base;
    this.#agent = agent;
  }

  static async connect(credentials: ApiCredentials): Promise<KubeApi> {
    const base = new URL(credentials.server);
    if (base.hostname !== '127.0.0.1') {
      throw new Error(
        `Cannot benchmark against ${credentials.server}: the benchmark only talks to loopback`,
      );
    }
    const [ca, cert, key] = await Promise.all([
      readFile(credentials.caFile),
      readFile(credentials.certFile),
      readFile(credentials.keyFile),
    ]);
    // Enough sockets that a batch of creates is not queued behind a handful of them.
    const agent = new Agent({ ca, cert, key, keepAlive: true, maxSockets: 64 });
    return new KubeApi(base, agent);
  }

  /** One request; resolves with the decoded body, rejects with ApiError on non-2xx. */
  async send<T>(
    method: string,
    path: string,
    body?: unknown,
    okStatuses: number[] = [],
  ): Promise<T> {
    const url = new URL(path, this.#base);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise<T>((resolve, reject) => {
      const req = request(
        url,
        {
          method,
          agent: this.#agent,
          headers: {
            accept: 'application/json',
            ...(payload !== undefined && { 'content-type': 'application/json' }),
          },
          timeout: 60_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            const text = Buffer.concat(chunks).toString('utf8');
            if ((status >= 200 && status < 300) || okStatuses.includes(status)) {
              resolve((text === '' ? {} : JSON.parse(text)) as T);
            } else {
              reject(new ApiError(method, path, status, text));
            }
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`Timed out on ${method} ${path}`)));
      req.on('error', reject);
      req.end(payload);
    });
  }

  /**
   * Streams watch events of `path` (a collection URL with `watch=1` added here) until
   * the server ends the stream or `signal` aborts. `onEvent` gets each event with the
   * time it arrived (performance.now()); if it throws, the watch ends with that error.
   */
  async watchOnce(
    path: string,
    onEvent: (event: WatchEvent, at: number) => void,
    signal: AbortSignal,
  ): Promise<void> {
    const url = new URL(path, this.#base);
    url.searchParams.set('watch', '1');
    return new Promise<void>((resolve, reject) => {
      const req = request(url, { method: 'GET', agent: this.#agent, signal }, (res) => {
        if (res.statusCode !== 200) {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            reject(
              new ApiError('WATCH', path, res.statusCode ?? 0, Buffer.concat(chunks).toString()),
            );
          });
          return;
        }
        let pending = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          const at = performance.now();
          pending += chunk;
          try {
            let newline = pending.indexOf('\n');
            while (newline >= 0) {
              const line = pending.slice(0, newline);
              pending = pending.slice(newline + 1);
              if (line.trim() !== '') onEvent(JSON.parse(line) as WatchEvent, at);
              newline = pending.indexOf('\n');
            }
          } catch (err) {
            // A bad line or an event the caller refuses (an ERROR): end this watch.
            req.destroy();
            reject(err instanceof Error ? err : new Error(String(err)));
          }
        });
        res.on('end', resolve);
        res.on('error', (err) => {
          if (signal.aborted) resolve();
          else reject(err);
        });
      });
      req.on('error', (err) => {
        if (signal.aborted) resolve();
        else reject(err);
      });
      req.end();
    });
  }

  close(): void {
    this.#agent.destroy();
  }
}

export interface WatchEvent {
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  readonly object: Pod & { readonly code?: number };
}

export interface PodList {
  readonly metadata: { readonly resourceVersion?: string };
  readonly items: Pod[];
}
