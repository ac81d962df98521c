/** Loopback helpers: free ports and a small HTTPS/HTTP request function. */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createServer } from 'node:net';
import { networkInterfaces } from 'node:os';

/** A port free on 127.0.0.1 right now (the OS picks it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => {
        resolve(port);
      });
    });
  });
}

export interface FetchOptions {
  readonly method?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: Uint8Array | string;
  readonly ca?: string | Buffer;
  readonly cert?: string | Buffer;
  readonly key?: string | Buffer;
  /** Only for components that serve self-signed certificates (controller-manager, scheduler). */
  readonly rejectUnauthorized?: boolean;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
}

export interface FetchResult {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: Buffer;
}

/** One request to a loopback URL (or an address of this machine) (http or https) with optional mTLS material. */
export async function fetchLocal(url: string, options: FetchOptions = {}): Promise<FetchResult> {
  const target = new URL(url);
  if (
    target.hostname !== '127.0.0.1' &&
    target.hostname !== 'localhost' &&
    target.hostname !== '[::1]' &&
    // An address of this machine's own interfaces (the VM tier's host-only bridge).
    !Object.values(networkInterfaces()).some((list) =>
      (list ?? []).some((a) => a.address === target.hostname),
    )
  ) {
    throw new Error(`Cannot fetch ${url}: the test harness only talks to loopback`);
  }
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(
      target,
      {
        method: options.method ?? 'GET',
        headers: options.headers,
        ca: options.ca,
        cert: options.cert,
        key: options.key,
        rejectUnauthorized: options.rejectUnauthorized ?? true,
        timeout: options.timeoutMs ?? 10_000,
        signal: options.signal,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks),
          });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`Timed out requesting ${url}`)));
    req.on('error', reject);
    req.end(options.body);
  });
}
