import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  clientTemplate,
  createCsr,
  generateKey,
  ipBytes,
  parseKey,
  servingTemplate,
} from './csr.ts';
import { oid } from './der.ts';

function opensslText(csrPem: string): string {
  // -verify checks the self-signature: a wrong DER length or signature input fails here.
  return execFileSync('openssl', ['req', '-verify', '-noout', '-text'], {
    input: csrPem,
    stdio: ['pipe', 'pipe', 'pipe'],
  }).toString();
}

describe('createCsr', () => {
  it('makes a client CSR openssl verifies, subject O system:nodes, CN system:node:<node>', () => {
    const { key } = generateKey();
    const text = opensslText(createCsr(key, clientTemplate('node-a')));
    assert.match(text, /Subject: O = system:nodes, CN = system:node:node-a/);
    assert.match(text, /ASN1 OID: prime256v1/);
    assert.match(text, /ecdsa-with-SHA256/);
    assert.doesNotMatch(text, /Subject Alternative Name/);
  });

  it('puts DNS and IP SANs of the node addresses in a serving CSR', () => {
    const { key } = generateKey();
    const t = servingTemplate('node-a', [
      { type: 'Hostname', address: 'node-a' },
      { type: 'InternalIP', address: '10.1.2.3' },
      { type: 'InternalIP', address: 'fd00::5' },
      { type: 'InternalDNS', address: 'node-a.cluster.internal' },
      { type: 'ExternalIP', address: '10.1.2.3' },
    ]);
    assert.ok(t);
    assert.deepEqual(t.dnsNames, ['node-a', 'node-a.cluster.internal']);
    assert.deepEqual(t.ipAddresses, ['10.1.2.3', 'fd00::5']);
    const text = opensslText(createCsr(key, t));
    assert.match(
      text,
      /DNS:node-a, DNS:node-a.cluster.internal, IP Address:10.1.2.3, IP Address:FD00:0:0:0:0:0:0:5/,
    );
  });

  it('handles long SAN lists (multi-byte DER lengths)', () => {
    const { key } = generateKey();
    const addresses = Array.from({ length: 40 }, (_, i) => ({
      type: 'InternalDNS',
      address: `name-${i}.example.internal`,
    }));
    const t = servingTemplate('n', addresses);
    assert.ok(t);
    assert.match(opensslText(createCsr(key, t)), /DNS:name-39.example.internal/);
  });

  it('has no serving template without addresses', () => {
    assert.equal(servingTemplate('n', []), undefined);
  });
});

describe('helpers', () => {
  it('encodes IP addresses as a certificate holds them', () => {
    assert.equal(ipBytes('10.0.0.1').toString('hex'), '0a000001');
    assert.equal(ipBytes('::1').toString('hex'), `${'0'.repeat(30)}01`);
    assert.equal(ipBytes('fd00:1::2').toString('hex'), 'fd000001000000000000000000000002');
    assert.equal(ipBytes('::ffff:1.2.3.4').toString('hex'), '01020304');
    assert.throws(() => ipBytes('not-an-ip'), { code: 'BERTH_CERT_CSR_INVALID' });
  });

  it('encodes OIDs with multi-byte arcs', () => {
    assert.equal(oid('1.2.840.10045.4.3.2').toString('hex'), '06082a8648ce3d040302');
  });

  it('parses its own key PEM and rejects a truncated one', () => {
    const { keyPem } = generateKey();
    assert.ok(parseKey(keyPem));
    assert.equal(parseKey(keyPem.slice(0, 60)), undefined);
  });
});
