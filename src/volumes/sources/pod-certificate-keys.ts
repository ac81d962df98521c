/**
 * The key of a podCertificate projection and the stub PKCS#10 request that proves the
 * kubelet holds it (upstream's generateKeyAndProof): the request has an empty subject
 * and no attributes, signed as Go's x509.CreateCertificateRequest signs for the key
 * (SHA-256 with RSA, ECDSA with the curve's hash, pure Ed25519). The key is written as
 * PKCS#8 "PRIVATE KEY" PEM, as upstream's pemEncodeKey.
 */
import { createPublicKey, generateKeyPair, sign, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import {
  bitString,
  contextConstructed,
  integerZero,
  oid,
  sequence,
} from '../../certificate/der.ts';
import { VolumeError } from '../types.ts';

const generate = promisify(generateKeyPair);

/** spec.keyType values the v1.37 API accepts. */
export const KEY_TYPES = [
  'RSA3072',
  'RSA4096',
  'ECDSAP256',
  'ECDSAP384',
  'ECDSAP521',
  'ED25519',
] as const;
export type PodCertificateKeyType = (typeof KEY_TYPES)[number];

interface Algorithm {
  readonly hash: string | null;
  readonly identifier: Buffer;
}

const NULL = Buffer.from([0x05, 0x00]);

async function newKey(keyType: string): Promise<{ key: KeyObject; alg: Algorithm }> {
  const ecdsa = (oidText: string, hash: string): Algorithm => ({
    hash,
    identifier: sequence(oid(oidText)),
  });
  switch (keyType) {
    case 'RSA3072':
    case 'RSA4096': {
      const { privateKey } = await generate('rsa', {
        modulusLength: keyType === 'RSA3072' ? 3072 : 4096,
      });
      return {
        key: privateKey,
        alg: { hash: 'sha256', identifier: sequence(oid('1.2.840.113549.1.1.11'), NULL) },
      };
    }
    case 'ECDSAP256':
      return {
        key: (await generate('ec', { namedCurve: 'P-256' })).privateKey,
        alg: ecdsa('1.2.840.10045.4.3.2', 'sha256'),
      };
    case 'ECDSAP384':
      return {
        key: (await generate('ec', { namedCurve: 'P-384' })).privateKey,
        alg: ecdsa('1.2.840.10045.4.3.3', 'sha384'),
      };
    case 'ECDSAP521':
      return {
        key: (await generate('ec', { namedCurve: 'P-521' })).privateKey,
        alg: ecdsa('1.2.840.10045.4.3.4', 'sha512'),
      };
    case 'ED25519':
      return {
        key: (await generate('ed25519')).privateKey,
        alg: { hash: null, identifier: sequence(oid('1.3.101.112')) },
      };
    default:
      throw new VolumeError(
        'BERTH_VOLUME_INVALID',
        `while generating keypair: unknown key type "${keyType}"`,
      );
  }
}

/** A fresh key of `keyType` as PKCS#8 PEM and the DER stub request signed with it. */
export async function generateKeyAndProof(
  keyType: string,
): Promise<{ readonly keyPem: Buffer; readonly stubPKCS10Request: Buffer }> {
  const { key, alg } = await newKey(keyType);
  const spki = createPublicKey(key).export({ type: 'spki', format: 'der' });
  // CertificationRequestInfo: version 0, an empty Name, the key, no attributes.
  const info = sequence(integerZero(), sequence(), spki, contextConstructed(0, Buffer.alloc(0)));
  const signature = sign(alg.hash, info, { key, dsaEncoding: 'der' });
  const request = sequence(info, alg.identifier, bitString(signature));
  const keyPem = Buffer.from(key.export({ type: 'pkcs8', format: 'pem' }));
  return { keyPem, stubPKCS10Request: request };
}
