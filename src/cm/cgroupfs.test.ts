import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { after, test } from 'node:test';
import { CgroupfsManager, detectCgroupVersion, sharesToWeight } from './cgroupfs.ts';
import { cgroupManagerContract } from './contract.ts';
import { FakeCgroupManager } from './fake.ts';

const version = await detectCgroupVersion();
const real = new CgroupfsManager({ version });

cgroupManagerContract('fake', () => new FakeCgroupManager());
cgroupManagerContract(`cgroupfs ${version} (this host)`, () => real);

const root = `/berth-cgtest-${randomBytes(3).toString('hex')}`;
after(() => real.destroy(root));

test(
  'limits land in the controller files the kernel reads',
  { skip: version !== 'v1' },
  async () => {
    await real.ensure(`${root}/pod1`, {
      cpuShares: 512,
      cpuQuota: 50_000,
      cpuPeriod: 100_000,
      memoryLimit: 64 * 1024 * 1024,
      pidsLimit: 42,
    });
    const read = (c: string, f: string) => readFile(`/sys/fs/cgroup/${c}${root}/pod1/${f}`, 'utf8');
    assert.equal((await read('cpu', 'cpu.shares')).trim(), '512');
    assert.equal((await read('cpu', 'cpu.cfs_quota_us')).trim(), '50000');
    assert.equal((await read('memory', 'memory.limit_in_bytes')).trim(), String(64 * 1024 * 1024));
    assert.equal((await read('pids', 'pids.max')).trim(), '42');
    // A new cpuset cgroup got the parent's cpus and mems, or nothing could run in it.
    assert.notEqual((await read('cpuset', 'cpuset.cpus')).trim(), '');
    assert.notEqual((await read('cpuset', 'cpuset.mems')).trim(), '');
    await real.update(`${root}/pod1`, {});
    assert.equal((await read('pids', 'pids.max')).trim(), 'max');
  },
);

test(
  'v1: destroy also removes the directories runc made in the systemd and unified hierarchies',
  { skip: version !== 'v1' },
  async () => {
    await real.ensure(`${root}/pod3`, {});
    const others = ['systemd', 'unified'].filter((h) => existsSync(`/sys/fs/cgroup/${h}`));
    // As runc does for a container of the pod: the parent directories in every hierarchy.
    for (const h of others) await mkdir(`/sys/fs/cgroup/${h}${root}/pod3/ctr`, { recursive: true });
    await real.destroy(`${root}/pod3`);
    for (const h of ['memory', ...others])
      assert.equal(existsSync(`/sys/fs/cgroup/${h}${root}/pod3`), false, h);
  },
);

test(
  'v2: controllers enabled down the tree and limits in cpu.max, cpu.weight, memory.max, pids.max',
  { skip: version !== 'v2' },
  async () => {
    await real.ensure(`${root}/pod2`, {
      cpuShares: 1024,
      cpuQuota: 50_000,
      cpuPeriod: 100_000,
      memoryLimit: 64 * 1024 * 1024,
      pidsLimit: 42,
    });
    const read = (f: string) => readFile(`/sys/fs/cgroup${root}/${f}`, 'utf8');
    for (const c of ['cpu', 'memory', 'pids'])
      assert.ok((await read('cgroup.subtree_control')).split(/\s+/).includes(c), c);
    assert.equal((await read('pod2/cpu.max')).trim(), '50000 100000');
    assert.equal((await read('pod2/cpu.weight')).trim(), '39');
    assert.equal((await read('pod2/memory.max')).trim(), String(64 * 1024 * 1024));
    assert.equal((await read('pod2/pids.max')).trim(), '42');
    await real.update(`${root}/pod2`, { cpuQuota: -1 });
    assert.equal((await read('pod2/cpu.max')).trim(), 'max 100000');
    assert.equal((await read('pod2/memory.max')).trim(), 'max');
    assert.equal((await read('pod2/pids.max')).trim(), 'max');
  },
);

test('cpu.shares to cpu.weight as upstream converts them', () => {
  assert.equal(sharesToWeight(2), 1);
  assert.equal(sharesToWeight(1024), 39);
  assert.equal(sharesToWeight(262144), 10000);
});
