/**
 * The CgroupManager contract: the cgroupfs manager (v1 here, v2 in the VM), the systemd
 * manager (over the fake bus here, over the real systemd in the VM) and the fake pass it.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { sharesToWeight, weightToShares } from './cgroupfs.ts';
import type { CgroupManager } from './types.ts';

/** cpu.shares as read back: v2 keeps cpu.weight, so shares come back through it (lossy). */
function sharesAsRead(cg: CgroupManager, shares: number): number {
  return cg.version === 'v2' ? weightToShares(sharesToWeight(shares)) : shares;
}

export function cgroupManagerContract(name: string, make: () => CgroupManager): void {
  describe(`CgroupManager contract: ${name}`, () => {
    const cg = make();
    const root = `/berth-contract-${randomBytes(3).toString('hex')}`;
    after(() => cg.destroy(root));

    test('ensure creates missing parents, is idempotent, and exists/children see it', async () => {
      await cg.ensure(`${root}/kubepods/burstable/podabc`, { cpuShares: 512 });
      await cg.ensure(`${root}/kubepods/burstable/podabc`, { cpuShares: 512 });
      assert.equal(await cg.exists(`${root}/kubepods/burstable/podabc`), true);
      assert.equal(await cg.exists(`${root}/kubepods`), true);
      assert.equal(await cg.exists(`${root}/kubepods/besteffort`), false);
      assert.deepEqual(await cg.children(`${root}/kubepods/burstable`), [
        `${root}/kubepods/burstable/podabc`,
      ]);
    });

    test('update applies limits to an existing cgroup; a missing one is an error', async () => {
      await cg.update(`${root}/kubepods/burstable/podabc`, {
        cpuShares: 256,
        cpuQuota: 50_000,
        cpuPeriod: 100_000,
        memoryLimit: 64 * 1024 * 1024,
        pidsLimit: 100,
      });
      await assert.rejects(cg.update(`${root}/nope`, { cpuShares: 2 }));
    });

    test('read returns what update applied, without unlimited values', async () => {
      const state = await cg.read(`${root}/kubepods/burstable/podabc`);
      assert.equal(state.cpuShares, sharesAsRead(cg, 256));
      assert.equal(state.cpuQuota, 50_000);
      assert.equal(state.cpuPeriod, 100_000);
      assert.equal(state.memoryLimit, 64 * 1024 * 1024);
      assert.equal(state.pidsLimit, 100);
      await cg.update(`${root}/kubepods/burstable/podabc`, { cpuShares: 512, cpuQuota: -1 });
      const unlimited = await cg.read(`${root}/kubepods/burstable/podabc`);
      assert.equal(unlimited.cpuShares, sharesAsRead(cg, 512));
      assert.equal(unlimited.cpuQuota, -1);
      await assert.rejects(cg.read(`${root}/nope`));
    });

    test('an empty cgroup has no pids; destroy removes it with its children', async () => {
      assert.deepEqual(await cg.pids(`${root}/kubepods`), []);
      await cg.destroy(`${root}/kubepods/burstable`);
      assert.equal(await cg.exists(`${root}/kubepods/burstable/podabc`), false);
      assert.equal(await cg.exists(`${root}/kubepods/burstable`), false);
      assert.equal(await cg.exists(`${root}/kubepods`), true);
      await cg.destroy(`${root}/never-existed`);
    });

    test('names that leave the root are refused', async () => {
      await assert.rejects(cg.ensure('/../etc', {}), { code: 'BERTH_CGROUP' });
      await assert.rejects(cg.ensure('/', {}), { code: 'BERTH_CGROUP' });
    });
  });
}
