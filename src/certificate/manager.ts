/**
 * `CertificateManager`: keeps one certificate (client or serving) current, as
 * upstream's certificate.Manager.
 *
 * Lifecycle: 'NEW' --start--> 'RUNNING' --signal aborts--> 'STOPPED'. `start` loads
 * the cert dir (a corrupt or mismatched pair is logged and ignored) and returns; the
 * rotation loop then runs until the signal aborts.
 *
 * Rotation deadline: a random point between 70% and 90% of the certificate's validity
 * (upstream's nextRotationDeadline), drawn once per certificate; immediately when
 * there is none, or when the wanted names (serving: the node's addresses) no longer
 * match it. At the deadline: a new key and CSR, wait up to 15 min for the issue, store,
 * notify `onRotate` listeners. Failures retry with jittered back-off; once the
 * certificate has expired, `expired()` is true and an error is logged, but rotation
 * keeps trying (the node cannot recover any other way).
 *
 * Serving CSRs (kubernetes.io/kubelet-serving) are not auto-approved upstream: the
 * manager waits for an operator and logs every minute that it does.
 */
import type { X509Certificate } from 'node:crypto';
import type { Clock } from '../util/clock.ts';
import { retryDelay } from '../util/backoff.ts';
import { BerthError, isAborted } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import type { KubeClient } from '../kube/types.ts';
import {
  CLIENT_SIGNER,
  CLIENT_USAGES,
  SERVING_SIGNER,
  SERVING_USAGES,
  createCsr,
  generateKey,
  ipBytes,
  type CsrTemplate,
} from './csr.ts';
import { CertificateRequestError, createCsrObject, waitForCertificate } from './request.ts';
import { CertificateStoreError, type CertificatePair, type CertificateStore } from './store.ts';

export type CertificateKind = 'client' | 'serving';
export type CertificateManagerState = 'NEW' | 'RUNNING' | 'STOPPED';

/** Plain callbacks for metrics, so this folder does not pick the metrics library. */
export interface CertificateMetrics {
  /** A rotation attempt failed (upstream *_expiration_renew_errors). */
  readonly renewError?: () => void;
  /** A new certificate took over; the previous one was `ageSeconds` old (0 for the first). */
  readonly rotated?: (ageSeconds: number) => void;
}

export interface CertificateManagerOptions {
  readonly kind: CertificateKind;
  readonly store: CertificateStore;
  /** Where CSRs go while the certificate is valid: for the client certificate, the node's own (rotating) client. */
  readonly client: KubeClient;
  /**
   * Where CSRs go when there is no valid certificate (none stored, or expired): the
   * bootstrap credentials, as upstream's kubelet falls back to them. Made per attempt
   * and closed after it. Without it, `client` is used regardless.
   */
  readonly fallbackClient?: () => KubeClient;
  /** The subject and SANs wanted now; undefined while unknown (no node addresses yet). */
  readonly template: () => CsrTemplate | undefined;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly random?: () => number;
  /** How long one CSR is waited for (default 15 min, upstream's certificateWaitTimeout). */
  readonly waitTimeoutMs?: number;
  /** spec.expirationSeconds of the CSRs (default unset: the signer's duration). */
  readonly expirationSeconds?: number;
  /** How often a sleeping manager re-checks the template (default 1 min). */
  readonly recheckEveryMs?: number;
  readonly metrics?: CertificateMetrics;
  /**
   * Upstream's bootstrap certificate: the kubeconfig's own client pair (kubeadm writes
   * kubelet.conf with one embedded). When nothing valid is stored it is stored, used,
   * and rotated at once through the certificates API, as client-go's
   * getCurrentCertificateOrBootstrap does, so the cert dir holds
   * <pair>-current.pem from the start (kubeadm's kubelet-finalize points kubelet.conf at it).
   */
  readonly bootstrapPair?: { readonly certPem: string; readonly keyPem: string };
}

export type RotateListener = (pair: CertificatePair) => void | Promise<void>;

/** `notBefore + (0.7 + 0.2 * random) * validity`: upstream's jittered rotation point. */
export function nextRotationDeadline(
  x509: X509Certificate,
  random: () => number = Math.random,
): number {
  const start = x509.validFromDate.getTime();
  const total = x509.validToDate.getTime() - start;
  return start + total * (0.7 + 0.2 * random());
}

function subjectFields(x509: X509Certificate): { cn: string[]; o: string[] } {
  const cn: string[] = [];
  const o: string[] = [];
  for (const line of x509.subject.split('\n')) {
    const eq = line.indexOf('=');
    const k = line.slice(0, eq);
    const v = line.slice(eq + 1);
    if (k === 'CN') cn.push(v);
    if (k === 'O') o.push(v);
  }
  return { cn, o };
}

