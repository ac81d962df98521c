/**
 * Disk full, at the unit level (issue #32, item 5): the state berth writes under its
 * root and cert directories, with every write there failing ENOSPC after half its data
 * (src/util/test-full-disk.ts), as a write(2) on a full filesystem does. The e2e
 * scenario (disk-full.test.ts) fills a real filesystem but cannot make a certificate
 * rotate in its window; here the rotation meets the full disk:
 * - client certificate rotation: the attempt fails and is retried on its back-off, the
 *   current pair stays whole and in use, no dated or temporary file is left, and once
 *   space returns the next attempt rotates;
 * - the allocation checkpoint (static pods' included: every pod's resources are in it):
 *   the file keeps its last whole state and the next change after space returns writes
 *   the whole state again.
 * The self-signed serving pair, the graceful-shutdown state and the pods' etc-hosts are
 * covered by their own unit tests (src/certificate/self-signed.test.ts,
 * src/nodeshutdown/storage.test.ts, src/kuberuntime/pod-dirs.test.ts).
 */
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ALLOCATED_PODS_STATE_FILE } from '../../src/allocation/checkpoint.ts';
import { CheckpointResourceState } from '../../src/allocation/state.ts';
import { clientTemplate, createCsr, generateKey } from '../../src/certificate/csr.ts';
import { CertificateManager } from '../../src/certificate/manager.ts';
import { CertificateStore } from '../../src/certificate/store.ts';
import { FakeApprover, TestCa } from '../../src/certificate/test-ca.ts';
import { FakeKubeClient } from '../../src/kube/fake-client.ts';
import { FakeClock } from '../../src/util/clock.ts';
import { MemoryLogger } from '../../src/util/logger.ts';
import { fillDisk } from '../../src/util/test-full-disk.ts';

const HOUR = 3_600_000;

/** Advances the fake clock a minute at a time, letting real file I/O finish in between. */
async function runMinutes(clock: FakeClock, minutes: number): Promise<void> {
  for (let i = 0; i < minutes; i++) {
    await clock.advance(60_000);
    await new Promise<void>((r) => setTimeout(r, 20));
  }
}

async function until(cond: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 60_000;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`Timed out waiting for ${what}`);
    await new Promise<void>((r) => setTimeout(r, 5));
  }
}

describe('state writes on a full disk', () => {
  test('client certificate rotation fails whole, retries on back-off, and rotates once space returns', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-full-cert-'));
    const clock = new FakeClock(Date.now());
    const client = new FakeKubeClient({ clock });
    const ca = new TestCa(clock);
    const approver = new FakeApprover(client, ca, () => ({
      action: 'approve',
      lifetimeMs: 10 * HOUR,
    }));
    approver.start();
    const store = new CertificateStore({ dir, pairName: 'kubelet-client', clock });
    const { key, keyPem } = generateKey();
    const first = await store.update(
      ca.sign(createCsr(key, clientTemplate('n1')), 10 * HOUR),
      keyPem,
    );
    const firstText = await readFile(first.file, 'utf8');
    let errors = 0;
    let rotations = 0;
    const manager = new CertificateManager({
      kind: 'client',
      store,
      client,
      clock,
      logger: new MemoryLogger(),
      random: () => 0,
      template: () => clientTemplate('n1'),
      metrics: {
        renewError: () => {
          errors++;
        },
      },
    });
    manager.onRotate(() => {
      rotations++;
    });
    const controller = new AbortController();
    const disk = fillDisk(dir);
    try {
      await manager.start(controller.signal);
      // Past the rotation deadline (7 h) with the cert dir full for 20 minutes.
      await clock.advance(7 * HOUR + 60_000);
      await runMinutes(clock, 20);
      await until(() => errors >= 2, 'two failed attempts');
      const csrs = client.calls.filter(
        (c) => c.verb === 'create' && c.resource === 'certificatesigningrequests',
      ).length;
      assert.ok(disk.failures >= 2, 'the writes met the full disk');
      // Back-off (2 s doubling to 5 min): a handful of attempts in 20 minutes, no storm.
      assert.ok(csrs >= 2 && csrs <= 12, `${csrs} CSRs in 20 min of a full disk`);
      assert.equal(rotations, 0);
      assert.equal(manager.current()?.file, first.file, 'the old pair stays in use');
      assert.deepEqual(await readdir(dir), [
        first.file.slice(dir.length + 1),
        'kubelet-client-current.pem',
      ]);
      assert.equal(await readFile(store.currentPath, 'utf8'), firstText, 'whole and unchanged');
      disk.restore();
      await runMinutes(clock, 10);
      await until(() => rotations === 1, 'the rotation once space returned');
      const loaded = await store.load();
      assert.equal(loaded.state, 'ok');
      assert.notEqual(loaded.state === 'ok' && loaded.pair.file, first.file);
      assert.equal(
        await readlink(store.currentPath),
        manager.current()?.file.slice(dir.length + 1),
      );
      assert.deepEqual(
        (await readdir(dir)).filter((f) => f.includes('.tmp')),
        [],
        'no temporary file',
      );
    } finally {
      disk.restore();
      controller.abort();
      await manager.stopped();
      await approver.stop();
      ca.dispose();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('the allocation checkpoint keeps its last whole state and catches up after', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-full-alloc-'));
    try {
      const state = await CheckpointResourceState.open(dir, ALLOCATED_PODS_STATE_FILE);
      await state.set('static-pod-uid', { containerResources: {} });
      const whole = await readFile(join(dir, ALLOCATED_PODS_STATE_FILE), 'utf8');
      const disk = fillDisk(dir);
      try {
        await assert.rejects(state.set('u2', { containerResources: {} }), {
          code: 'BERTH_ALLOCATION',
        });
      } finally {
        disk.restore();
      }
      assert.equal(await readFile(join(dir, ALLOCATED_PODS_STATE_FILE), 'utf8'), whole);
      assert.deepEqual(await readdir(dir), [ALLOCATED_PODS_STATE_FILE]);
      await state.set('u3', { containerResources: {} });
      const reopened = await CheckpointResourceState.open(dir, ALLOCATED_PODS_STATE_FILE);
      assert.ok(reopened.get('static-pod-uid') !== undefined);
      assert.ok(reopened.get('u2') !== undefined, 'the change made while full is written too');
      assert.ok(reopened.get('u3') !== undefined);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
