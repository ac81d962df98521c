import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { cgroupManagerContract } from './contract.ts';
import { FakeSystemdBus } from './fake-systemd.ts';
import {
  cpuQuotaPerSec,
  resourceProperties,
  sliceUnit,
  systemdPath,
  SystemdCgroupManager,
} from './systemd.ts';
import { DbusSystemd, parseSystemdVersion } from './systemd-dbus.ts';
import { detectCgroupVersion } from './cgroupfs.ts';
import { systemClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function fakeSystemd(
  version: 'v1' | 'v2' = 'v2',
): Promise<{ bus: FakeSystemdBus; cg: SystemdCgroupManager; root: string }> {
  const root = await mkdtemp(join(tmpdir(), 'berth-systemd-'));
  dirs.push(root);
  const bus = new FakeSystemdBus({ mountRoot: root });
  return { bus, cg: new SystemdCgroupManager({ version, bus, mountRoot: root }), root };
}

const contractSetup = await fakeSystemd();
cgroupManagerContract('systemd over the fake bus (v2)', () => contractSetup.cg);

// Where systemd is PID 1 (sd_booted: /run/systemd/system) and berth may make slices
// (root), the same contract runs against the real systemd: the VM tests run this file
// in a guest (test/vm/cgroup-v2-systemd.test.ts).
const booted = await stat('/run/systemd/system').then(
  () => process.getuid?.() === 0,
  () => false,
);
if (booted) {
  const bus = new DbusSystemd({ clock: systemClock, logger: new MemoryLogger() });
  after(() => {
    bus.close();
  });
  const version = await detectCgroupVersion();
  cgroupManagerContract(`systemd ${version} (this host's systemd)`, () => {
    return new SystemdCgroupManager({ version, bus });
  });
}

describe('systemd slice names', () => {
  test('are upstream ToSystemd with "-" in parts written as "_"', () => {
    const uid = '1234-abcd-5678';
    assert.equal(
      systemdPath(`/kubepods/burstable/pod${uid}`),
      '/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd_5678.slice',
    );
    assert.deepEqual(sliceUnit(`/kubepods/burstable/pod${uid}`), {
      unit: 'kubepods-burstable-pod1234_abcd_5678.slice',
      parent: 'kubepods-burstable.slice',
    });
    assert.deepEqual(sliceUnit('/kubepods'), { unit: 'kubepods.slice', parent: '-.slice' });
    assert.throws(() => systemdPath('/kube_pods'), { code: 'BERTH_CGROUP' });
  });

  test('the systemd version is the leading number', () => {
    assert.equal(parseSystemdVersion('252.39-1~deb12u1'), 252);
    assert.equal(parseSystemdVersion('"v245.4-1.fc32"'), 245);
    assert.equal(parseSystemdVersion('unknown'), -1);
  });
});

describe('systemd unit properties', () => {
  test('the CPU quota is rounded up to 10 ms per second, and the files get the rounded quota', () => {
    assert.deepEqual(cpuQuotaPerSec(50_000, 100_000), { perSecUSec: 500_000n, quota: 50_000 });
    assert.deepEqual(cpuQuotaPerSec(1_500, 100_000), { perSecUSec: 20_000n, quota: 2_000 });
    assert.equal(cpuQuotaPerSec(-1, 100_000).perSecUSec, 2n ** 64n - 1n);
  });

  test('v2 sends CPUWeight/MemoryMax, v1 CPUShares/MemoryLimit; unlimited is infinity', () => {
    const r = { cpuShares: 1024, cpuQuota: 1_500, cpuPeriod: 100_000, pidsLimit: 0 };
    const v2 = resourceProperties('v2', r, 252);
    assert.deepEqual(
      v2.properties.map((p) => [p.name, p.value]),
      [
        ['MemoryMax', 2n ** 64n - 1n],
        ['CPUWeight', 39n],
        ['CPUQuotaPeriodUSec', 100_000n],
        ['CPUQuotaPerSecUSec', 20_000n],
        ['TasksMax', 1n],
      ],
    );
    assert.equal(v2.files.cpuQuota, 2_000);
    const v1 = resourceProperties('v1', { cpuShares: 512, memoryLimit: 1024 }, 241);
    assert.deepEqual(
      v1.properties.map((p) => [p.name, p.value]),
      [
        ['MemoryLimit', 1024n],
        ['CPUShares', 512n],
        ['TasksMax', 2n ** 64n - 1n],
      ],
    );
  });
});

describe('SystemdCgroupManager over the fake bus', () => {
  test('ensure starts the slice with libcontainer properties, then sets the limits', async () => {
    const { bus, cg, root } = await fakeSystemd();
    await cg.ensure('/kubepods/burstable/podaa-bb', {
      cpuShares: 256,
      cpuQuota: 50_000,
      cpuPeriod: 100_000,
      memoryLimit: 1 << 26,
      pidsLimit: 64,
    });
    const start = bus.calls.find((c) => c.method === 'startTransientUnit');
    assert.equal(start?.unit, 'kubepods-burstable-podaa_bb.slice');
    assert.deepEqual(
      start?.properties?.map((p) => [p.name, p.value]),
      [
        ['Description', 'libcontainer container kubepods-burstable-podaa_bb.slice'],
        ['Wants', ['kubepods-burstable.slice']],
        ['MemoryAccounting', true],
        ['CPUAccounting', true],
        ['IOAccounting', true],
        ['TasksAccounting', true],
        ['DefaultDependencies', false],
      ],
    );
    const set = bus.calls.find((c) => c.method === 'setUnitProperties');
    assert.equal(set?.unit, 'kubepods-burstable-podaa_bb.slice');
    const dir = join(
      root,
      'kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podaa_bb.slice',
    );
    assert.equal((await readFile(join(dir, 'cpu.max'), 'utf8')).trim(), '50000 100000');
    assert.equal((await readFile(join(dir, 'cpu.weight'), 'utf8')).trim(), '10');
    assert.equal((await readFile(join(dir, 'memory.max'), 'utf8')).trim(), String(1 << 26));
    assert.equal((await readFile(join(dir, 'pids.max'), 'utf8')).trim(), '64');
    assert.deepEqual(await cg.children('/kubepods/burstable'), ['/kubepods/burstable/podaa-bb']);
  });

  test('an existing slice is kept; a start job that fails is reset and reported', async () => {
    const { bus, cg } = await fakeSystemd();
    await cg.ensure('/kubepods', {});
    await cg.ensure('/kubepods', { cpuShares: 2 });
    bus.nextJobResult('startTransientUnit', 'failed');
    await cg.ensure('/kubepods/besteffort', {});
    assert.deepEqual(
      bus.calls.filter((c) => c.unit === 'kubepods-besteffort.slice').map((c) => c.method),
      ['startTransientUnit', 'resetFailedUnit', 'startTransientUnit', 'setUnitProperties'],
    );
    assert.equal(await cg.exists('/kubepods/besteffort'), true);
    // Both attempts fail: the error is typed, and a failing reset does not hide it.
    bus.nextJobResult('startTransientUnit', 'failed', 'dependency');
    bus.failNext('resetFailedUnit', 'org.freedesktop.systemd1.NoSuchUnit');
    await assert.rejects(cg.ensure('/kubepods/burstable', {}), {
      code: 'BERTH_CGROUP_SYSTEMD_UNIT',
      message: /kubepods-burstable\.slice: its start job ended "dependency"/,
    });
    assert.equal(await cg.exists('/kubepods/burstable'), false);
  });

  test('D-Bus errors reach the caller typed, with the D-Bus name', async () => {
    const { bus, cg } = await fakeSystemd();
    await cg.ensure('/kubepods', {});
    bus.failNext('setUnitProperties', 'org.freedesktop.DBus.Error.AccessDenied');
    await assert.rejects(cg.update('/kubepods', { cpuShares: 2 }), {
      code: 'BERTH_CGROUP_SYSTEMD_BUS',
      dbusError: 'org.freedesktop.DBus.Error.AccessDenied',
    });
  });

  test('destroy stops the slice, slices inside it too, and a missing one is no error', async () => {
    const { bus, cg, root } = await fakeSystemd();
    await cg.ensure('/kubepods/besteffort/podx', {});
    await cg.destroy('/kubepods/besteffort');
    assert.equal(await cg.exists('/kubepods/besteffort/podx'), false);
    assert.equal(bus.units.has('kubepods-besteffort-podx.slice'), false);
    await assert.rejects(stat(join(root, 'kubepods.slice/kubepods-besteffort.slice')));
    await cg.destroy('/kubepods/besteffort');
    assert.equal(await cg.exists('/kubepods'), true);
  });
});
