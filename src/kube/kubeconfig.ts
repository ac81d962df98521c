/**
 * Loading a kubeconfig the way client-go does for the kubelet: the current context
 * (or a named one) picks a cluster and a user; file references resolve against the
 * kubeconfig's own directory; `*-data` fields are base64. The result names files as
 * well as their contents, so a caller can re-read them when a certificate rotates.
 */
import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { BerthError } from '../util/errors.ts';

/** A kubeconfig that cannot be used, with the file and the missing or bad field named. */
export class KubeconfigError extends BerthError {
  readonly path: string;
  constructor(path: string, message: string, options?: { cause?: unknown }) {
    super('BERTH_KUBECONFIG_INVALID', `Cannot use kubeconfig ${path}: ${message}`, options);
    this.path = path;
  }
}

/** Either a file (absolute after parsing) or inline bytes from a `*-data` field. */
export type FileOrData = { readonly file: string } | { readonly data: Buffer };

/** What a kubeconfig says for one context, before any referenced file is read. */
export interface KubeconfigEntry {
  /** The kubeconfig's own path. */
  readonly path: string;
  readonly context: string;
  readonly cluster: string;
  readonly user: string;
  readonly namespace?: string;
  readonly server: string;
  readonly tlsServerName?: string;
  readonly insecureSkipTlsVerify: boolean;
  readonly certificateAuthority?: FileOrData;
  readonly clientCertificate?: FileOrData;
  readonly clientKey?: FileOrData;
  readonly token?: string;
  /** Wins over `token` when both are set (client-go re-reads it). */
  readonly tokenFile?: string;
}

/** Everything needed to talk to the apiserver: PEM text and the bearer token. */
export interface KubeCredentials {
  /** e.g. https://127.0.0.1:6443, without a trailing slash. */
  readonly server: string;
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
  readonly token?: string;
  readonly insecureSkipTlsVerify: boolean;
  readonly tlsServerName?: string;
}

const optionalString = z.string().optional();
const list = <T extends z.ZodType>(item: T) =>
  z
    .array(item)
    .nullish()
    .transform((v) => v ?? []);

const clusterSchema = z.object({
  server: optionalString,
  'certificate-authority': optionalString,
  'certificate-authority-data': optionalString,
  'insecure-skip-tls-verify': z.boolean().optional(),
  'tls-server-name': optionalString,
});

const userSchema = z.object({
  'client-certificate': optionalString,
  'client-certificate-data': optionalString,
  'client-key': optionalString,
  'client-key-data': optionalString,
  token: optionalString,
  tokenFile: optionalString,
  username: optionalString,
  exec: z.unknown().optional(),
  'auth-provider': z.unknown().optional(),
});

const contextSchema = z.object({
  cluster: z.string().min(1),
  user: optionalString,
  namespace: optionalString,
});

const name = z.string().min(1);
const configSchema = z.object({
  'current-context': optionalString,
  clusters: list(z.object({ name, cluster: clusterSchema.nullish() })),
  users: list(z.object({ name, user: userSchema.nullish() })),
  contexts: list(z.object({ name, context: contextSchema.nullish() })),
});

type ClusterFields = z.infer<typeof clusterSchema>;
type UserFields = z.infer<typeof userSchema>;

function issuesText(error: z.ZodError): string {
  return error.issues
    .map((i) => `${i.path.map(String).join('.') || '(root)'}: ${i.message}`)
    .join('; ');
}

function fileOrData(
  path: string,
  owner: string,
  fields: { file: string | undefined; data: string | undefined },
  names: { file: string; data: string },
): FileOrData | undefined {
  if (fields.data !== undefined && fields.data !== '') {
    const data = Buffer.from(fields.data, 'base64');
    if (data.length === 0) {
      throw new KubeconfigError(path, `${owner} has ${names.data} that is not base64`);
    }
    return { data };
  }
  if (fields.file !== undefined && fields.file !== '') {
    return { file: isAbsolute(fields.file) ? fields.file : resolve(dirname(path), fields.file) };
  }
  return undefined;
}

