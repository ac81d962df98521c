import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile, readlink, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { loadKubeconfig, type KubeCredentials } from '../kube/kubeconfig.ts';
import { KubeApiError } from '../kube/types.ts';
import { bootstrapClientCertificate, type BootstrapOptions } from './bootstrap.ts';
import { clientTemplate, createCsr, generateKey } from './csr.ts';
import { CSRS } from './request.ts';
import { FakeApprover, TestCa, type ApproverDecision } from './test-ca.ts';
import { unclosable, until } from './test-util.ts';
import { validatePair } from './store.ts';

const HOUR = 3_600_000;
const cleanup: (() => void)[] = [];
after(() => {
  for (const c of cleanup) c();
});

interface Env {
  readonly dir: string;
  readonly clock: FakeClock;
  readonly fake: FakeKubeClient;
  readonly ca: TestCa;
  readonly logger: MemoryLogger;
  readonly options: BootstrapOptions;
  readonly connected: KubeCredentials[];
}

async function env(
  decide?: (n: number) => ApproverDecision,
): Promise<Env & { approver: FakeApprover }> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bootstrap-'));
  const clock = new FakeClock(Date.now());
  const fake = new FakeKubeClient({ clock });
  const ca = new TestCa(clock);
  cleanup.push(() => {
    ca.dispose();
    rmSync(dir, { recursive: true, force: true });
  });
  const logger = new MemoryLogger();
  const bootstrapPath = join(dir, 'bootstrap-kubelet.conf');
  await writeFile(
    bootstrapPath,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: c',
      '  cluster:',
      '    server: https://127.0.0.1:6443',
      `    certificate-authority-data: ${Buffer.from(ca.caPem).toString('base64')}`,
      'users:',
      '- name: u',
      '  user:',
      '    token: abcdef.0123456789abcdef',
      'contexts:',
      '- name: x',
      '  context: { cluster: c, user: u }',
      'current-context: x',
      '',
    ].join('\n'),
  );
  const connected: KubeCredentials[] = [];
  let n = 0;
  const approver = new FakeApprover(fake, ca, () =>
    decide === undefined ? { action: 'approve', lifetimeMs: 24 * HOUR } : decide(n++),
  );
  approver.start();
  cleanup.push(() => void approver.stop());
  return {
    dir,
    clock,
    fake,
    ca,
    logger,
    connected,
    approver,
    options: {
      kubeconfigPath: join(dir, 'kubelet.conf'),
      bootstrapKubeconfigPath: bootstrapPath,
      certDir: join(dir, 'pki'),
      nodeName: 'node-1',
      clock,
      logger,
      random: () => 0,
      connect: (c) => {
        connected.push(c);
        return unclosable(fake);
      },
    },
  };
}

/**
 * Runs the bootstrap, moving fake time on whenever it sleeps (back-off, wait timers),
 * until it settles. Bounded by real time, not by turns: the bootstrap also waits on real
 * file I/O, and a bound of 10,000 turns ran out on a loaded machine (a CI run; three
 * busy loops beside it hung one run in six) while a fake timer was still ahead of it,
 * which nothing then advanced: the test hung for good.
 */
async function drive<T>(clock: FakeClock, run: Promise<T>, stepMs = 10_000): Promise<T> {
  let settled = false;
  const result = run.finally(() => {
    settled = true;
  });
  const deadline = Date.now() + 60_000;
  while (!settled) {
    if (Date.now() > deadline) throw new Error('The bootstrap did not settle in 60 s');
    await new Promise<void>((r) => setImmediate(r));
    if (clock.pending > 0) await clock.advance(stepMs);
  }
  return result;
}

