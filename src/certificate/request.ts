/**
 * Talking to the certificates.k8s.io/v1 API: create a CertificateSigningRequest, then
 * wait until it is issued (upstream's csr.RequestCertificate + WaitForCertificate).
 *
 * The wait lists the one CSR by field selector and watches it from that
 * resourceVersion; a watch that ends or fails is resumed the same way after a jittered
 * back-off, so an apiserver restart during a long approval wait costs nothing. It ends
 * with the issued PEM, a `CertificateRequestError` (Denied, Failed, deleted, timed out),
 * or the caller's abort reason. While it waits it logs once a minute, as serving CSRs
 * wait for a human.
 */
import type { CertificateSigningRequest } from 'kubernetes-types/certificates/v1.js';
import type { Clock } from '../util/clock.ts';
import { retryDelay } from '../util/backoff.ts';
import { BerthError, isAborted } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import { isAlreadyExists, type KubeClient, type ResourcePath } from '../kube/types.ts';

export const CSRS: ResourcePath = {
  group: 'certificates.k8s.io',
  version: 'v1',
  resource: 'certificatesigningrequests',
};

export type CertificateRequestErrorCode =
  | 'BERTH_CERT_CSR_DENIED'
  | 'BERTH_CERT_CSR_FAILED'
  | 'BERTH_CERT_CSR_DELETED'
  | 'BERTH_CERT_CSR_TIMEOUT'
  | 'BERTH_CERT_CSR_INCOMPATIBLE'
  | 'BERTH_CERT_ISSUED_INVALID';

/** A CSR that will not (or did not) produce a usable certificate. */
export class CertificateRequestError extends BerthError {
  override readonly code: CertificateRequestErrorCode;
  readonly csr: string;
  constructor(
    code: CertificateRequestErrorCode,
    csr: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
    this.code = code;
    this.csr = csr;
  }
}

export interface CsrSpec {
  /** A fixed name (bootstrap: derived from the key, so a restart finds its CSR again). */
  readonly name?: string;
  /** Used when `name` is not given (rotation: upstream's "csr-"). */
  readonly generateName?: string;
  readonly csrPem: string;
  readonly signerName: string;
  readonly usages: readonly string[];
  readonly expirationSeconds?: number;
}

/** Creates the CSR (or adopts an existing compatible one of the same name); returns its name. */
export async function createCsrObject(
  client: KubeClient,
  spec: CsrSpec,
  signal?: AbortSignal,
): Promise<string> {
  const body: CertificateSigningRequest = {
    apiVersion: 'certificates.k8s.io/v1',
    kind: 'CertificateSigningRequest',
    metadata:
      spec.name === undefined ? { generateName: spec.generateName ?? 'csr-' } : { name: spec.name },
    spec: {
      request: Buffer.from(spec.csrPem).toString('base64'),
      signerName: spec.signerName,
      usages: [...spec.usages],
      ...(spec.expirationSeconds === undefined
        ? {}
        : { expirationSeconds: spec.expirationSeconds }),
    },
  };
  const opts = signal === undefined ? {} : { signal };
  try {
    const created = await client.create<CertificateSigningRequest>(CSRS, body, opts);
    return created.metadata?.name ?? spec.name ?? '';
  } catch (err) {
    if (spec.name === undefined || !isAlreadyExists(err)) throw err;
    // Same name means same key digest: an earlier run of ours. Reuse it if it asks the same.
    const existing = await client.get<CertificateSigningRequest>(CSRS, spec.name, opts);
    const same =
      existing.spec.signerName === spec.signerName &&
      [...(existing.spec.usages ?? [])].sort().join(',') === [...spec.usages].sort().join(',');
    if (!same) {
      throw new CertificateRequestError(
        'BERTH_CERT_CSR_INCOMPATIBLE',
        spec.name,
        `Cannot reuse CertificateSigningRequest ${spec.name} as it asks for signer ${existing.spec.signerName} usages ${JSON.stringify(existing.spec.usages ?? [])}`,
        { cause: err },
      );
    }
    return spec.name;
  }
}

