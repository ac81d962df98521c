/**
 * The few DER (X.690) encodings a PKCS#10 request needs. Hand-written instead of a
 * dependency: node:crypto already gives the SubjectPublicKeyInfo and the signature in
 * DER, so only the envelope (SEQUENCE, SET, INTEGER 0, OIDs, strings, context tags) is
 * left to encode, and `openssl req -verify` checks the result in the unit tests.
 */

/** Definite-length encoding: short form below 128, else 0x80 | byte count. */
function lengthBytes(length: number): Buffer {
  if (length < 0x80) return Buffer.from([length]);
  const bytes: number[] = [];
  for (let n = length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n % 256);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

/** One TLV with an explicit tag byte. */
export function tlv(tag: number, content: Buffer): Buffer {
  return Buffer.concat([Buffer.from([tag]), lengthBytes(content.length), content]);
}

export const sequence = (...items: Buffer[]): Buffer => tlv(0x30, Buffer.concat(items));

/** SET OF: DER sorts the encoded elements (X.690 11.6). */
export const setOf = (...items: Buffer[]): Buffer =>
  tlv(0x31, Buffer.concat([...items].sort((a, b) => Buffer.compare(a, b))));

export const integerZero = (): Buffer => Buffer.from([0x02, 0x01, 0x00]);

export const octetString = (content: Buffer): Buffer => tlv(0x04, content);

/** BIT STRING whose length is a whole number of bytes (no unused bits). */
export const bitString = (content: Buffer): Buffer =>
  tlv(0x03, Buffer.concat([Buffer.from([0]), content]));

export const utf8String = (text: string): Buffer => tlv(0x0c, Buffer.from(text, 'utf8'));

/** [n] IMPLICIT, constructed (e.g. the attributes of a CertificationRequestInfo). */
export const contextConstructed = (n: number, content: Buffer): Buffer => tlv(0xa0 | n, content);

/** [n] IMPLICIT, primitive (e.g. GeneralName dNSName [2] and iPAddress [7]). */
export const contextPrimitive = (n: number, content: Buffer): Buffer => tlv(0x80 | n, content);

/** An OBJECT IDENTIFIER from dotted text, base-128 arcs after the first two. */
export function oid(dotted: string): Buffer {
  const arcs = dotted.split('.').map(Number);
  const [first = 0, second = 0, ...rest] = arcs;
  const bytes: number[] = [first * 40 + second];
  for (const arc of rest) {
    const chunk: number[] = [arc % 128];
    for (let n = Math.floor(arc / 128); n > 0; n = Math.floor(n / 128))
      chunk.unshift(0x80 | (n % 128));
    bytes.push(...chunk);
  }
  return tlv(0x06, Buffer.from(bytes));
}

/** PEM armour around DER, 64 characters a line as openssl writes it. */
export function pem(label: string, der: Buffer): string {
  const body = der
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .replace(/\n$/, '');
  return `-----BEGIN ${label}-----\n${body}\n-----END ${label}-----\n`;
}
