/**
 * The kubelet's self-signed serving certificate, as upstream's InitializeTLS
 * (cmd/kubelet/app/server.go) makes it: when neither tlsCertFile nor tlsPrivateKeyFile
 * is set and serverTLSBootstrap is off, the kubelet serves with
 * <certDirectory>/kubelet.crt and kubelet.key, and generates the pair there once
 * (client-go's cert.GenerateSelfSignedCertKey) if neither file is readable. kubeadm's
 * KubeletConfiguration sets none of the three, so every kubeadm node serves this way:
 * the API server does not verify kubelet serving certificates unless it is given
 * --kubelet-certificate-authority.
 *
 * What GenerateSelfSignedCertKey writes: a throw-away CA ("<host>-ca@<unix seconds>",
 * RSA 2048) that signs a leaf ("<host>@<unix seconds>", RSA 2048, serverAuth, the host
 * as a DNS or IP subjectAltName), both valid from an hour ago for a year; the cert file
 * holds the leaf then the CA, the key file the leaf's PKCS#1 key. The DER is encoded
 * here (node:crypto signs but cannot build certificates), with the extensions and
 * their criticality as Go's x509.CreateCertificate writes them.
 */
import { createHash, generateKeyPair, randomBytes, sign, type KeyObject } from 'node:crypto';
import { constants } from 'node:fs';
import { access, mkdir, rm } from 'node:fs/promises';
import { isIP } from 'node:net';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import { ipBytes } from './csr.ts';
import { writeFileAtomic } from './store.ts';
import {
  bitString,
  contextConstructed,
  contextPrimitive,
  octetString,
  oid,
  pem,
  sequence,
  setOf,
  tlv,
  utf8String,
} from './der.ts';

/** Upstream's file names in the cert directory (InitializeTLS). */
export const SELF_SIGNED_CERT_FILE = 'kubelet.crt';
export const SELF_SIGNED_KEY_FILE = 'kubelet.key';

const HOUR_MS = 3_600_000;
const YEAR_MS = 365 * 24 * HOUR_MS;

const OID_COMMON_NAME = '2.5.4.3';
const OID_SHA256_WITH_RSA = '1.2.840.113549.1.1.11';
const OID_KEY_USAGE = '2.5.29.15';
const OID_EXT_KEY_USAGE = '2.5.29.37';
const OID_BASIC_CONSTRAINTS = '2.5.29.19';
const OID_SUBJECT_KEY_ID = '2.5.29.14';
const OID_AUTHORITY_KEY_ID = '2.5.29.35';
const OID_SUBJECT_ALT_NAME = '2.5.29.17';
const OID_SERVER_AUTH = '1.3.6.1.5.5.7.3.1';

/** Why a self-signed pair could not be used or made. */
export class SelfSignedCertificateError extends Error {
  readonly code = 'BERTH_SELF_SIGNED_CERT';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SelfSignedCertificateError';
  }
}

/** A generated pair, PEM. */
export interface SelfSignedPair {
  /** The leaf, then the CA that signed it. */
  readonly certPem: string;
  /** The leaf's RSA key, PKCS#1 ("RSA PRIVATE KEY"). */
  readonly keyPem: string;
}

const generateRsa = promisify(generateKeyPair);

const boolean = (value: boolean): Buffer => Buffer.from([0x01, 0x01, value ? 0xff : 0x00]);
const nullValue = (): Buffer => Buffer.from([0x05, 0x00]);

/** A positive INTEGER from big-endian bytes: leading zeros dropped, a 0x00 kept before a high bit. */
function integer(bytes: Buffer): Buffer {
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start++;
  const body = bytes.subarray(start);
  return tlv(0x02, (body[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.from([0]), body]) : body);
}

/**
 * A serial in [1, 2^63 - 1), as upstream draws it (cryptorand.Int below MaxInt64-1, plus
 * one). Drawn by rejection so that every value is as likely.
 */
function serialNumber(): Buffer {
  for (;;) {
    const bytes = randomBytes(8);
    bytes[0] = (bytes[0] ?? 0) & 0x7f;
    const n = bytes.readBigUInt64BE();
    if (n < 2n ** 63n - 2n) {
      const out = Buffer.alloc(8);
      out.writeBigUInt64BE(n + 1n);
      return integer(out);
    }
  }
}

/** UTCTime through 2049, GeneralizedTime after (RFC 5280 4.1.2.5), to the second. */
function time(ms: number): Buffer {
  const iso = new Date(Math.floor(ms / 1000) * 1000).toISOString();
  const digits = iso.replace(/[-:T]/g, '').slice(0, 14);
  const year = Number(digits.slice(0, 4));
  return year < 2050
    ? tlv(0x17, Buffer.from(`${digits.slice(2)}Z`, 'ascii'))
    : tlv(0x18, Buffer.from(`${digits}Z`, 'ascii'));
}

