/**
 * For tests on loopback: a self-signed EC P-256 certificate made by openssl. With
 * `ipSan`, the address is also a subject alternative name, which TLS verification of
 * an IP address needs (the CN alone is not checked for IPs).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

export interface TestCertificate {
  readonly certFile: string;
  readonly keyFile: string;
  readonly commonName: string;
  readonly ipSan?: string;
}

export async function writeTestCertificate(c: TestCertificate): Promise<void> {
  await promisify(execFile)('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    c.keyFile,
    '-out',
    c.certFile,
    '-days',
    '1',
    '-subj',
    `/CN=${c.commonName}`,
    ...(c.ipSan === undefined ? [] : ['-addext', `subjectAltName=IP:${c.ipSan}`]),
  ]);
}
