/**
 * A real OCI registry (Debian's docker-registry, i.e. distribution v2) on loopback with
 * TLS and htpasswd authentication, and a push client for the project's OCI layouts.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readOciLayout, type Descriptor } from '../../hack/images/oci.ts';
import type { Binaries } from './binaries.ts';
import { run } from './exec.ts';
import { fetchLocal } from './net.ts';
import type { ClusterPki } from './pki.ts';
import { ComponentProcess, waitFor } from './process.ts';

export interface RegistryCredentials {
  readonly username: string;
  readonly password: string;
}

export interface Registry {
  /** host:port, as used in image references. */
  readonly host: string;
  readonly credentials: RegistryCredentials;
  readonly caFile: string;
  readonly process: ComponentProcess;
}

export async function startRegistry(options: {
  readonly dir: string;
  readonly port: number;
  readonly pki: ClusterPki;
  readonly bin: Binaries;
  readonly detached: boolean;
}): Promise<Registry> {
  const { dir, port, pki, bin } = options;
  await mkdir(join(dir, 'data'), { recursive: true });
  const credentials = { username: 'berth', password: randomBytes(12).toString('hex') };
  const { stdout } = await run(bin.htpasswd, ['-Bbn', credentials.username, credentials.password]);
  await writeFile(join(dir, 'htpasswd'), stdout);
  await writeFile(join(dir, 'credentials.json'), JSON.stringify(credentials));
  const config = [
    'version: 0.1',
    'log:',
    '  level: info',
    '  formatter: text',
    'storage:',
    '  filesystem:',
    `    rootdirectory: ${join(dir, 'data')}`,
    '  delete:',
    '    enabled: true',
    'http:',
    `  addr: 127.0.0.1:${port}`,
    `  secret: ${randomBytes(16).toString('hex')}`,
    '  tls:',
    `    certificate: ${pki.registry.cert}`,
    `    key: ${pki.registry.key}`,
    'auth:',
    '  htpasswd:',
    '    realm: berth-registry',
    `    path: ${join(dir, 'htpasswd')}`,
    '',
  ].join('\n');
  await writeFile(join(dir, 'config.yml'), config);
  const proc = ComponentProcess.start({
    name: 'registry',
    command: bin.registry,
    args: ['serve', join(dir, 'config.yml')],
    logFile: join(dir, 'registry.log'),
    detached: options.detached,
  });
  const ca = await readFile(pki.ca.cert);
  await waitFor(
    'the registry to answer /v2/',
    async () => {
      if (!proc.alive()) throw new Error(`registry exited:\n${await proc.tail()}`);
      const res = await fetchLocal(`https://127.0.0.1:${port}/v2/`, { ca, timeoutMs: 1000 });
      return res.status === 401;
    },
    { timeoutMs: 20_000, describe: () => proc.tail() },
  );
  return { host: `127.0.0.1:${port}`, credentials, caFile: pki.ca.cert, process: proc };
}

export function basicAuth(c: RegistryCredentials): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;
}

/** Pushes an OCI layout to `registry` as `repo:tag` through the distribution API. */
export async function pushImage(
  registry: Registry,
  layout: string,
  repoTag: string,
): Promise<void> {
  const colon = repoTag.lastIndexOf(':');
  const repo = repoTag.slice(0, colon);
  const tag = repoTag.slice(colon + 1);
  const ca = await readFile(registry.caFile);
  const auth = basicAuth(registry.credentials);
  const base = `https://${registry.host}/v2/${repo}`;
  const image = await readOciLayout(layout);
  const uploadBlob = async (d: Descriptor): Promise<void> => {
    const head = await fetchLocal(`${base}/blobs/${d.digest}`, {
      method: 'HEAD',
      ca,
      headers: { authorization: auth },
    });
    if (head.status === 200) return;
    const start = await fetchLocal(`${base}/blobs/uploads/`, {
      method: 'POST',
      ca,
      headers: { authorization: auth },
    });
    const location = start.headers['location'];
    if (start.status !== 202 || typeof location !== 'string') {
      throw new Error(
        `Cannot push ${repoTag}: upload start answered ${start.status} ${start.body.toString()}`,
      );
    }
    const url = new URL(location, `https://${registry.host}`);
    url.searchParams.set('digest', d.digest);
    const body = await readFile(image.blobPath(d));
    const put = await fetchLocal(url.toString(), {
      method: 'PUT',
      ca,
      body,
      headers: {
        authorization: auth,
        'content-type': 'application/octet-stream',
        'content-length': String(body.byteLength),
      },
    });
    if (put.status !== 201)
      throw new Error(
        `Cannot push ${repoTag}: blob ${d.digest} answered ${put.status} ${put.body.toString()}`,
      );
  };
  for (const blob of image.blobs) await uploadBlob(blob);
  const put = await fetchLocal(`${base}/manifests/${tag}`, {
    method: 'PUT',
    ca,
    body: image.manifestBytes,
    headers: { authorization: auth, 'content-type': image.manifest.mediaType },
  });
  if (put.status !== 201)
    throw new Error(
      `Cannot push ${repoTag}: manifest answered ${put.status} ${put.body.toString()}`,
    );
}
