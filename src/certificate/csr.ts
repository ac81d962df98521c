/**
 * Keys and PKCS#10 certificate signing requests for the kubelet's two certificates.
 *
 * - Keys are ECDSA P-256 (upstream's kubelet generates the same), PEM "EC PRIVATE KEY"
 *   (SEC1) as upstream's cert dir holds them.
 * - The request carries the subject (O system:nodes, CN system:node:<node>, in
 *   pkix.Name's RDN order) and, for serving, a subjectAltName extension request with
 *   dNSName and iPAddress entries. Signed with ecdsa-with-SHA256.
 * - CSR API usages follow upstream for non-RSA keys: no "key encipherment" (the
 *   csrapproving controller accepts both sets; kubeletClientRequiredUsagesNoRSA).
 */
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  sign,
  type KeyObject,
} from 'node:crypto';
import { isIPv4, isIPv6 } from 'node:net';
import type { NodeAddress } from 'kubernetes-types/core/v1.js';
import { BerthError } from '../util/errors.ts';
import {
  bitString,
  contextConstructed,
  contextPrimitive,
  octetString,
  oid,
  pem,
  sequence,
  setOf,
  integerZero,
  utf8String,
} from './der.ts';

export const CLIENT_SIGNER = 'kubernetes.io/kube-apiserver-client-kubelet';
export const SERVING_SIGNER = 'kubernetes.io/kubelet-serving';
export const CLIENT_USAGES: readonly string[] = ['digital signature', 'client auth'];
export const SERVING_USAGES: readonly string[] = ['digital signature', 'server auth'];

const OID_ORGANIZATION = '2.5.4.10';
const OID_COMMON_NAME = '2.5.4.3';
const OID_EXTENSION_REQUEST = '1.2.840.113549.1.9.14';
const OID_SUBJECT_ALT_NAME = '2.5.29.17';
const OID_ECDSA_SHA256 = '1.2.840.10045.4.3.2';

/** What a request asks for: the subject and, for serving, its names. */
export interface CsrTemplate {
  readonly commonName: string;
  readonly organization: readonly string[];
  readonly dnsNames: readonly string[];
  readonly ipAddresses: readonly string[];
}

/** A request that cannot be built (a bad IP address, an empty subject). */
export class CsrError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('BERTH_CERT_CSR_INVALID', message, options);
  }
}

/** A fresh P-256 key, with its PEM (SEC1, as upstream's keyutil writes it). */
export function generateKey(): { readonly key: KeyObject; readonly keyPem: string } {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const keyPem = privateKey.export({ type: 'sec1', format: 'pem' }).toString();
  return { key: privateKey, keyPem };
}

/** The key of a PEM, or undefined when it does not parse (a truncated file). */
export function parseKey(keyPem: string): KeyObject | undefined {
  try {
    return createPrivateKey(keyPem);
  } catch {
    return undefined;
  }
}

/** The client certificate's subject: O system:nodes, CN system:node:<node>. */
export function clientTemplate(nodeName: string): CsrTemplate {
  return {
    commonName: `system:node:${nodeName}`,
    organization: ['system:nodes'],
    dnsNames: [],
    ipAddresses: [],
  };
}

/**
 * The serving certificate's subject and SANs, as upstream's addressesToHostnamesAndIPs:
 * Hostname, InternalDNS and ExternalDNS addresses become DNS names, InternalIP and
 * ExternalIP addresses IP SANs, each once, in address order. Undefined when the node
 * has no address yet (the kubelet-serving signer requires at least one SAN).
 */
export function servingTemplate(
  nodeName: string,
  addresses: readonly NodeAddress[],
): CsrTemplate | undefined {
  const dnsNames: string[] = [];
  const ipAddresses: string[] = [];
  for (const a of addresses) {
    if (a.address === '') continue;
    const target =
      a.type === 'Hostname' || a.type === 'InternalDNS' || a.type === 'ExternalDNS'
        ? dnsNames
        : a.type === 'InternalIP' || a.type === 'ExternalIP'
          ? ipAddresses
          : undefined;
    if (target !== undefined && !target.includes(a.address)) target.push(a.address);
  }
  if (dnsNames.length === 0 && ipAddresses.length === 0) return undefined;
  return { ...clientTemplate(nodeName), dnsNames, ipAddresses };
}

/** The bytes of an IP address as a certificate holds them (4 for IPv4, 16 for IPv6). */
export function ipBytes(ip: string): Buffer {
  if (isIPv4(ip)) return Buffer.from(ip.split('.').map(Number));
  if (!isIPv6(ip)) throw new CsrError(`Cannot put "${ip}" in a CSR as it is not an IP address`);
  // Expand "::" and an embedded IPv4 tail into eight 16-bit groups.
  let text = ip.split('%')[0] ?? ip;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4?.[1] !== undefined) {
    const [a = 0, b = 0, c = 0, d = 0] = v4[1].split('.').map(Number);
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const fill = tail === undefined ? 0 : 8 - headGroups.length - tailGroups.length;
  const groups = [...headGroups, ...Array<string>(fill).fill('0'), ...tailGroups];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  // An IPv4-mapped address goes in as 4 bytes, as Go's x509 writes it (net.IP.To4).
  const mapped = out.subarray(0, 10).every((b) => b === 0) && out[10] === 0xff && out[11] === 0xff;
  return mapped ? out.subarray(12) : out;
}

function subjectName(t: CsrTemplate): Buffer {
  if (t.commonName === '') throw new CsrError('Cannot build a CSR as its common name is empty');
  const rdn = (type: string, value: string): Buffer =>
    setOf(sequence(oid(type), utf8String(value)));
  return sequence(
    ...t.organization.map((o) => rdn(OID_ORGANIZATION, o)),
    rdn(OID_COMMON_NAME, t.commonName),
  );
}

function attributes(t: CsrTemplate): Buffer {
  if (t.dnsNames.length === 0 && t.ipAddresses.length === 0)
    return contextConstructed(0, Buffer.alloc(0));
  const names = sequence(
    ...t.dnsNames.map((d) => contextPrimitive(2, Buffer.from(d, 'ascii'))),
    ...t.ipAddresses.map((ip) => contextPrimitive(7, ipBytes(ip))),
  );
  const extensions = sequence(sequence(oid(OID_SUBJECT_ALT_NAME), octetString(names)));
  return contextConstructed(0, sequence(oid(OID_EXTENSION_REQUEST), setOf(extensions)));
}

/** A PEM "CERTIFICATE REQUEST" for `template`, signed by `key`. */
export function createCsr(key: KeyObject, template: CsrTemplate): string {
  const spki = createPublicKey(key).export({ type: 'spki', format: 'der' });
  const info = sequence(integerZero(), subjectName(template), spki, attributes(template));
  const signature = sign('sha256', info, { key, dsaEncoding: 'der' });
  const der = sequence(info, sequence(oid(OID_ECDSA_SHA256)), bitString(signature));
  return pem('CERTIFICATE REQUEST', der);
}
