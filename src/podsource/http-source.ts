/**
 * The URL pod source (upstream's pkg/kubelet/config http.go): staticPodURL is fetched
 * with staticPodURLHeader every httpCheckFrequency (10 s timeout, 10 MiB at most) and
 * may answer one pod or a v1 PodList. Only an answer that decodes replaces the pods:
 * a 500, a hang or a broken body keeps the pods of the last good answer running, as
 * upstream keeps them (and the source counts as seen only once it answered, even
 * empty).
 */
import { createRequire } from 'node:module';
import type * as Http from 'node:http';
import type * as Https from 'node:https';
import { request as httpRequest } from '../util/node-http.ts';
import { isAborted } from '../util/errors.ts';
import { ProblemLog, type StaticSourceOptions } from './file-source.ts';
import { decodeStaticPods, ManifestError, MAX_MANIFEST_BYTES } from './static-pod.ts';

const https = createRequire(import.meta.url)('node:https') as typeof Https;

export interface HttpSourceOptions extends StaticSourceOptions {
  readonly url: string;
  readonly headers: Readonly<Record<string, readonly string[]>>;
  /** Upstream's client timeout. */
  readonly timeoutMs?: number;
}

export class HttpSourceError extends Error {
  readonly code = 'BERTH_STATIC_POD_URL';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'HttpSourceError';
  }
}

interface Answer {
  readonly status: number;
  readonly statusText: string;
  readonly body: Buffer;
}

function get(
  url: string,
  headers: Readonly<Record<string, readonly string[]>>,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const request: typeof Http.request = u.protocol === 'https:' ? https.request : httpRequest;
    const req = request(
      u,
      {
        method: 'GET',
        headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, [...v]])),
        signal,
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let n = 0;
        res.on('data', (c: Buffer) => {
          n += c.length;
          if (n > MAX_MANIFEST_BYTES) {
            req.destroy(new HttpSourceError(`${url}: the read limit is reached`));
            return;
          }
          chunks.push(c);
        });
        res.on('end', () => {
          resolve({
            status: res.statusCode ?? 0,
            statusText: res.statusMessage ?? '',
            body: Buffer.concat(chunks),
          });
        });
        res.on('error', reject);
      },
    );
    const timer = setTimeout(() => {
      req.destroy(new HttpSourceError(`${url}: timeout awaiting response (${timeoutMs} ms)`));
    }, timeoutMs);
    req.on('close', () => {
      clearTimeout(timer);
    });
    req.on('error', reject);
    req.end();
  });
}

export class HttpSource {
  readonly #o: HttpSourceOptions;
  readonly #problems: ProblemLog;
  #last: Buffer | undefined;

  constructor(options: HttpSourceOptions) {
    this.#o = options;
    this.#problems = new ProblemLog(options);
  }

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.fetchOnce(signal);
      await this.#o.clock.sleep(this.#o.periodMs, signal).catch(() => undefined);
    }
  }

  /** One read of the URL (upstream's extractFromURL); problems are reported, never thrown. */
  async fetchOnce(signal: AbortSignal): Promise<void> {
    const { url } = this.#o;
    this.#problems.beginRound();
    try {
      const answer = await get(url, this.#o.headers, this.#o.timeoutMs ?? 10_000, signal);
      if (answer.status !== 200)
        throw new HttpSourceError(`${url}: ${answer.status} ${answer.statusText}`);
      if (answer.body.length === 0) {
        this.#o.onUpdate([]);
        throw new HttpSourceError(`zero-length data received from ${url}`);
      }
      if (this.#last?.equals(answer.body) === true) return;
      const decoded = decodeStaticPods(answer.body.toString('utf8'), {
        nodeName: this.#o.nodeName,
        source: url,
        kind: 'http',
      });
      this.#last = answer.body;
      const warnings = decoded.flatMap((d) => d.warnings);
      if (warnings.length > 0) this.#problems.report(url, warnings.join(', '));
      this.#o.onUpdate(decoded.map((d) => d.pod));
    } catch (err) {
      if (isAborted(signal)) return;
      const message =
        err instanceof ManifestError
          ? `${url}: ${err.message}`
          : err instanceof Error
            ? err.message
            : String(err);
      this.#problems.report(url, message);
    } finally {
      this.#problems.endRound();
    }
  }
}
