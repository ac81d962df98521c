/**
 * Test helpers for KubeletServer tests on loopback: a self-signed serving certificate
 * from openssl, a webhook authorizer that records what it was asked, the options every
 * such test starts from, a one-shot HTTP(S) client, and a running container in the fake
 * runtime for the handler tests.
 */
import type { IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { cri } from '../cri/index.ts';
import type { FakeCriClient } from '../cri/fake/index.ts';
import type { KubeClient } from '../kube/types.ts';
import type { RuntimeCache } from '../pleg/types.ts';
import { request as httpRequest } from '../util/node-http.ts';
import { writeTestCertificate } from '../util/test-certificate.ts';
import type { KubeletServerOptions } from './options.ts';

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

/** A KubeClient whose SubjectAccessReviews allow everything, recording who asked. */
export function recordingUsers(users: string[]): KubeClient {
  return {
    create: (_path: unknown, body: { spec: { user: string } }) => {
      users.push(body.spec.user);
      return Promise.resolve({ ...body, status: { allowed: true } });
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
  readonly body?: string;
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
    req.end(options.body);
  });
}

/** The image the handler tests' pod runs (preloaded into the fake runtime). */
export const TEST_IMAGE = '127.0.0.1:5000/berth/busybox:1.35.0';

/**
 * Runs pod ns/web (uid `uid`) with one container `app` in `client`, as berth would have
 * created it (pod UID and container name labels, log path app/0.log under
 * `logDirectory`); resolves with the container's ID.
 */
export async function runTestContainer(
  client: FakeCriClient,
  uid: string,
  logDirectory: string,
): Promise<string> {
  client.addImage(TEST_IMAGE);
  await client.image.pullImage({ image: { image: TEST_IMAGE } }, {});
  const config = cri.PodSandboxConfig.fromPartial({
    metadata: { name: 'web', uid, namespace: 'ns', attempt: 0 },
    labels: { 'io.kubernetes.pod.uid': uid },
    logDirectory,
  });
  const { podSandboxId } = await client.runtime.runPodSandbox({ config, runtimeHandler: '' }, {});
  const { containerId } = await client.runtime.createContainer(
    {
      podSandboxId,
      sandboxConfig: config,
      config: cri.ContainerConfig.fromPartial({
        metadata: { name: 'app', attempt: 0 },
        image: { image: TEST_IMAGE },
        command: ['sleep', '3600'],
        labels: { 'io.kubernetes.pod.uid': uid, 'io.kubernetes.container.name': 'app' },
        logPath: 'app/0.log',
      }),
    },
    {},
  );
  await client.runtime.startContainer({ containerId }, {});
  return containerId;
}

/** Pod ns/web's status naming container `app` as `id`, running since `startedAt`. */
export function runningStatus(id: string, startedAt: string): NonNullable<Pod['status']> {
  return {
    containerStatuses: [
      {
        name: 'app',
        image: TEST_IMAGE,
        imageID: '',
        ready: true,
        restartCount: 0,
        containerID: `containerd://${id}`,
        state: { running: { startedAt } },
      },
    ],
  };
}

/** Container `app` of pod `uid`, running, as the PLEG's cache holds it. */
export function cachedRunning(uid: string, id: string): cri.Container {
  return cri.Container.fromPartial({
    id,
    state: cri.ContainerState.CONTAINER_RUNNING,
    labels: { 'io.kubernetes.pod.uid': uid, 'io.kubernetes.container.name': 'app' },
  });
}

/** A PLEG cache that holds `containers` for pod `uid` and nothing for any other pod. */
export function cacheOf(uid: string, containers: readonly cri.Container[]): RuntimeCache {
  return {
    get: (u) => ({ uid: u, sandboxes: [], containers: u === uid ? containers : [] }),
    uids: () => [uid],
    lastRelistAt: 1,
  };
}