const name = (commonName: string): Buffer =>
  sequence(setOf(sequence(oid(OID_COMMON_NAME), utf8String(commonName))));

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return sequence(oid(id), ...(critical ? [boolean(true)] : []), octetString(value));
}

/** keyUsage as a named-bit BIT STRING: trailing zero bits dropped, as DER requires. */
function keyUsage(certSign: boolean): Buffer {
  // digitalSignature (bit 0) and keyEncipherment (bit 2), plus keyCertSign (bit 5).
  const byte = 0x80 | 0x20 | (certSign ? 0x04 : 0);
  const unused = certSign ? 2 : 5;
  return tlv(0x03, Buffer.from([unused, byte]));
}

/**
 * The subject key identifier Go derives when the template has none: the first 160 bits
 * of SHA-256 over the subjectPublicKey bits (Go 1.25's default).
 */
function subjectKeyId(spki: Buffer): Buffer {
  // SubjectPublicKeyInfo ::= SEQUENCE { algorithm, subjectPublicKey BIT STRING }: the
  // BIT STRING is the last element; its content after the unused-bits byte is hashed.
  const keyBits = lastElementContent(spki).subarray(1);
  return createHash('sha256').update(keyBits).digest().subarray(0, 20);
}

/** The content of the last element inside a DER SEQUENCE. */
function lastElementContent(der: Buffer): Buffer {
  const readLength = (at: number): { length: number; next: number } => {
    const first = der[at] ?? 0;
    if (first < 0x80) return { length: first, next: at + 1 };
    let length = 0;
    for (let i = 1; i <= (first & 0x7f); i++) length = length * 256 + (der[at + i] ?? 0);
    return { length, next: at + 1 + (first & 0x7f) };
  };
  const outer = readLength(1);
  let at = outer.next;
  let content: Buffer = Buffer.alloc(0);
  while (at < outer.next + outer.length) {
    const inner = readLength(at + 1);
    content = der.subarray(inner.next, inner.next + inner.length);
    at = inner.next + inner.length;
  }
  return content;
}

interface Signed {
  readonly der: Buffer;
  readonly subjectKeyId: Buffer;
}

function certificate(o: {
  readonly subject: string;
  readonly issuer: string;
  readonly notBeforeMs: number;
  readonly publicKey: KeyObject;
  readonly signer: KeyObject;
  readonly ca: boolean;
  readonly authorityKeyId?: Buffer;
  readonly host?: string;
}): Signed {
  const spki = o.publicKey.export({ type: 'spki', format: 'der' });
  const ski = subjectKeyId(spki);
  const algorithm = sequence(oid(OID_SHA256_WITH_RSA), nullValue());
  // Go's buildCertExtensions order: keyUsage, extKeyUsage, basicConstraints, subject
  // key id (CAs only), authority key id (when the issuer is another certificate), SANs.
  const extensions: Buffer[] = [extension(OID_KEY_USAGE, true, keyUsage(o.ca))];
  if (!o.ca) extensions.push(extension(OID_EXT_KEY_USAGE, false, sequence(oid(OID_SERVER_AUTH))));
  extensions.push(
    extension(OID_BASIC_CONSTRAINTS, true, o.ca ? sequence(boolean(true)) : sequence()),
  );
  if (o.ca) extensions.push(extension(OID_SUBJECT_KEY_ID, false, octetString(ski)));
  if (o.authorityKeyId !== undefined)
    extensions.push(
      extension(OID_AUTHORITY_KEY_ID, false, sequence(contextPrimitive(0, o.authorityKeyId))),
    );
  if (o.host !== undefined) {
    const san =
      isIP(o.host) !== 0
        ? contextPrimitive(7, ipBytes(o.host))
        : contextPrimitive(2, Buffer.from(o.host, 'ascii'));
    extensions.push(extension(OID_SUBJECT_ALT_NAME, false, sequence(san)));
  }
  const tbs = sequence(
    contextConstructed(0, integer(Buffer.from([2]))),
    serialNumber(),
    algorithm,
    name(o.issuer),
    sequence(time(o.notBeforeMs), time(o.notBeforeMs + YEAR_MS)),
    name(o.subject),
    spki,
    contextConstructed(3, sequence(...extensions)),
  );
  const signature = sign('sha256', tbs, o.signer);
  return { der: sequence(tbs, algorithm, bitString(signature)), subjectKeyId: ski };
}

