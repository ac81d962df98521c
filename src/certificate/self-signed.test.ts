import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { fillDisk } from '../util/test-full-disk.ts';
import {
  SelfSignedCertificateError,
  generateSelfSignedPair,
  servingCertificateFiles,
} from './self-signed.ts';

const logger = new MemoryLogger();
// 2026-03-01T12:00:00Z
const NOW = Date.UTC(2026, 2, 1, 12, 0, 0);

function splitPem(text: string): string[] {
  return text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n/g) ?? [];
}

describe('self-signed serving certificate (client-go GenerateSelfSignedCertKey)', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-self-signed-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('writes the leaf then its CA, named and dated as upstream, for a DNS host', async () => {
    const pair = await generateSelfSignedPair('node-a', new FakeClock(NOW));
    const [leafPem, caPem, ...rest] = splitPem(pair.certPem);
    assert.equal(rest.length, 0);
    assert.ok(leafPem !== undefined && caPem !== undefined);
    const leaf = new X509Certificate(leafPem);
    const ca = new X509Certificate(caPem);
    const seconds = String(NOW / 1000);
    assert.equal(leaf.subject, `CN=node-a@${seconds}`);
    assert.equal(leaf.issuer, `CN=node-a-ca@${seconds}`);
    assert.equal(ca.subject, `CN=node-a-ca@${seconds}`);
    assert.equal(ca.issuer, ca.subject);
    assert.equal(leaf.subjectAltName, 'DNS:node-a');
    assert.equal(leaf.ca, false);
    assert.equal(ca.ca, true);
    // From an hour before now, for 365 days.
    assert.equal(new Date(leaf.validFrom).getTime(), NOW - 3_600_000);
    assert.equal(new Date(leaf.validTo).getTime(), NOW - 3_600_000 + 365 * 86_400_000);
    assert.deepEqual(leaf.keyUsage, ['1.3.6.1.5.5.7.3.1']);
    assert.ok(leaf.verify(ca.publicKey), 'the CA signed the leaf');
    assert.ok(ca.verify(ca.publicKey), 'the CA is self-signed');
    assert.ok(leaf.checkIssued(ca));
    // The key is the leaf's, PKCS#1 RSA 2048.
    assert.match(pair.keyPem, /^-----BEGIN RSA PRIVATE KEY-----\n/);
    const key = createPrivateKey(pair.keyPem);
    assert.equal(key.asymmetricKeyDetails?.modulusLength, 2048);
    assert.ok(leaf.checkPrivateKey(key));
    assert.equal(ca.checkPrivateKey(key), false);
  });

  it("openssl reads the extensions as Go's x509 writes them and verifies the chain", async () => {
    const pair = await generateSelfSignedPair('node-b', new FakeClock(Date.now()));
    const [leafPem = '', caPem = ''] = splitPem(pair.certPem);
    await writeFile(join(dir, 'leaf.pem'), leafPem);
    await writeFile(join(dir, 'ca.pem'), caPem);
    const leafText = execFileSync(
      'openssl',
      ['x509', '-noout', '-text', '-in', join(dir, 'leaf.pem')],
      {
        encoding: 'utf8',
      },
    );
    assert.match(leafText, /Key Usage: critical\s+Digital Signature, Key Encipherment\n/);
    assert.match(leafText, /Extended Key Usage:\s+TLS Web Server Authentication\n/);
    assert.match(leafText, /Basic Constraints: critical\s+CA:FALSE\n/);
    assert.match(leafText, /Authority Key Identifier:/);
    assert.match(leafText, /Signature Algorithm: sha256WithRSAEncryption/);
    const caText = execFileSync(
      'openssl',
      ['x509', '-noout', '-text', '-in', join(dir, 'ca.pem')],
      {
        encoding: 'utf8',
      },
    );
    assert.match(
      caText,
      /Key Usage: critical\s+Digital Signature, Key Encipherment, Certificate Sign\n/,
    );
    assert.match(caText, /Basic Constraints: critical\s+CA:TRUE\n/);
    assert.match(caText, /Subject Key Identifier:/);
    const verified = execFileSync(
      'openssl',
      ['verify', '-CAfile', join(dir, 'ca.pem'), '-purpose', 'sslserver', join(dir, 'leaf.pem')],
      { encoding: 'utf8' },
    );
    assert.match(verified, /leaf\.pem: OK/);
  });

  it('puts an IP host in an IP subjectAltName', async () => {
    const pair = await generateSelfSignedPair('10.1.2.3', new FakeClock(NOW));
    const leaf = new X509Certificate(splitPem(pair.certPem)[0] ?? '');
    assert.equal(leaf.subjectAltName, 'IP Address:10.1.2.3');
  });

  it('serves TLS that a client trusting the CA accepts for the host name', async () => {
    const pair = await generateSelfSignedPair('localhost', new FakeClock(Date.now()));
    const caPem = splitPem(pair.certPem)[1] ?? '';
    const server = createServer({ cert: pair.certPem, key: pair.keyPem }, (s) => s.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect({ port, host: '127.0.0.1', servername: 'localhost', ca: caPem });
        let data = '';
        socket.on('data', (d: Buffer) => {
          data += d.toString();
        });
        socket.on('end', () => {
          resolve(data);
        });
        socket.on('error', reject);
      });
      assert.equal(answer, 'ok');
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('servingCertificateFiles (upstream InitializeTLS)', () => {
  const base = { serverTLSBootstrap: false, host: 'node-a', clock: new FakeClock(NOW), logger };

  it('generates <certDir>/kubelet.crt and kubelet.key once when nothing is configured', async () => {
    const certDir = join(await mkdtemp(join(tmpdir(), 'berth-self-signed-')), 'pki');
    try {
      const files = await servingCertificateFiles({
        ...base,
        certDir,
        tlsCertFile: null,
        tlsPrivateKeyFile: null,
      });
      assert.deepEqual(files, {
        tlsCertFile: join(certDir, 'kubelet.crt'),
        tlsPrivateKeyFile: join(certDir, 'kubelet.key'),
      });
      assert.equal((await stat(files.tlsCertFile ?? '')).mode & 0o777, 0o644);
      assert.equal((await stat(files.tlsPrivateKeyFile ?? '')).mode & 0o777, 0o600);
      const first = await readFile(files.tlsCertFile ?? '', 'utf8');
      // A restart reuses the pair instead of making a new one.
      await servingCertificateFiles({ ...base, certDir, tlsCertFile: '', tlsPrivateKeyFile: '' });
      assert.equal(await readFile(files.tlsCertFile ?? '', 'utf8'), first);
    } finally {
      await rm(dirname(certDir), { recursive: true, force: true });
    }
  });

  it('refuses one half of the pair, naming the missing file', async () => {
    const certDir = await mkdtemp(join(tmpdir(), 'berth-self-signed-'));
    try {
      await writeFile(join(certDir, 'kubelet.crt'), 'x');
      await assert.rejects(
        servingCertificateFiles({ ...base, certDir, tlsCertFile: null, tlsPrivateKeyFile: null }),
        (err: unknown) =>
          err instanceof SelfSignedCertificateError &&
          err.message ===
            `error reading ${join(certDir, 'kubelet.key')}, certificate and key must be supplied as a pair`,
      );
    } finally {
      await rm(certDir, { recursive: true, force: true });
    }
  });

  it('on a full disk leaves neither file nor a temporary one, and makes the pair once space returns', async () => {
    const certDir = await mkdtemp(join(tmpdir(), 'berth-self-signed-'));
    const options = { ...base, certDir, tlsCertFile: null, tlsPrivateKeyFile: null };
    try {
      const disk = fillDisk(certDir);
      try {
        await assert.rejects(servingCertificateFiles(options), SelfSignedCertificateError);
      } finally {
        disk.restore();
      }
      assert.ok(disk.failures > 0, 'the write met the full disk');
      // client-go's plain writes left a truncated kubelet.crt here, which every later
      // start refused ("certificate and key must be supplied as a pair").
      assert.deepEqual(await readdir(certDir), []);
      const files = await servingCertificateFiles(options);
      const cert = new X509Certificate(await readFile(files.tlsCertFile ?? '', 'utf8'));
      const key = createPrivateKey(await readFile(files.tlsPrivateKeyFile ?? '', 'utf8'));
      assert.ok(cert.checkPrivateKey(key));
    } finally {
      await rm(certDir, { recursive: true, force: true });
    }
  });

  it('removes the certificate when its key cannot be written', async () => {
    const certDir = await mkdtemp(join(tmpdir(), 'berth-self-signed-'));
    try {
      const options = { ...base, certDir, tlsCertFile: null, tlsPrivateKeyFile: null };
      // The disk fills up between the certificate and the key.
      const disk = fillDisk((p) => p.startsWith(join(certDir, 'kubelet.key')));
      try {
        await assert.rejects(servingCertificateFiles(options), SelfSignedCertificateError);
      } finally {
        disk.restore();
      }
      assert.deepEqual(await readdir(certDir), [], 'no certificate without its key');
    } finally {
      await rm(certDir, { recursive: true, force: true });
    }
  });

  it('keeps a configured pair, and makes nothing with serverTLSBootstrap', async () => {
    const certDir = join(tmpdir(), 'berth-self-signed-never-made');
    assert.deepEqual(
      await servingCertificateFiles({
        ...base,
        certDir,
        tlsCertFile: '/etc/c.crt',
        tlsPrivateKeyFile: '/etc/c.key',
      }),
      { tlsCertFile: '/etc/c.crt', tlsPrivateKeyFile: '/etc/c.key' },
    );
    assert.deepEqual(
      await servingCertificateFiles({
        ...base,
        serverTLSBootstrap: true,
        certDir,
        tlsCertFile: null,
        tlsPrivateKeyFile: null,
      }),
      { tlsCertFile: null, tlsPrivateKeyFile: null },
    );
    await assert.rejects(stat(certDir), { code: 'ENOENT' });
  });
});

function dirname(path: string): string {
  return path.slice(0, path.lastIndexOf('/'));
}