const sameSet = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && [...a].sort().join('\n') === [...b].sort().join('\n');

/** True when the certificate has exactly the subject and SANs of `t` (upstream's certSatisfiesTemplate). */
export function satisfiesTemplate(x509: X509Certificate, t: CsrTemplate): boolean {
  const { cn, o } = subjectFields(x509);
  if (cn.length !== 1 || cn[0] !== t.commonName || !sameSet(o, t.organization)) return false;
  const dns: string[] = [];
  const ips: string[] = [];
  for (const part of (x509.subjectAltName ?? '').split(', ')) {
    if (part.startsWith('DNS:')) dns.push(part.slice(4));
    if (part.startsWith('IP Address:')) ips.push(ipBytes(part.slice(11)).toString('hex'));
  }
  return (
    sameSet(dns, t.dnsNames) &&
    sameSet(
      ips,
      t.ipAddresses.map((ip) => ipBytes(ip).toString('hex')),
    )
  );
}

/** Keeps one certificate current (see the top of this file). */
export class CertificateManager {
  readonly #o: CertificateManagerOptions;
  readonly #log: Logger;
  readonly #random: () => number;
  readonly #listeners = new Set<RotateListener>();
  #state: CertificateManagerState = 'NEW';
  #current: CertificatePair | undefined;
  #deadline = 0;
  #expiredLogged = false;
  /** The template of the last rotation: a signer that drops a SAN must not cause a CSR loop. */
  #rotatedFor: string | undefined;
  #done: Promise<void> = Promise.resolve();

  constructor(options: CertificateManagerOptions) {
    this.#o = options;
    this.#log = options.logger.child({ component: 'certificate-manager', kind: options.kind });
    this.#random = options.random ?? Math.random;
  }

  get state(): CertificateManagerState {
    return this.#state;
  }

  /** The certificate in use, undefined until one is stored or issued. */
  current(): CertificatePair | undefined {
    return this.#current;
  }

  /** When the current certificate will be rotated (ms since the epoch; 0 without one). */
  get rotationDeadline(): number {
    return this.#deadline;
  }

  /** Seconds until the current certificate expires, negative once expired (the *_ttl_seconds gauge). */
  ttlSeconds(): number | undefined {
    if (this.#current === undefined) return undefined;
    return (this.#current.x509.validToDate.getTime() - this.#o.clock.now()) / 1000;
  }

  /** True when the certificate in use has expired (rotation failed until too late). */
  expired(): boolean {
    const ttl = this.ttlSeconds();
    return ttl !== undefined && ttl <= 0;
  }

  /** Calls `listener` with every new certificate; returns the unsubscribe function. */
  onRotate(listener: RotateListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Resolves once the rotation loop has ended (after the start signal aborted). */
  stopped(): Promise<void> {
    return this.#done;
  }

  /** Loads the stored certificate, then runs the rotation loop until `signal` aborts. */
  async start(signal: AbortSignal): Promise<void> {
    if (this.#state !== 'NEW') {
      throw new BerthError(
        'BERTH_CERT_MANAGER_STATE',
        `Cannot start the ${this.#o.kind} certificate manager as it is ${this.#state}`,
      );
    }
    this.#state = 'RUNNING';
    const loaded = await this.#o.store.load();
    if (loaded.state === 'ok') {
      this.#use(loaded.pair);
    } else if (loaded.state === 'invalid') {
      this.#log.error('The stored certificate is unusable; requesting a new one', {
        code: loaded.error.code,
        file: loaded.error.file,
        err: loaded.error.message,
      });
    }
    if (loaded.state !== 'ok' && this.#o.bootstrapPair !== undefined) await this.#useBootstrap();
    this.#done = this.#run(signal)
      .catch((err: unknown) => {
        this.#log.error('The certificate manager stopped on an unexpected error', {
          err: (err as Error).message,
        });
      })
      .finally(() => {
        this.#state = 'STOPPED';
      });
  }

