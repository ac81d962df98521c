import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { readlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NodeAddress } from 'kubernetes-types/core/v1.js';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { KubeApiError } from '../kube/types.ts';
import { clientTemplate, createCsr, generateKey, servingTemplate } from './csr.ts';
import {
  CertificateManager,
  nextRotationDeadline,
  satisfiesTemplate,
  type CertificateManagerOptions,
} from './manager.ts';
import { CSRS } from './request.ts';
import { CertificateStore, type CertificatePair } from './store.ts';
import { FakeApprover, TestCa, type ApproverDecision } from './test-ca.ts';
import { unclosable, until } from './test-util.ts';

const HOUR = 3_600_000;
const LIFETIME = 10 * HOUR;
const cleanup: (() => void | Promise<void>)[] = [];
after(async () => {
  for (const c of cleanup.reverse()) await c();
});

function setup(
  kind: 'client' | 'serving',
  decide: (n: number) => ApproverDecision = () => ({ action: 'approve', lifetimeMs: LIFETIME }),
  extra: Partial<CertificateManagerOptions> = {},
) {
  const dir = mkdtempSync(join(tmpdir(), 'berth-certmgr-'));
  const clock = new FakeClock(Date.now());
  const fake = new FakeKubeClient({ clock });
  const ca = new TestCa(clock);
  const logger = new MemoryLogger();
  const store = new CertificateStore({
    dir,
    pairName: kind === 'client' ? 'kubelet-client' : 'kubelet-server',
    clock,
  });
  let n = 0;
  const approver = new FakeApprover(fake, ca, () => decide(n++));
  approver.start();
  const controller = new AbortController();
  let addresses: NodeAddress[] = [
    { type: 'Hostname', address: 'node-1' },
    { type: 'InternalIP', address: '10.0.0.7' },
  ];
  const manager = new CertificateManager({
    kind,
    store,
    client: fake,
    clock,
    logger,
    random: () => 0,
    template: () =>
      kind === 'client' ? clientTemplate('node-1') : servingTemplate('node-1', addresses),
    ...extra,
  });
  const rotated: CertificatePair[] = [];
  manager.onRotate((p) => {
    rotated.push(p);
  });
  cleanup.push(async () => {
    controller.abort();
    await manager.stopped();
    await approver.stop();
    ca.dispose();
    rmSync(dir, { recursive: true, force: true });
  });
  /** Stores a certificate issued now, as a previous run would have left it. */
  const seed = async (lifetimeMs = LIFETIME): Promise<CertificatePair> => {
    const { key, keyPem } = generateKey();
    const t = kind === 'client' ? clientTemplate('node-1') : servingTemplate('node-1', addresses);
    assert.ok(t);
    return store.update(ca.sign(createCsr(key, t), lifetimeMs), keyPem);
  };
  return {
    clock,
    fake,
    ca,
    logger,
    store,
    approver,
    manager,
    rotated,
    controller,
    seed,
    setAddresses: (a: NodeAddress[]) => {
      addresses = a;
    },
  };
}

/** Moves fake time in 1-minute steps (the manager's re-check interval) up to `ms`. */
async function advance(clock: FakeClock, ms: number): Promise<void> {
  for (let left = ms; left > 0; left -= 60_000) {
    await clock.advance(Math.min(60_000, left));
    await new Promise<void>((r) => setImmediate(r));
  }
}

describe('nextRotationDeadline', () => {
  it('is between 70% and 90% of the validity', async () => {
    const s = setup('client');
    const pair = await s.seed();
    const start = pair.x509.validFromDate.getTime();
    const total = pair.x509.validToDate.getTime() - start;
    assert.equal(
      nextRotationDeadline(pair.x509, () => 0),
      start + 0.7 * total,
    );
    assert.equal(
      nextRotationDeadline(pair.x509, () => 1),
      start + 0.9 * total,
    );
    for (let i = 0; i < 50; i++) {
      const d = nextRotationDeadline(pair.x509);
      assert.ok(d >= start + 0.7 * total && d <= start + 0.9 * total);
    }
  });
});

