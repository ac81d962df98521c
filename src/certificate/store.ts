/**
 * The cert dir as upstream's certificate FileStore lays it out:
 *
 *   <dir>/<pair>-<YYYY-MM-DD-HH-MM-SS>.pem   certificate(s) then key, mode 0600
 *   <dir>/<pair>-current.pem                 symlink to the newest of those
 *
 * with <pair> "kubelet-client" or "kubelet-server". A kubeconfig names the symlink for
 * both client-certificate and client-key, so a rotation is one rename.
 *
 * Writes never expose a partial file: the dated file is written under a temporary
 * name, fsynced and renamed, and only then a new symlink is made beside the old one
 * and renamed over it (rename(2) replaces atomically). Loading validates before
 * anything is used: both PEM blocks parse, the key belongs to the certificate, and the
 * certificate has not expired. A pair that fails is reported as `CertificateStoreError`
 * and treated as absent, so the caller requests a fresh certificate.
 */
import { X509Certificate, randomBytes, type KeyObject } from 'node:crypto';
import { mkdir, open, readFile, readlink, rename, rm, symlink } from 'node:fs/promises';
import { basename, isAbsolute, join, resolve } from 'node:path';
import type { Clock } from '../util/clock.ts';
import { BerthError } from '../util/errors.ts';
import { parseKey } from './csr.ts';

export type CertificateStoreErrorCode =
  | 'BERTH_CERT_PEM_INVALID'
  | 'BERTH_CERT_KEY_MISMATCH'
  | 'BERTH_CERT_EXPIRED'
  | 'BERTH_CERT_UNREADABLE';

/** A stored pair that must not be used; `file` is the one that failed. */
export class CertificateStoreError extends BerthError {
  override readonly code: CertificateStoreErrorCode;
  readonly file: string;
  constructor(
    code: CertificateStoreErrorCode,
    file: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
    this.code = code;
    this.file = file;
  }
}

/** A validated certificate and its key. */
export interface CertificatePair {
  /** The certificate chain, PEM (leaf first). */
  readonly certPem: string;
  readonly keyPem: string;
  readonly x509: X509Certificate;
  readonly key: KeyObject;
  /** The file both came from (the dated file, not the symlink). */
  readonly file: string;
}

export type StoreLoad =
  | { readonly state: 'ok'; readonly pair: CertificatePair }
  | { readonly state: 'absent' }
  | { readonly state: 'invalid'; readonly error: CertificateStoreError };

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----\r?\n[\s\S]*?-----END \1-----\r?\n?/g;

/** The PEM blocks of `text` with their labels, in order. */
export function pemBlocks(text: string): { label: string; block: string }[] {
  return [...text.matchAll(PEM_BLOCK)].map((m) => ({ label: m[1] ?? '', block: m[0] }));
}

/**
 * Checks a certificate chain and key: both parse, the key is the leaf's, the leaf is
 * not expired at `now`. Throws CertificateStoreError naming `file`.
 */
export function validatePair(
  certPem: string,
  keyPem: string,
  now: number,
  file: string,
): CertificatePair {
  const certs = pemBlocks(certPem).filter((b) => b.label === 'CERTIFICATE');
  const keys = pemBlocks(keyPem).filter((b) => b.label.endsWith('PRIVATE KEY'));
  const leafPem = certs[0]?.block;
  const keyBlock = keys[0]?.block;
  if (leafPem === undefined || keyBlock === undefined) {
    throw new CertificateStoreError(
      'BERTH_CERT_PEM_INVALID',
      file,
      `Cannot use ${file} as it lacks a complete ${leafPem === undefined ? 'CERTIFICATE' : 'PRIVATE KEY'} PEM block (truncated or corrupt)`,
    );
  }
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(leafPem);
  } catch (err) {
    throw new CertificateStoreError(
      'BERTH_CERT_PEM_INVALID',
      file,
      `Cannot use ${file} as its certificate does not parse: ${(err as Error).message}`,
      { cause: err },
    );
  }
  const key = parseKey(keyBlock);
  if (key === undefined) {
    throw new CertificateStoreError(
      'BERTH_CERT_PEM_INVALID',
      file,
      `Cannot use ${file} as its private key does not parse`,
    );
  }
  if (!x509.checkPrivateKey(key)) {
    throw new CertificateStoreError(
      'BERTH_CERT_KEY_MISMATCH',
      file,
      `Cannot use ${file} as its private key does not match the certificate (subject ${x509.subject.replace(/\n/g, ', ')})`,
    );
  }
  if (x509.validToDate.getTime() <= now) {
    throw new CertificateStoreError(
      'BERTH_CERT_EXPIRED',
      file,
      `Cannot use ${file} as its certificate expired at ${x509.validToDate.toISOString()}`,
    );
  }
  const chain = certs.map((c) => c.block.trimEnd() + '\n').join('');
  return { certPem: chain, keyPem: keyBlock.trimEnd() + '\n', x509, key, file };
}

