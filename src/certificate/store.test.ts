import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile, readlink, readdir, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeClock } from '../util/clock.ts';
import { clientTemplate, createCsr, generateKey } from './csr.ts';
import { CertificateStore, validatePair } from './store.ts';
import { TestCa } from './test-ca.ts';

const DAY = 86_400_000;
const clock = new FakeClock(Date.now());
const ca = new TestCa(clock);
const dirs: string[] = [];
after(() => {
  ca.dispose();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function freshDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'berth-store-'));
  dirs.push(d);
  return d;
}

function issue(lifetimeMs = DAY): { certPem: string; keyPem: string } {
  const { key, keyPem } = generateKey();
  return { certPem: ca.sign(createCsr(key, clientTemplate('n1')), lifetimeMs), keyPem };
}

describe('CertificateStore', () => {
  it('is absent in an empty dir', async () => {
    const store = new CertificateStore({ dir: freshDir(), pairName: 'kubelet-client', clock });
    assert.deepEqual(await store.load(), { state: 'absent' });
  });

  it('writes a dated 0600 file with cert then key, and points -current.pem at it', async () => {
    const dir = freshDir();
    const store = new CertificateStore({ dir, pairName: 'kubelet-client', clock });
    const { certPem, keyPem } = issue();
    const pair = await store.update(certPem, keyPem);
    assert.match(pair.file, /kubelet-client-\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d\.pem$/);
    assert.equal((await stat(pair.file)).mode & 0o777, 0o600);
    assert.equal(
      await readlink(join(dir, 'kubelet-client-current.pem')),
      pair.file.split('/').pop(),
    );
    const text = await readFile(store.currentPath, 'utf8');
    assert.ok(text.indexOf('BEGIN CERTIFICATE') < text.indexOf('PRIVATE KEY'));
    const loaded = await store.load();
    assert.equal(loaded.state, 'ok');
    assert.equal(
      loaded.state === 'ok' && loaded.pair.x509.subject.includes('CN=system:node:n1'),
      true,
    );
  });

  it('reports a truncated file and never returns it', async () => {
    const dir = freshDir();
    const store = new CertificateStore({ dir, pairName: 'kubelet-client', clock });
    const { certPem, keyPem } = issue();
    const pair = await store.update(certPem, keyPem);
    const text = await readFile(pair.file, 'utf8');
    await writeFile(pair.file, text.slice(0, Math.floor(text.length * 0.6)));
    const loaded = await store.load();
    assert.equal(loaded.state, 'invalid');
    assert.equal(loaded.state === 'invalid' && loaded.error.code, 'BERTH_CERT_PEM_INVALID');
    assert.equal(loaded.state === 'invalid' && loaded.error.file, pair.file);
  });

  it('reports garbage inside PEM armour', async () => {
    const dir = freshDir();
    const store = new CertificateStore({ dir, pairName: 'kubelet-client', clock });
    const { keyPem } = issue();
    await writeFile(
      join(dir, 'kubelet-client-current.pem'),
      `-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n${keyPem}`,
    );
    const loaded = await store.load();
    assert.equal(loaded.state === 'invalid' && loaded.error.code, 'BERTH_CERT_PEM_INVALID');
  });

  it('reports a key that does not belong to the certificate', () => {
    const { certPem } = issue();
    const other = generateKey();
    assert.throws(() => validatePair(certPem, other.keyPem, clock.now(), 'f'), {
      code: 'BERTH_CERT_KEY_MISMATCH',
    });
  });

  it('reports an expired certificate', () => {
    const { certPem, keyPem } = issue(DAY);
    assert.ok(validatePair(certPem, keyPem, clock.now(), 'f'));
    assert.throws(() => validatePair(certPem, keyPem, clock.now() + 2 * DAY, 'f'), {
      code: 'BERTH_CERT_EXPIRED',
    });
  });

  it('refuses to store an invalid pair and keeps the current one', async () => {
    const dir = freshDir();
    const store = new CertificateStore({ dir, pairName: 'kubelet-server', clock });
    const good = issue();
    const first = await store.update(good.certPem, good.keyPem);
    await assert.rejects(store.update(good.certPem, generateKey().keyPem), {
      code: 'BERTH_CERT_KEY_MISMATCH',
    });
    const loaded = await store.load();
    assert.equal(loaded.state === 'ok' && loaded.pair.file, first.file);
  });

  it('keeps the symlink on a complete file while rotating under readers', async () => {
    const dir = freshDir();
    const store = new CertificateStore({ dir, pairName: 'kubelet-client', clock });
    const pairs = Array.from({ length: 6 }, () => issue());
    const first = pairs[0];
    assert.ok(first);
    await store.update(first.certPem, first.keyPem);
    let reads = 0;
    let writing = true;
    const reader = (async () => {
      while (writing) {
        const loaded = await store.load();
        assert.equal(loaded.state, 'ok', loaded.state === 'invalid' ? loaded.error.message : '');
        reads++;
      }
    })();
    for (const p of pairs.slice(1)) {
      await clock.advance(1000); // a new dated name each time
      await store.update(p.certPem, p.keyPem);
    }
    writing = false;
    await reader;
    assert.ok(reads > 0);
    const names = await readdir(dir);
    assert.equal(names.filter((n) => n.includes('.tmp-')).length, 0);
    assert.equal(names.filter((n) => /kubelet-client-\d/.test(n)).length, 6);
  });

  it('falls back to the configured pair files while there is no -current.pem', async () => {
    const dir = freshDir();
    const { certPem, keyPem } = issue();
    await writeFile(join(dir, 'kubelet.crt'), certPem);
    await writeFile(join(dir, 'kubelet.key'), keyPem);
    const fallback = { certFile: join(dir, 'kubelet.crt'), keyFile: join(dir, 'kubelet.key') };
    const store = new CertificateStore({ dir, pairName: 'kubelet-server', clock, fallback });
    const loaded = await store.load();
    assert.equal(loaded.state === 'ok' && loaded.pair.file, fallback.certFile);
    const next = issue();
    const stored = await store.update(next.certPem, next.keyPem);
    const after = await store.load();
    assert.equal(after.state === 'ok' && after.pair.file, stored.file);
    await writeFile(fallback.keyFile, generateKey().keyPem);
    const mismatched = new CertificateStore({ dir: freshDir(), pairName: 'x', clock, fallback });
    const bad = await mismatched.load();
    assert.equal(bad.state === 'invalid' && bad.error.code, 'BERTH_CERT_KEY_MISMATCH');
  });
});
