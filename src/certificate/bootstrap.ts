/**
 * TLS bootstrap of the client certificate, as upstream's bootstrap.LoadClientCert:
 *
 * 1. The --kubeconfig already holds a usable client certificate (parses, key matches,
 *    not expired): use it, nothing else happens.
 * 2. The cert dir holds a valid kubelet-client-current.pem: write a kubeconfig for it.
 * 3. Otherwise, with the --bootstrap-kubeconfig's token: key (kept in
 *    kubelet-client.key.tmp until issued, so a restart while waiting finds the same
 *    CSR by name instead of filing another), CSR for system:node:<node>, wait for
 *    approval and issue, store the pair, write the kubeconfig.
 *
 * Step 3 retries with jittered back-off until the caller aborts: an unreachable
 * apiserver and a rejected token (401) are logged and retried; a denied, failed or
 * deleted CSR is logged as an error and retried with a fresh key and CSR after a
 * longer back-off, as an operator can fix the cause without restarting berth.
 */
import { createHash, createPublicKey, type KeyObject } from 'node:crypto';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { stringify } from 'yaml';
import type { Clock } from '../util/clock.ts';
import { retryDelay } from '../util/backoff.ts';
import { BerthError, isAborted } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import { KubeApiError, type KubeClient } from '../kube/types.ts';
import {
  parseKubeconfig,
  readCredentials,
  type KubeconfigEntry,
  type KubeCredentials,
} from '../kube/kubeconfig.ts';
import {
  CLIENT_SIGNER,
  CLIENT_USAGES,
  clientTemplate,
  createCsr,
  generateKey,
  parseKey,
  type CsrTemplate,
} from './csr.ts';
import { CertificateRequestError, createCsrObject, waitForCertificate } from './request.ts';
import {
  CertificateStore,
  CertificateStoreError,
  validatePair,
  writeFileAtomic,
  type CertificatePair,
} from './store.ts';

export const CLIENT_PAIR = 'kubelet-client';
const TMP_KEY = 'kubelet-client.key.tmp';

export interface BootstrapOptions {
  /** --kubeconfig: read if present, written after a bootstrap. */
  readonly kubeconfigPath: string;
  /** --bootstrap-kubeconfig (a bootstrap token). */
  readonly bootstrapKubeconfigPath: string;
  /** --cert-dir. */
  readonly certDir: string;
  readonly nodeName: string;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Makes the client for the bootstrap credentials (an HttpKubeClient in berth). */
  readonly connect: (credentials: KubeCredentials) => KubeClient;
  readonly signal?: AbortSignal;
  /** How long one CSR is waited for (default 1 h, as upstream). */
  readonly waitTimeoutMs?: number;
  readonly random?: () => number;
}

export interface BootstrapResult {
  /** Which step of the top of this file provided the certificate. */
  readonly source: 'kubeconfig' | 'cert-dir' | 'csr';
  /** The pair in use. */
  readonly pair: CertificatePair;
}

/** Bootstrap failures that are not API or CSR errors (e.g. an unusable bootstrap kubeconfig). */
export class BootstrapError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('BERTH_CERT_BOOTSTRAP', message, options);
  }
}

/**
 * The CSR name upstream's digestedName gives: a hash of the public key, subject and
 * usages, so the same key always maps to the same CSR.
 */
export function digestedCsrName(key: KeyObject, t: CsrTemplate, usages: readonly string[]): string {
  const h = createHash('sha512');
  const put = (s: string | Buffer): void => {
    h.update(s);
    h.update('|');
  };
  put(createPublicKey(key).export({ type: 'spki', format: 'der' }));
  put(t.commonName);
  for (const o of t.organization) put(o);
  for (const u of usages) put(u);
  return `node-csr-${h.digest('base64url')}`;
}