  /** Stores the bootstrap pair and rotates it at once (a log line when it is unusable). */
  async #useBootstrap(): Promise<void> {
    const { certPem = '', keyPem = '' } = this.#o.bootstrapPair ?? {};
    try {
      this.#use(await this.#o.store.update(certPem, keyPem));
      this.#deadline = this.#o.clock.now();
      this.#log.info('Using the bootstrap certificate of the kubeconfig; rotating it now', {});
    } catch (err) {
      if (!(err instanceof CertificateStoreError)) throw err;
      this.#log.error('The bootstrap certificate is unusable', {
        code: err.code,
        err: err.message,
      });
    }
  }

  #use(pair: CertificatePair): void {
    this.#current = pair;
    this.#deadline = nextRotationDeadline(pair.x509, this.#random);
    this.#expiredLogged = false;
    this.#log.info('Certificate in use', {
      file: pair.file,
      expires: pair.x509.validToDate.toISOString(),
      rotationDeadline: new Date(this.#deadline).toISOString(),
    });
  }

  /** Milliseconds until the next rotation is due (0: now). */
  #dueInMs(): number {
    const cur = this.#current;
    if (cur === undefined) return 0;
    const t = this.#o.template();
    if (
      t !== undefined &&
      JSON.stringify(t) !== this.#rotatedFor &&
      !satisfiesTemplate(cur.x509, t)
    ) {
      this.#log.info('The certificate no longer matches the wanted names; rotating now', {
        dnsNames: t.dnsNames,
        ipAddresses: t.ipAddresses,
      });
      return 0;
    }
    return Math.max(0, this.#deadline - this.#o.clock.now());
  }

  async #run(signal: AbortSignal): Promise<void> {
    const { clock } = this.#o;
    const recheck = this.#o.recheckEveryMs ?? 60_000;
    let attempt = 0;
    try {
      for (;;) {
        const due = this.#dueInMs();
        if (due > 0) {
          await clock.sleep(Math.min(due, recheck), signal);
          continue;
        }
        try {
          await this.#rotate(signal);
          attempt = 0;
        } catch (err) {
          if (isAborted(signal)) return;
          this.#o.metrics?.renewError?.();
          const delayMs = retryDelay(attempt++, 2000, 300_000, this.#random);
          this.#log.error('Cannot rotate the certificate, retrying', {
            code: err instanceof BerthError ? err.code : 'UNKNOWN',
            err: (err as Error).message,
            retryInMs: Math.round(delayMs),
          });
          this.#reportExpiry();
          await clock.sleep(delayMs, signal);
        }
      }
    } catch (err) {
      if (!isAborted(signal)) throw err;
    }
  }

  #reportExpiry(): void {
    if (!this.expired() || this.#expiredLogged) return;
    this.#expiredLogged = true;
    this.#log.error('The certificate has expired and no new one was issued', {
      code: 'BERTH_CERT_EXPIRED',
      expired: this.#current?.x509.validToDate.toISOString(),
    });
  }

  async #rotate(signal: AbortSignal): Promise<void> {
    const o = this.#o;
    const template = o.template();
    if (template === undefined) {
      throw new BerthError(
        'BERTH_CERT_NO_TEMPLATE',
        `Cannot request a ${o.kind} certificate as the node has no addresses yet`,
      );
    }
    this.#rotatedFor = JSON.stringify(template);
    const fallback = this.expired() || this.#current === undefined ? o.fallbackClient : undefined;
    if (fallback === undefined) return this.#request(o.client, template, signal);
    const client = fallback();
    try {
      await this.#request(client, template, signal);
    } finally {
      await client.close();
    }
  }

  async #request(client: KubeClient, template: CsrTemplate, signal: AbortSignal): Promise<void> {
    const o = this.#o;
    const { key, keyPem } = generateKey();
    const serving = o.kind === 'serving';
    const name = await createCsrObject(
      client,
      {
        generateName: 'csr-',
        csrPem: createCsr(key, template),
        signerName: serving ? SERVING_SIGNER : CLIENT_SIGNER,
        usages: serving ? SERVING_USAGES : CLIENT_USAGES,
        ...(o.expirationSeconds === undefined ? {} : { expirationSeconds: o.expirationSeconds }),
      },
      signal,
    );
    this.#log.info(
      serving
        ? 'Requested a serving certificate; it needs approval by an operator or an approver'
        : 'Requested a client certificate',
      { csr: name },
    );
    const certPem = await waitForCertificate(client, name, {
      clock: o.clock,
      logger: this.#log,
      timeoutMs: o.waitTimeoutMs ?? 900_000,
      signal,
      random: this.#random,
    });
    let pair: CertificatePair;
    try {
      pair = await o.store.update(certPem, keyPem);
    } catch (err) {
      if (!(err instanceof CertificateStoreError)) throw err;
      throw new CertificateRequestError(
        'BERTH_CERT_ISSUED_INVALID',
        name,
        `The certificate issued for CertificateSigningRequest ${name} is unusable: ${err.message}`,
        { cause: err },
      );
    }
    const previous = this.#current;
    this.#use(pair);
    o.metrics?.rotated?.(
      previous === undefined ? 0 : (o.clock.now() - previous.x509.validFromDate.getTime()) / 1000,
    );
    await this.#notify(pair);
  }

  async #notify(pair: CertificatePair): Promise<void> {
    for (const listener of this.#listeners) {
      try {
        await listener(pair);
      } catch (err) {
        this.#log.error('A certificate rotation listener failed', {
          err: (err as Error).message,
        });
      }
    }
  }
}