function normaliseServer(path: string, cluster: string, server: string): string {
  // client-go accepts a bare host:port and assumes https.
  const withScheme = server.includes('://') ? server : `https://${server}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch (err) {
    throw new KubeconfigError(
      path,
      `cluster "${cluster}" has server "${server}" that is not a URL`,
      {
        cause: err,
      },
    );
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new KubeconfigError(
      path,
      `cluster "${cluster}" has server "${server}" that is not http(s)`,
    );
  }
  return withScheme.replace(/\/+$/, '');
}

function pick<T extends { readonly name: string }>(
  path: string,
  list: readonly T[],
  what: string,
  name: string,
  by: string,
): T {
  const found = list.find((entry) => entry.name === name);
  if (found === undefined) {
    const present = list.map((entry) => entry.name).join(', ') || 'none';
    throw new KubeconfigError(
      path,
      `${what} "${name}" named by ${by} is not in ${what}s (present: ${present})`,
    );
  }
  return found;
}

function userEntry(path: string, name: string, user: UserFields | null | undefined) {
  const u = user ?? {};
  const owner = `user "${name}"`;
  const clientCertificate = fileOrData(
    path,
    owner,
    { file: u['client-certificate'], data: u['client-certificate-data'] },
    { file: 'client-certificate', data: 'client-certificate-data' },
  );
  const clientKey = fileOrData(
    path,
    owner,
    { file: u['client-key'], data: u['client-key-data'] },
    { file: 'client-key', data: 'client-key-data' },
  );
  if (clientCertificate !== undefined && clientKey === undefined) {
    throw new KubeconfigError(path, `${owner} has a client certificate but no client-key(-data)`);
  }
  if (clientKey !== undefined && clientCertificate === undefined) {
    throw new KubeconfigError(path, `${owner} has a client key but no client-certificate(-data)`);
  }
  const token = u.token !== undefined && u.token !== '' ? u.token : undefined;
  const tokenFile =
    u.tokenFile !== undefined && u.tokenFile !== ''
      ? isAbsolute(u.tokenFile)
        ? u.tokenFile
        : resolve(dirname(path), u.tokenFile)
      : undefined;
  const hasCredential =
    clientCertificate !== undefined || token !== undefined || tokenFile !== undefined;
  if (!hasCredential && (u.exec !== undefined || u['auth-provider'] !== undefined)) {
    throw new KubeconfigError(
      path,
      `${owner} uses an exec or auth-provider plugin, which berth does not run; use a client certificate or token`,
    );
  }
  if (!hasCredential && u.username !== undefined) {
    throw new KubeconfigError(
      path,
      `${owner} uses basic auth (username/password), which kube-apiserver no longer accepts`,
    );
  }
  return {
    ...(clientCertificate === undefined ? {} : { clientCertificate }),
    ...(clientKey === undefined ? {} : { clientKey }),
    ...(token === undefined ? {} : { token }),
    ...(tokenFile === undefined ? {} : { tokenFile }),
  };
}

function clusterEntry(path: string, name: string, cluster: ClusterFields | null | undefined) {
  const c = cluster ?? {};
  if (c.server === undefined || c.server === '') {
    throw new KubeconfigError(path, `cluster "${name}" has no server`);
  }
  const certificateAuthority = fileOrData(
    path,
    `cluster "${name}"`,
    { file: c['certificate-authority'], data: c['certificate-authority-data'] },
    { file: 'certificate-authority', data: 'certificate-authority-data' },
  );
  const insecureSkipTlsVerify = c['insecure-skip-tls-verify'] === true;
  if (insecureSkipTlsVerify && certificateAuthority !== undefined) {
    // client-go refuses this combination too: the CA would silently be ignored.
    throw new KubeconfigError(
      path,
      `cluster "${name}" sets both insecure-skip-tls-verify and a certificate authority`,
    );
  }
  const tlsServerName = c['tls-server-name'];
  return {
    server: normaliseServer(path, name, c.server),
    insecureSkipTlsVerify,
    ...(certificateAuthority === undefined ? {} : { certificateAuthority }),
    ...(tlsServerName === undefined || tlsServerName === '' ? {} : { tlsServerName }),
  };
}

/**
 * Parses kubeconfig text. `path` is where it came from (relative file references
 * resolve against its directory); `context` overrides current-context.
 */
export function parseKubeconfig(
  text: string,
  options: { readonly path: string; readonly context?: string },
): KubeconfigEntry {
  const path = resolve(options.path);
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new KubeconfigError(path, `it is not valid YAML (${(err as Error).message})`, {
      cause: err,
    });
  }
  if (typeof raw !== 'object' || raw === null) {
    throw new KubeconfigError(path, 'it is empty or not a mapping');
  }
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) throw new KubeconfigError(path, issuesText(parsed.error));
  const config = parsed.data;

  const contextName = options.context ?? config['current-context'];
  if (contextName === undefined || contextName === '') {
    throw new KubeconfigError(path, 'current-context is not set and no context was given');
  }
  const by = options.context === undefined ? 'current-context' : 'the caller';
  const context = pick(path, config.contexts, 'context', contextName, by).context;
  if (context === undefined || context === null) {
    throw new KubeconfigError(path, `context "${contextName}" has no cluster`);
  }
  const cluster = pick(
    path,
    config.clusters,
    'cluster',
    context.cluster,
    `context "${contextName}"`,
  );
  // A context without a user is legal (anonymous); a named but missing user is not.
  const userName = context.user ?? '';
  const user =
    userName === ''
      ? undefined
      : pick(path, config.users, 'user', userName, `context "${contextName}"`);
  const namespace = context.namespace;
  return {
    path,
    context: contextName,
    cluster: context.cluster,
    user: userName,
    ...(namespace === undefined || namespace === '' ? {} : { namespace }),
    ...clusterEntry(path, context.cluster, cluster.cluster),
    ...userEntry(path, userName, user?.user),
  };
}

async function readSource(
  entry: KubeconfigEntry,
  what: string,
  source: FileOrData | undefined,
): Promise<string | undefined> {
  if (source === undefined) return undefined;
  if ('data' in source) return source.data.toString('utf8');
  try {
    return await readFile(source.file, 'utf8');
  } catch (err) {
    throw new KubeconfigError(
      entry.path,
      `cannot read ${what} ${source.file} (${(err as Error).message})`,
      { cause: err },
    );
  }
}

/** Reads the files an entry names (CA, client certificate and key, token file). */
export async function readCredentials(entry: KubeconfigEntry): Promise<KubeCredentials> {
  const [ca, cert, key, tokenFromFile] = await Promise.all([
    readSource(entry, 'certificate-authority', entry.certificateAuthority),
    readSource(entry, 'client-certificate', entry.clientCertificate),
    readSource(entry, 'client-key', entry.clientKey),
    readSource(
      entry,
      'tokenFile',
      entry.tokenFile === undefined ? undefined : { file: entry.tokenFile },
    ),
  ]);
  const token = tokenFromFile?.trim() ?? entry.token;
  if (tokenFromFile !== undefined && token === '') {
    throw new KubeconfigError(entry.path, `tokenFile ${entry.tokenFile ?? ''} is empty`);
  }
  return {
    server: entry.server,
    insecureSkipTlsVerify: entry.insecureSkipTlsVerify,
    ...(entry.tlsServerName === undefined ? {} : { tlsServerName: entry.tlsServerName }),
    ...(ca === undefined ? {} : { ca }),
    ...(cert === undefined ? {} : { cert }),
    ...(key === undefined ? {} : { key }),
    ...(token === undefined ? {} : { token }),
  };
}

/** Reads and parses a kubeconfig file and everything it references. */
export async function loadKubeconfig(
  path: string,
  options: { readonly context?: string } = {},
): Promise<KubeCredentials> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new KubeconfigError(resolve(path), `cannot read it (${(err as Error).message})`, {
      cause: err,
    });
  }
  return readCredentials(parseKubeconfig(text, { path, ...options }));
}