/** The issued PEM, undefined while pending; throws on Denied / Failed. */
export function issuedCertificate(csr: CertificateSigningRequest): string | undefined {
  const name = csr.metadata?.name ?? '';
  const conditions = csr.status?.conditions ?? [];
  for (const c of conditions) {
    if (c.status === 'False') continue;
    if (c.type === 'Denied' || c.type === 'Failed') {
      const code = c.type === 'Denied' ? 'BERTH_CERT_CSR_DENIED' : 'BERTH_CERT_CSR_FAILED';
      throw new CertificateRequestError(
        code,
        name,
        `CertificateSigningRequest ${name} is ${c.type.toLowerCase()}: reason ${c.reason ?? '(none)'}, message ${JSON.stringify(c.message ?? '')}`,
      );
    }
  }
  const approved = conditions.some((c) => c.type === 'Approved' && c.status !== 'False');
  const cert = csr.status?.certificate;
  if (!approved || cert === undefined || cert === '') return undefined;
  return Buffer.from(cert, 'base64').toString('utf8');
}

export interface WaitOptions {
  readonly clock: Clock;
  readonly logger: Logger;
  /** Give up after this long (bootstrap 1 h, rotation 15 min, as upstream). */
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  /** How often "still waiting" is logged (default 1 min). */
  readonly logEveryMs?: number;
  readonly random?: () => number;
}

/** Waits until CSR `name` is issued; see the top of this file. */
export async function waitForCertificate(
  client: KubeClient,
  name: string,
  options: WaitOptions,
): Promise<string> {
  const { clock, logger, signal } = options;
  const local = new AbortController();
  const onAbort = (): void => {
    local.abort(signal?.reason);
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  if (isAborted(signal)) local.abort(signal?.reason);
  const started = clock.now();
  const timer = clock.sleep(options.timeoutMs, local.signal).then(
    () => {
      local.abort(
        new CertificateRequestError(
          'BERTH_CERT_CSR_TIMEOUT',
          name,
          `Timed out after ${Math.round(options.timeoutMs / 1000)}s waiting for CertificateSigningRequest ${name} to be approved and issued`,
        ),
      );
    },
    () => undefined,
  );
  const ticker = (async () => {
    for (;;) {
      await clock.sleep(options.logEveryMs ?? 60_000, local.signal);
      logger.info('Waiting for the CertificateSigningRequest to be approved and issued', {
        csr: name,
        waitedSeconds: Math.round((clock.now() - started) / 1000),
      });
    }
  })().catch(() => undefined);
  const fieldSelector = `metadata.name=${name}`;
  const deleted = (): CertificateRequestError =>
    new CertificateRequestError(
      'BERTH_CERT_CSR_DELETED',
      name,
      `CertificateSigningRequest ${name} was deleted before a certificate was issued`,
    );
  try {
    for (let attempt = 0; ;) {
      if (local.signal.aborted) throw local.signal.reason;
      try {
        const list = await client.list<CertificateSigningRequest>(CSRS, {
          fieldSelector,
          signal: local.signal,
        });
        const first = list.items[0];
        if (first === undefined) throw deleted();
        const now = issuedCertificate(first);
        if (now !== undefined) return now;
        const events = client.watch<CertificateSigningRequest>(CSRS, {
          fieldSelector,
          resourceVersion: list.metadata.resourceVersion,
          allowWatchBookmarks: true,
          signal: local.signal,
        });
        for await (const event of events) {
          if (event.type === 'DELETED') throw deleted();
          if (event.type !== 'ADDED' && event.type !== 'MODIFIED') continue;
          const pem = issuedCertificate(event.object);
          if (pem !== undefined) return pem;
        }
        attempt = 0;
      } catch (err) {
        if (isAborted(local.signal)) throw local.signal.reason;
        if (err instanceof CertificateRequestError) throw err;
        const delayMs = retryDelay(attempt++, 1000, 30_000, options.random);
        logger.warn('Watching the CertificateSigningRequest failed, retrying', {
          csr: name,
          err: (err as Error).message,
          retryInMs: Math.round(delayMs),
        });
        await clock.sleep(delayMs, local.signal).catch(() => undefined);
      }
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    if (!local.signal.aborted) local.abort();
    await Promise.all([timer, ticker]);
  }
}