describe('CertificateManager', () => {
  for (const [random, fraction] of [
    [0, 0.7],
    [1, 0.9],
  ] as const) {
    it(`rotates the client certificate at ${fraction * 100}% of its lifetime (random ${random})`, async () => {
      const s = setup('client', undefined, { random: () => random });
      const first = await s.seed();
      await s.manager.start(s.controller.signal);
      assert.equal(s.manager.current()?.file, first.file);
      await advance(s.clock, fraction * LIFETIME - 2 * 60_000);
      await new Promise<void>((r) => setImmediate(r));
      assert.equal(s.approver.seen.length, 0, 'no CSR before the deadline');
      await advance(s.clock, 3 * 60_000);
      await until(() => s.rotated.length === 1, 'the rotation');
      const csr = s.approver.seen[0];
      assert.equal(csr?.spec.signerName, 'kubernetes.io/kube-apiserver-client-kubelet');
      assert.equal(csr.metadata?.generateName, 'csr-');
      const next = s.manager.current();
      assert.ok(next);
      assert.notEqual(next.file, first.file);
      assert.equal(s.rotated[0], next);
      assert.equal(await readlink(s.store.currentPath), next.file.split('/').pop());
      // The new certificate gets its own deadline, later than now.
      assert.ok(s.manager.rotationDeadline > s.clock.now());
      assert.equal(s.approver.seen.length, 1);
    });
  }

  it('rotates twice over two lifetimes', async () => {
    const s = setup('client');
    await s.seed();
    await s.manager.start(s.controller.signal);
    await advance(s.clock, 0.71 * LIFETIME);
    await until(() => s.rotated.length === 1, 'the first rotation');
    await advance(s.clock, 0.71 * LIFETIME);
    await until(() => s.rotated.length === 2, 'the second rotation');
    assert.equal(s.approver.seen.length, 2);
  });

  it("stores the kubeconfig's bootstrap pair and rotates it at once (upstream's bootstrap certificate)", async () => {
    const bootstrapCa = new TestCa(new FakeClock(Date.now()));
    cleanup.push(() => {
      bootstrapCa.dispose();
    });
    const { key, keyPem } = generateKey();
    const certPem = bootstrapCa.sign(createCsr(key, clientTemplate('node-1')), LIFETIME);
    const s = setup('client', undefined, { bootstrapPair: { certPem, keyPem } });
    await s.manager.start(s.controller.signal);
    const seeded = s.manager.current();
    assert.equal(seeded?.certPem.trim(), certPem.trim());
    assert.equal(await readlink(s.store.currentPath), seeded.file.split('/').pop());
    await until(() => s.rotated.length === 1, 'the rotation of the bootstrap pair');
    assert.notEqual(s.manager.current()?.certPem, seeded.certPem);
    assert.equal(s.approver.seen.length, 1);
  });

  it('ignores the bootstrap pair while the cert dir holds a valid certificate', async () => {
    const bootstrapCa = new TestCa(new FakeClock(Date.now()));
    cleanup.push(() => {
      bootstrapCa.dispose();
    });
    const { key, keyPem } = generateKey();
    const certPem = bootstrapCa.sign(createCsr(key, clientTemplate('node-1')), LIFETIME);
    const s = setup('client', undefined, { bootstrapPair: { certPem, keyPem } });
    const stored = await s.seed();
    await s.manager.start(s.controller.signal);
    assert.equal(s.manager.current()?.file, stored.file);
    await advance(s.clock, 2 * 60_000);
    assert.equal(s.approver.seen.length, 0);
  });

  it('requests a certificate at once when the cert dir has none', async () => {
    const s = setup('client');
    await s.manager.start(s.controller.signal);
    await until(() => s.rotated.length === 1, 'the first certificate');
    assert.match(s.manager.current()?.x509.subject ?? '', /CN=system:node:node-1/);
  });

  it('waits for an operator to approve a serving CSR, logging every minute', async () => {
    const s = setup('serving', () => ({ action: 'ignore' }));
    await s.manager.start(s.controller.signal);
    await until(() => s.approver.seen.length === 1, 'the serving CSR');
    const csr = s.approver.seen[0];
    assert.equal(csr?.spec.signerName, 'kubernetes.io/kubelet-serving');
    assert.deepEqual(csr.spec.usages, ['digital signature', 'server auth']);
    await advance(s.clock, 3 * 60_000);
    const waiting = s.logger.records.filter((r) =>
      r.msg.startsWith('Waiting for the CertificateSigningRequest'),
    );
    assert.equal(waiting.length, 3);
    assert.equal(s.manager.current(), undefined);
    await s.approver.approve(csr.metadata?.name ?? '', LIFETIME);
    await until(() => s.rotated.length === 1, 'the serving certificate');
    const x509 = s.manager.current()?.x509;
    assert.equal(x509?.subjectAltName, 'DNS:node-1, IP Address:10.0.0.7');
  });

  it('rotates a serving certificate early when the node addresses change', async () => {
    const s = setup('serving');
    await s.seed();
    await s.manager.start(s.controller.signal);
    await advance(s.clock, 5 * 60_000);
    assert.equal(s.approver.seen.length, 0);
    s.setAddresses([
      { type: 'Hostname', address: 'node-1' },
      { type: 'InternalIP', address: '10.0.0.8' },
    ]);
    await advance(s.clock, 60_000);
    await until(() => s.rotated.length === 1, 'the rotation');
    const cur = s.manager.current();
    assert.ok(cur);
    assert.equal(cur.x509.subjectAltName, 'DNS:node-1, IP Address:10.0.0.8');
    const wanted = servingTemplate('node-1', [
      { type: 'Hostname', address: 'node-1' },
      { type: 'InternalIP', address: '10.0.0.8' },
    ]);
    assert.ok(wanted);
    assert.ok(satisfiesTemplate(cur.x509, wanted));
    assert.equal(satisfiesTemplate(cur.x509, { ...wanted, ipAddresses: ['10.0.0.7'] }), false);
  });

  it('retries with back-off when the API is unreachable, counting renew errors', async () => {
    let errors = 0;
    const s = setup('client', undefined, { metrics: { renewError: () => errors++ } });
    s.fake.failNext({
      verb: 'create',
      resource: CSRS.resource,
      times: 2,
      error: new KubeApiError(0, 'Unknown', 'connect ECONNREFUSED'),
    });
    await s.manager.start(s.controller.signal);
    await until(() => errors === 1, 'the first failure');
    assert.equal(s.rotated.length, 0);
    await advance(s.clock, 60_000);
    await until(() => s.rotated.length === 1, 'the certificate after the outage');
    assert.equal(errors, 2);
  });

  it('reports an expired certificate: expired(), negative TTL, one error log', async () => {
    const s = setup('client', () => ({ action: 'ignore' }), { waitTimeoutMs: HOUR });
    const pair = await s.seed(2 * HOUR);
    await s.manager.start(s.controller.signal);
    assert.ok((s.manager.ttlSeconds() ?? 0) > 7000);
    assert.equal(s.manager.expired(), false);
    await advance(s.clock, 3 * HOUR);
    assert.equal(s.manager.expired(), true);
    assert.ok((s.manager.ttlSeconds() ?? 0) < 0);
    const logs = s.logger.records.filter((r) => r.fields['code'] === 'BERTH_CERT_EXPIRED');
    assert.equal(logs.length, 1);
    assert.equal(logs[0]?.level, 'error');
    assert.equal(
      s.manager.current()?.file,
      pair.file,
      'the old pair stays until a new one is issued',
    );
  });

  it('ignores a corrupt stored pair (logged) and requests a new one', async () => {
    const s = setup('client');
    const { writeFile } = await import('node:fs/promises');
    const pair = await s.seed();
    await writeFile(pair.file, 'garbage');
    await s.manager.start(s.controller.signal);
    assert.equal(s.manager.current(), undefined);
    assert.ok(s.logger.records.some((r) => r.fields['code'] === 'BERTH_CERT_PEM_INVALID'));
    await until(() => s.rotated.length === 1, 'the replacement');
  });

  it('files CSRs with the fallback (bootstrap) client while it has no valid certificate', async () => {
    const main = new FakeKubeClient();
    main.failNext({
      verb: 'create',
      times: 100,
      error: new KubeApiError(401, 'Unauthorized', 'Unauthorized'),
    });
    let fallbacks = 0;
    const target: { fake?: FakeKubeClient } = {};
    const s = setup('client', undefined, {
      client: main,
      fallbackClient: () => {
        fallbacks++;
        assert.ok(target.fake);
        return unclosable(target.fake);
      },
    });
    target.fake = s.fake;
    await s.manager.start(s.controller.signal);
    await until(() => s.rotated.length === 1, 'the certificate via the fallback');
    assert.equal(fallbacks, 1);
    assert.equal(main.calls.length, 0);
    // With a valid certificate, the next rotation goes through the node's own client.
    await advance(s.clock, 0.71 * LIFETIME);
    await until(() => main.calls.length > 0, 'a CSR on the main client');
    assert.equal(fallbacks, 1);
  });

  it('stops on abort and refuses a second start', async () => {
    const s = setup('client');
    await s.seed();
    await s.manager.start(s.controller.signal);
    await assert.rejects(s.manager.start(s.controller.signal), {
      code: 'BERTH_CERT_MANAGER_STATE',
    });
    s.controller.abort();
    await s.manager.stopped();
    assert.equal(s.manager.state, 'STOPPED');
    assert.equal(s.clock.pending, 0);
  });
});
