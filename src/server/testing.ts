/**
 * Test helpers for KubeletServer tests on loopback: a self-signed serving certificate
 * from openssl, a webhook authorizer that records what it was asked, the options every
 * such test starts from, and a one-shot HTTP(S) client.
 */
import type { IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import type { KubeClient } from '../kube/types.ts';
import { request as httpRequest } from '../util/node-http.ts';
import { writeTestCertificate } from '../util/test-certificate.ts';
import type { KubeletServerOptions } from './server.ts';

/** Writes cert.pem and key.pem (EC P-256, CN 127.0.0.1) into `dir`. */
export async function selfSignedCertificate(dir: string): Promise<void> {
  await writeTestCertificate({
    certFile: join(dir, 'cert.pem'),
    keyFile: join(dir, 'key.pem'),
    commonName: '127.0.0.1',
  });
}

/** A KubeClient whose SubjectAccessReviews allow exactly `allowed`, recording each ask. */
export function recordingAuthorizer(asked: string[], allowed: ReadonlySet<string>): KubeClient {
  return {
    create: (_path: unknown, body: { spec: { resourceAttributes: { subresource: string } } }) => {
      const sub = body.spec.resourceAttributes.subresource;
      asked.push(sub);
      return Promise.resolve({ ...body, status: { allowed: allowed.has(sub) } });
    },
  } as unknown as KubeClient;
}

/** Anonymous users, webhook authorization, ports picked by the OS, files from `dir`. */
export function testServerOptions(
  dir: string,
  overrides: Partial<KubeletServerOptions> = {},
): KubeletServerOptions {
  return {
    nodeName: 'node-a',
    address: '127.0.0.1',
    port: 0,
    healthzAddress: '127.0.0.1',
    healthzPort: 0,
    tlsCertFile: join(dir, 'cert.pem'),
    tlsPrivateKeyFile: join(dir, 'key.pem'),
    clientCAFile: null,
    webhookAuthentication: false,
    authenticationCacheTTLMs: 0,
    anonymous: true,
    authorizationMode: 'Webhook',
    authorizedTTLMs: 0,
    unauthorizedTTLMs: 0,
    podLogsDir: dir,
    debuggingHandlers: true,
    ...overrides,
  };
}

export interface Reply {
  readonly status: number;
  readonly body: string;
  readonly type: string | undefined;
}

/** A reply as it came: the body's bytes (undecoded) and every header. */
export interface RawReply {
  readonly status: number;
  readonly bytes: Buffer;
  readonly headers: IncomingMessage['headers'];
}

export interface CallOptions {
  readonly method?: string;
  readonly tls?: boolean;
  readonly headers?: Readonly<Record<string, string>>;
}

/** One request to 127.0.0.1:`port`; HTTPS accepts the self-signed certificate. */
export async function call(port: number, path: string, options: CallOptions = {}): Promise<Reply> {
  const r = await callRaw(port, path, options);
  return { status: r.status, body: r.bytes.toString(), type: r.headers['content-type'] };
}

/** As `call`, with the body's bytes and all headers. */
export function callRaw(port: number, path: string, options: CallOptions = {}): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const onResponse = (res: IncomingMessage): void => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        resolve({
          status: res.statusCode ?? 0,
          bytes: Buffer.concat(chunks),
          headers: res.headers,
        });
      });
      res.on('error', reject);
    };
    const target = {
      host: '127.0.0.1',
      port,
      path,
      method: options.method ?? 'GET',
      headers: { ...options.headers },
    };
    const req =
      options.tls === false
        ? httpRequest(target, onResponse)
        : httpsRequest({ ...target, rejectUnauthorized: false }, onResponse);
    req.on('error', reject);
    req.end();
  });
}