describe('bootstrapClientCertificate', () => {
  it('reuses a valid client certificate in the kubeconfig without any API call', async () => {
    const e = await env();
    const { key, keyPem } = generateKey();
    const certPem = e.ca.sign(createCsr(key, clientTemplate('node-1')), 24 * HOUR);
    await writeFile(
      e.options.kubeconfigPath,
      [
        'apiVersion: v1',
        'clusters: [{ name: c, cluster: { server: "https://127.0.0.1:6443" } }]',
        `users: [{ name: u, user: { client-certificate-data: ${Buffer.from(certPem).toString('base64')}, client-key-data: ${Buffer.from(keyPem).toString('base64')} } }]`,
        'contexts: [{ name: x, context: { cluster: c, user: u } }]',
        'current-context: x',
        '',
      ].join('\n'),
    );
    const result = await bootstrapClientCertificate(e.options);
    assert.equal(result.source, 'kubeconfig');
    assert.equal(e.connected.length, 0);
    assert.equal(
      e.fake.calls.filter((c) => c.resource === CSRS.resource && c.verb !== 'watch').length,
      0,
    );
  });

  it('bootstraps from the token: CSR, approval, cert dir, kubeconfig on the symlink', async () => {
    const e = await env();
    const result = await drive(e.clock, bootstrapClientCertificate(e.options));
    assert.equal(result.source, 'csr');
    assert.equal(e.connected[0]?.token, 'abcdef.0123456789abcdef');
    const csr = e.approver.seen[0];
    assert.ok(csr);
    assert.match(csr.metadata?.name ?? '', /^node-csr-[A-Za-z0-9_-]+$/);
    assert.equal(csr.spec.signerName, 'kubernetes.io/kube-apiserver-client-kubelet');
    assert.deepEqual(csr.spec.usages, ['digital signature', 'client auth']);
    assert.match(result.pair.x509.subject, /CN=system:node:node-1/);

    const current = join(e.options.certDir, 'kubelet-client-current.pem');
    assert.match(await readlink(current), /^kubelet-client-\d{4}-.*\.pem$/);
    assert.equal((await stat(current)).mode & 0o777, 0o600);
    const conf = parseYaml(await readFile(e.options.kubeconfigPath, 'utf8')) as {
      users: { user: Record<string, string> }[];
    };
    assert.equal(conf.users[0]?.user['client-certificate'], current);
    assert.equal(conf.users[0]?.user['client-key'], current);
    const creds = await loadKubeconfig(e.options.kubeconfigPath);
    assert.equal(creds.server, 'https://127.0.0.1:6443');
    assert.equal(creds.ca, e.ca.caPem);
    assert.ok(creds.cert !== undefined && creds.key !== undefined);
    assert.ok(validatePair(creds.cert, creds.key, e.clock.now(), 'kubeconfig'));
    await assert.rejects(stat(join(e.options.certDir, 'kubelet-client.key.tmp')));

    // A second start finds the kubeconfig valid and files no new CSR.
    const again = await bootstrapClientCertificate(e.options);
    assert.equal(again.source, 'kubeconfig');
    assert.equal(e.approver.seen.length, 1);
  });

  it('reports a denied CSR with its message and retries with a new key', async () => {
    const e = await env((n) =>
      n === 0
        ? { action: 'deny', message: 'not in inventory' }
        : { action: 'approve', lifetimeMs: HOUR },
    );
    const result = await drive(e.clock, bootstrapClientCertificate(e.options));
    assert.equal(result.source, 'csr');
    const denied = e.logger.records.find((r) => r.fields['code'] === 'BERTH_CERT_CSR_DENIED');
    assert.ok(denied);
    assert.equal(denied.level, 'error');
    assert.match(String(denied.fields['err']), /denied.*not in inventory/);
    assert.equal(e.approver.seen.length, 2);
    assert.notEqual(e.approver.seen[0]?.metadata?.name, e.approver.seen[1]?.metadata?.name);
  });

  it('replaces a corrupt PEM in the cert dir through a fresh CSR', async () => {
    const e = await env();
    const { key, keyPem } = generateKey();
    const certPem = e.ca.sign(createCsr(key, clientTemplate('node-1')), 24 * HOUR);
    const { mkdir } = await import('node:fs/promises');
    await mkdir(e.options.certDir, { recursive: true });
    const broken = join(e.options.certDir, 'kubelet-client-2020-01-01-00-00-00.pem');
    const text = certPem + keyPem;
    await writeFile(broken, text.slice(0, text.length - 40));
    await symlink(
      'kubelet-client-2020-01-01-00-00-00.pem',
      join(e.options.certDir, 'kubelet-client-current.pem'),
    );
    const current = join(e.options.certDir, 'kubelet-client-current.pem');
    await writeFile(
      e.options.kubeconfigPath,
      `apiVersion: v1\nclusters: [{ name: c, cluster: { server: "https://127.0.0.1:6443" } }]\nusers: [{ name: u, user: { client-certificate: ${current}, client-key: ${current} } }]\ncontexts: [{ name: x, context: { cluster: c, user: u } }]\ncurrent-context: x\n`,
    );
    const result = await drive(e.clock, bootstrapClientCertificate(e.options));
    assert.equal(result.source, 'csr');
    const reported = e.logger.records.find((r) => r.fields['code'] === 'BERTH_CERT_PEM_INVALID');
    assert.ok(reported, JSON.stringify(e.logger.records));
    assert.equal(reported.fields['file'], broken);
    assert.notEqual(await readlink(current), 'kubelet-client-2020-01-01-00-00-00.pem');
    assert.notEqual(result.pair.file, broken);
  });

  it('keeps retrying, with a clear log, while the token is rejected', async () => {
    const e = await env();
    e.fake.failNext({
      verb: 'create',
      resource: CSRS.resource,
      times: 3,
      error: new KubeApiError(401, 'Unauthorized', 'Unauthorized'),
    });
    const result = await drive(e.clock, bootstrapClientCertificate(e.options));
    assert.equal(result.source, 'csr');
    const rejected = e.logger.records.filter((r) => r.fields['code'] === 'BERTH_KUBE_UNAUTHORIZED');
    assert.equal(rejected.length, 3);
    assert.match(String(rejected[0]?.fields['err']), /bootstrap token .* rejected \(401/);
  });

  it('retries while the API server is unreachable', async () => {
    const e = await env();
    e.fake.failNext({
      verb: 'create',
      resource: CSRS.resource,
      times: 2,
      error: new KubeApiError(0, 'Unknown', 'connect ECONNREFUSED 127.0.0.1:6443'),
    });
    const result = await drive(e.clock, bootstrapClientCertificate(e.options));
    assert.equal(result.source, 'csr');
    assert.equal(
      e.logger.records.filter((r) => r.fields['err'] === 'The API server is unreachable').length,
      2,
    );
  });

  it('stops waiting when the signal aborts', async () => {
    const e = await env(() => ({ action: 'ignore' }));
    const controller = new AbortController();
    const run = bootstrapClientCertificate({ ...e.options, signal: controller.signal });
    await until(() => e.approver.seen.length === 1, 'the CSR');
    controller.abort(new Error('shutdown'));
    await assert.rejects(run, /shutdown/);
    // The key is kept: the next start finds the same CSR by name.
    assert.ok(await stat(join(e.options.certDir, 'kubelet-client.key.tmp')));
    assert.equal(e.clock.pending, 0);
  });
});