/** The kubeconfig upstream writes after bootstrapping: the cluster of the bootstrap one, the cert dir's pair as user. */
export function bootstrapKubeconfigText(bootstrap: KubeconfigEntry, pairPath: string): string {
  const ca = bootstrap.certificateAuthority;
  const cluster = {
    server: bootstrap.server,
    ...(ca === undefined
      ? {}
      : 'file' in ca
        ? { 'certificate-authority': ca.file }
        : { 'certificate-authority-data': ca.data.toString('base64') }),
    ...(bootstrap.insecureSkipTlsVerify ? { 'insecure-skip-tls-verify': true } : {}),
    ...(bootstrap.tlsServerName === undefined
      ? {}
      : { 'tls-server-name': bootstrap.tlsServerName }),
  };
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'default-cluster', cluster }],
    contexts: [
      {
        name: 'default-context',
        context: { cluster: 'default-cluster', namespace: 'default', user: 'default-auth' },
      },
    ],
    'current-context': 'default-context',
    users: [
      { name: 'default-auth', user: { 'client-certificate': pairPath, 'client-key': pairPath } },
    ],
  });
}

async function readEntry(path: string): Promise<KubeconfigEntry> {
  return parseKubeconfig(await readFile(path, 'utf8'), { path });
}

/** The kubeconfig's own client pair when usable, else why not (undefined = no file). */
async function kubeconfigPair(
  path: string,
  now: number,
): Promise<CertificatePair | Error | undefined> {
  let entry: KubeconfigEntry;
  try {
    entry = await readEntry(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    return err as Error;
  }
  try {
    const creds = await readCredentials(entry);
    if (creds.cert === undefined || creds.key === undefined) {
      return new BootstrapError(`kubeconfig ${path} has no client certificate`);
    }
    return validatePair(creds.cert, creds.key, now, path);
  } catch (err) {
    return err as Error;
  }
}

function describe(err: unknown, bootstrapPath: string): { msg: string; code: string } {
  if (err instanceof KubeApiError && err.status === 401) {
    return {
      msg: `The bootstrap token in ${bootstrapPath} was rejected (401 Unauthorized): it is wrong, expired, or its Secret is missing from kube-system`,
      code: err.code,
    };
  }
  if (err instanceof KubeApiError && err.status === 403) {
    return {
      msg: `The bootstrap token may not create CertificateSigningRequests (403 Forbidden): bind ClusterRole system:node-bootstrapper to its group (${err.message})`,
      code: err.code,
    };
  }
  if (err instanceof KubeApiError && err.status === 0) {
    return { msg: 'The API server is unreachable', code: err.code };
  }
  if (err instanceof BerthError) return { msg: err.message, code: err.code };
  return { msg: (err as Error).message, code: 'UNKNOWN' };
}

/** Runs the bootstrap (see the top of this file); resolves with the pair in use. */
export async function bootstrapClientCertificate(
  options: BootstrapOptions,
): Promise<BootstrapResult> {
  const { clock, logger, signal } = options;
  const log = logger.child({ component: 'certificate-bootstrap', node: options.nodeName });
  const existing = await kubeconfigPair(options.kubeconfigPath, clock.now());
  if (existing !== undefined && !(existing instanceof Error)) {
    log.info('Using the client certificate of the kubeconfig', {
      kubeconfig: options.kubeconfigPath,
      expires: existing.x509.validToDate.toISOString(),
    });
    return { source: 'kubeconfig', pair: existing };
  }
  if (existing instanceof Error) {
    log.info('The kubeconfig cannot be used as is, bootstrapping a client certificate', {
      kubeconfig: options.kubeconfigPath,
      err: existing.message,
    });
  }
  const store = new CertificateStore({ dir: options.certDir, pairName: CLIENT_PAIR, clock });
  const stored = await store.load();
  if (stored.state === 'ok') {
    await writeKubeconfig(options, store.currentPath);
    log.info('Using the client certificate of the cert dir', {
      file: stored.pair.file,
      expires: stored.pair.x509.validToDate.toISOString(),
    });
    return { source: 'cert-dir', pair: stored.pair };
  }
  if (stored.state === 'invalid') {
    log.error('The stored client certificate is unusable; requesting a new one', {
      code: stored.error.code,
      file: stored.error.file,
      err: stored.error.message,
    });
  }
  for (let attempt = 0; ; attempt++) {
    try {
      const pair = await requestOnce(options, store, log);
      await writeKubeconfig(options, store.currentPath);
      log.info('Client certificate issued and stored', {
        file: pair.file,
        expires: pair.x509.validToDate.toISOString(),
      });
      return { source: 'csr', pair };
    } catch (err) {
      if (isAborted(signal)) throw signal?.reason ?? err;
      const csrFailed = err instanceof CertificateRequestError;
      if (csrFailed && err.code !== 'BERTH_CERT_CSR_TIMEOUT') {
        // A new key gives a new CSR name: the denied one would be found again.
        await rm(join(options.certDir, TMP_KEY), { force: true });
      }
      const delayMs = csrFailed
        ? retryDelay(attempt, 30_000, 300_000, options.random)
        : retryDelay(attempt, 1000, 60_000, options.random);
      const { msg, code } = describe(err, options.bootstrapKubeconfigPath);
      log.error('Cannot bootstrap the client certificate, retrying', {
        code,
        err: msg,
        retryInMs: Math.round(delayMs),
      });
      await clock.sleep(delayMs, signal);
    }
  }
}

async function loadOrCreateKey(certDir: string): Promise<{ key: KeyObject; keyPem: string }> {
  const path = join(certDir, TMP_KEY);
  const text = await readFile(path, 'utf8').catch(() => undefined);
  const key = text === undefined ? undefined : parseKey(text);
  if (text !== undefined && key !== undefined) return { key, keyPem: text };
  const fresh = generateKey();
  await mkdir(certDir, { recursive: true, mode: 0o700 });
  await writeFileAtomic(path, fresh.keyPem, 0o600);
  return fresh;
}

async function requestOnce(
  options: BootstrapOptions,
  store: CertificateStore,
  log: Logger,
): Promise<CertificatePair> {
  let entry: KubeconfigEntry;
  let credentials: KubeCredentials;
  try {
    entry = await readEntry(options.bootstrapKubeconfigPath);
    credentials = await readCredentials(entry);
  } catch (err) {
    throw new BootstrapError(
      `Cannot use the bootstrap kubeconfig ${options.bootstrapKubeconfigPath}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  const { key, keyPem } = await loadOrCreateKey(options.certDir);
  const template = clientTemplate(options.nodeName);
  const name = digestedCsrName(key, template, CLIENT_USAGES);
  const client = options.connect(credentials);
  try {
    const signal = options.signal;
    await createCsrObject(
      client,
      { name, csrPem: createCsr(key, template), signerName: CLIENT_SIGNER, usages: CLIENT_USAGES },
      signal,
    );
    log.info('Waiting for the client CertificateSigningRequest', { csr: name });
    const certPem = await waitForCertificate(client, name, {
      clock: options.clock,
      logger: log,
      timeoutMs: options.waitTimeoutMs ?? 3_600_000,
      ...(signal === undefined ? {} : { signal }),
      ...(options.random === undefined ? {} : { random: options.random }),
    });
    let pair: CertificatePair;
    try {
      pair = await store.update(certPem, keyPem);
    } catch (err) {
      if (!(err instanceof CertificateStoreError)) throw err;
      throw new CertificateRequestError(
        'BERTH_CERT_ISSUED_INVALID',
        name,
        `The certificate issued for CertificateSigningRequest ${name} is unusable: ${err.message}`,
        { cause: err },
      );
    }
    await rm(join(options.certDir, TMP_KEY), { force: true });
    return pair;
  } finally {
    await client.close();
  }
}

async function writeKubeconfig(options: BootstrapOptions, pairPath: string): Promise<void> {
  let entry: KubeconfigEntry;
  try {
    entry = await readEntry(options.bootstrapKubeconfigPath);
  } catch (err) {
    throw new BootstrapError(
      `Cannot write ${options.kubeconfigPath} as the bootstrap kubeconfig ${options.bootstrapKubeconfigPath} is unusable: ${(err as Error).message}`,
      { cause: err },
    );
  }
  await mkdir(dirname(options.kubeconfigPath), { recursive: true });
  await writeFileAtomic(options.kubeconfigPath, bootstrapKubeconfigText(entry, pairPath), 0o600);
}