/** client-go's GenerateSelfSignedCertKey(host, nil, nil), at the clock's time. */
export async function generateSelfSignedPair(host: string, clock: Clock): Promise<SelfSignedPair> {
  const now = clock.now();
  const seconds = Math.floor(now / 1000);
  // Valid an hour earlier, as upstream, so a skewed peer clock does not reject it.
  const notBeforeMs = now - HOUR_MS;
  const caKeys = await generateRsa('rsa', { modulusLength: 2048 });
  const caName = `${host}-ca@${String(seconds)}`;
  const ca = certificate({
    subject: caName,
    issuer: caName,
    notBeforeMs,
    publicKey: caKeys.publicKey,
    signer: caKeys.privateKey,
    ca: true,
  });
  const leafKeys = await generateRsa('rsa', { modulusLength: 2048 });
  const leaf = certificate({
    subject: `${host}@${String(seconds)}`,
    issuer: caName,
    notBeforeMs,
    publicKey: leafKeys.publicKey,
    signer: caKeys.privateKey,
    ca: false,
    authorityKeyId: ca.subjectKeyId,
    host,
  });
  return {
    certPem: pem('CERTIFICATE', leaf.der) + pem('CERTIFICATE', ca.der),
    keyPem: leafKeys.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
  };
}

async function readable(path: string): Promise<boolean> {
  try {
    await access(path, constants.R_OK);
    return true;
  } catch {
    return false;
  }
}

export interface ServingFilesOptions {
  /** tlsCertFile / tlsPrivateKeyFile as configured (null when unset). */
  readonly tlsCertFile: string | null;
  readonly tlsPrivateKeyFile: string | null;
  readonly serverTLSBootstrap: boolean;
  /** --cert-dir. */
  readonly certDir: string;
  /** The host the certificate names: --hostname-override or the hostname (the node name). */
  readonly host: string;
  readonly clock: Clock;
  readonly logger: Logger;
}

/**
 * The serving certificate files to use, as upstream's InitializeTLS picks them: the
 * configured pair; with serverTLSBootstrap and no pair, none (the rotating manager
 * serves); otherwise <certDir>/kubelet.{crt,key}, generated when neither is readable.
 * Only one of the two readable is an error, as upstream (they go as a pair).
 */
export async function servingCertificateFiles(
  o: ServingFilesOptions,
): Promise<{ readonly tlsCertFile: string | null; readonly tlsPrivateKeyFile: string | null }> {
  const configured = { tlsCertFile: o.tlsCertFile, tlsPrivateKeyFile: o.tlsPrivateKeyFile };
  const unset = (v: string | null): boolean => v === null || v === '';
  if (o.serverTLSBootstrap || !unset(o.tlsCertFile) || !unset(o.tlsPrivateKeyFile))
    return configured;
  const tlsCertFile = join(o.certDir, SELF_SIGNED_CERT_FILE);
  const tlsPrivateKeyFile = join(o.certDir, SELF_SIGNED_KEY_FILE);
  const [certOk, keyOk] = await Promise.all([readable(tlsCertFile), readable(tlsPrivateKeyFile)]);
  if (certOk !== keyOk) {
    const missing = certOk ? tlsPrivateKeyFile : tlsCertFile;
    throw new SelfSignedCertificateError(
      `error reading ${missing}, certificate and key must be supplied as a pair`,
    );
  }
  if (!certOk) {
    const pair = await generateSelfSignedPair(o.host, o.clock);
    try {
      // client-go's WriteCert / WriteKey: directories 0755, the cert 0644, the key 0600.
      // Unlike client-go, each file is written atomically and the pair goes as a pair: a
      // full disk must not leave a truncated certificate, or a certificate without its
      // key, which every later start would refuse; with neither file, it makes them again.
      await mkdir(dirname(tlsCertFile), { recursive: true, mode: 0o755 });
      await writeFileAtomic(tlsCertFile, pair.certPem, 0o644);
      try {
        await mkdir(dirname(tlsPrivateKeyFile), { recursive: true, mode: 0o755 });
        await writeFileAtomic(tlsPrivateKeyFile, pair.keyPem, 0o600);
      } catch (err) {
        await rm(tlsCertFile, { force: true });
        throw err;
      }
    } catch (err) {
      throw new SelfSignedCertificateError(
        `Cannot write the self-signed serving certificate to ${o.certDir}: ${String(err)}`,
        { cause: err },
      );
    }
    o.logger.debug('Using self-signed cert', {
      TLSCertFile: tlsCertFile,
      TLSPrivateKeyFile: tlsPrivateKeyFile,
    });
  }
  return { tlsCertFile, tlsPrivateKeyFile };
}