/** upstream's pem file timestamp layout, 2006-01-02-15-04-05 (UTC). */
function stamp(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19).replace(/[T:]/g, '-');
}

async function writeFileDurably(path: string, data: string, mode: number): Promise<void> {
  const handle = await open(path, 'w', mode);
  try {
    await handle.writeFile(data);
    await handle.chmod(mode);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Writes `data` to `path` atomically: a temporary file beside it, then rename. */
export async function writeFileAtomic(path: string, data: string, mode = 0o600): Promise<void> {
  const tmp = `${path}.tmp-${randomBytes(4).toString('hex')}`;
  try {
    await writeFileDurably(tmp, data, mode);
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

export interface CertificateStoreOptions {
  /** --cert-dir (default /var/lib/kubelet/pki). */
  readonly dir: string;
  /** "kubelet-client" or "kubelet-server". */
  readonly pairName: string;
  readonly clock: Clock;
  /**
   * Used while there is no -current.pem, as upstream's FileStore falls back to the
   * configured pair (the kubeconfig's client-certificate/client-key files, or
   * tlsCertFile/tlsPrivateKeyFile). Never written.
   */
  readonly fallback?: { readonly certFile: string; readonly keyFile: string };
}

/** One certificate's files in the cert dir (see the top of this file). */
export class CertificateStore {
  readonly #dir: string;
  readonly #pairName: string;
  readonly #clock: Clock;
  readonly #fallback: CertificateStoreOptions['fallback'];

  constructor(options: CertificateStoreOptions) {
    this.#dir = resolve(options.dir);
    this.#pairName = options.pairName;
    this.#clock = options.clock;
    this.#fallback = options.fallback;
  }

  /** The `-current.pem` symlink kubeconfigs and the server name. */
  get currentPath(): string {
    return join(this.#dir, `${this.#pairName}-current.pem`);
  }

  get dir(): string {
    return this.#dir;
  }

  /** The current pair, validated (see StoreLoad). */
  async load(): Promise<StoreLoad> {
    const path = this.currentPath;
    let text: string;
    let file = path;
    try {
      const target = await readlink(path).catch(() => undefined);
      if (target !== undefined) file = isAbsolute(target) ? target : join(this.#dir, target);
      text = await readFile(path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return this.#loadFallback();
      return {
        state: 'invalid',
        error: new CertificateStoreError(
          'BERTH_CERT_UNREADABLE',
          file,
          `Cannot read ${file}: ${(err as Error).message}`,
          { cause: err },
        ),
      };
    }
    try {
      return { state: 'ok', pair: validatePair(text, text, this.#clock.now(), file) };
    } catch (err) {
      if (err instanceof CertificateStoreError) return { state: 'invalid', error: err };
      throw err;
    }
  }

  async #loadFallback(): Promise<StoreLoad> {
    const f = this.#fallback;
    if (f === undefined) return { state: 'absent' };
    let cert: string;
    let key: string;
    try {
      [cert, key] = await Promise.all([readFile(f.certFile, 'utf8'), readFile(f.keyFile, 'utf8')]);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { state: 'absent' };
      return {
        state: 'invalid',
        error: new CertificateStoreError(
          'BERTH_CERT_UNREADABLE',
          f.certFile,
          `Cannot read ${f.certFile} / ${f.keyFile}: ${(err as Error).message}`,
          { cause: err },
        ),
      };
    }
    try {
      return { state: 'ok', pair: validatePair(cert, key, this.#clock.now(), f.certFile) };
    } catch (err) {
      if (err instanceof CertificateStoreError) return { state: 'invalid', error: err };
      throw err;
    }
  }

  /**
   * Validates and stores a new pair, then points the symlink at it. Returns the pair
   * as stored; throws CertificateStoreError (nothing changes) when it is invalid.
   */
  async update(certPem: string, keyPem: string): Promise<CertificatePair> {
    const now = this.#clock.now();
    const file = join(this.#dir, `${this.#pairName}-${stamp(now)}.pem`);
    const pair = validatePair(certPem, keyPem, now, file);
    await mkdir(this.#dir, { recursive: true, mode: 0o700 });
    await writeFileAtomic(file, pair.certPem + pair.keyPem, 0o600);
    const link = `${this.currentPath}.tmp-${randomBytes(4).toString('hex')}`;
    try {
      // Relative target, as upstream: the dir can be moved or bind-mounted elsewhere.
      await symlink(basename(file), link);
      await rename(link, this.currentPath);
    } catch (err) {
      await rm(link, { force: true });
      throw err;
    }
    return pair;
  }
}
