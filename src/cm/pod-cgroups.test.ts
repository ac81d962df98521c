import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryLogger } from '../util/logger.ts';
import { FakeCgroupManager } from './fake.ts';
import { FakeSystemdBus } from './fake-systemd.ts';
import { SystemdCgroupManager } from './systemd.ts';
import { PodCgroups, podResources, toSystemdName } from './pod-cgroups.ts';

function pod(uid: string, containers: Partial<Container>[]): Pod {
  return {
    metadata: { name: uid, namespace: 'ns', uid },
    spec: { containers: containers.map((c, i) => ({ name: `c${i}`, image: 'x', ...c })) },
  };
}
const guaranteed = pod('g', [
  { resources: { limits: { cpu: '500m', memory: '64Mi' } } },
  { resources: { limits: { cpu: '250m', memory: '32Mi' } } },
]);
const burstable = pod('b', [
  { resources: { requests: { cpu: '100m' }, limits: { memory: '128Mi' } } },
  { resources: { requests: { cpu: '300m' } } },
]);
const bestEffort = pod('e', [{}]);

function setup(driver: 'cgroupfs' | 'systemd' = 'cgroupfs') {
  const cgroups = new FakeCgroupManager();
  const pc = new PodCgroups({
    cgroups,
    cgroupRoot: '/berth-x',
    driver: () => driver,
    podPidsLimit: 1024,
    logger: new MemoryLogger(),
  });
  return { cgroups, pc };
}

describe('podResources (upstream ResourceConfigForPod)', () => {
  test('Guaranteed: shares, quota and memory from the summed limits', () => {
    assert.deepEqual(podResources(guaranteed, 0), {
      cpuShares: 768,
      cpuPeriod: 100_000,
      cpuQuota: 75_000,
      memoryLimit: 96 * 1024 * 1024,
    });
  });
  test('Burstable: shares from requests; a limit only when every container has one', () => {
    assert.deepEqual(podResources(burstable, 0), {
      cpuShares: 409,
      cpuPeriod: 100_000,
      cpuQuota: -1,
    });
  });
  test('BestEffort: the minimum shares and the pod pids limit', () => {
    assert.deepEqual(podResources(bestEffort, 100), { cpuShares: 2, pidsLimit: 100 });
  });
});

describe('PodCgroups', () => {
  test('start builds kubepods with the allocatable and the two QoS tiers', async () => {
    const { cgroups, pc } = setup();
    await pc.start({ cpuMilli: 2000, memoryBytes: 1 << 30 });
    assert.deepEqual(cgroups.groups.get('/berth-x/kubepods'), {
      cpuShares: 2048,
      memoryLimit: 1 << 30,
    });
    assert.deepEqual(cgroups.groups.get('/berth-x/kubepods/besteffort'), { cpuShares: 2 });
    assert.ok(cgroups.groups.has('/berth-x/kubepods/burstable'));
  });

  test('each pod gets its cgroup under its tier; Burstable shares follow the pods', async () => {
    const { cgroups, pc } = setup();
    await pc.start({ cpuMilli: 2000 });
    for (const p of [guaranteed, burstable, bestEffort]) await pc.ensurePod(p);
    assert.equal(pc.cgroupParent(guaranteed), '/berth-x/kubepods/podg');
    assert.equal(pc.cgroupParent(burstable), '/berth-x/kubepods/burstable/podb');
    assert.equal(pc.cgroupParent(bestEffort), '/berth-x/kubepods/besteffort/pode');
    assert.equal(cgroups.groups.get('/berth-x/kubepods/podg')?.memoryLimit, 96 * 1024 * 1024);
    assert.equal(cgroups.groups.get('/berth-x/kubepods/besteffort/pode')?.pidsLimit, 1024);
    await pc.updateQos([guaranteed, burstable, bestEffort]);
    assert.equal(cgroups.groups.get('/berth-x/kubepods/burstable')?.cpuShares, 409);
  });

  test('a pod cgroup with processes stays; empty ones and orphans go', async () => {
    const { cgroups, pc } = setup();
    await pc.start({ cpuMilli: 2000 });
    await pc.ensurePod(burstable);
    await pc.ensurePod(bestEffort);
    cgroups.procs.set('/berth-x/kubepods/burstable/podb/ctr', [123]);
    assert.equal(await pc.destroyPod('b'), false);
    assert.ok(cgroups.groups.has('/berth-x/kubepods/burstable/podb'));
    assert.deepEqual(await pc.cleanupOrphans(new Set()), ['e']);
    cgroups.procs.clear();
    assert.equal(await pc.destroyPod('b'), true);
    assert.equal(cgroups.groups.has('/berth-x/kubepods/burstable/podb'), false);
  });

  test('with systemd and no systemd manager the slices are only named, never created', async () => {
    const { cgroups, pc } = setup('systemd');
    await pc.start({ cpuMilli: 2000 });
    await pc.ensurePod(burstable);
    assert.equal(cgroups.groups.size, 0);
    assert.equal(
      pc.cgroupParent(burstable),
      '/berth_x.slice/berth_x-kubepods.slice/berth_x-kubepods-burstable.slice/berth_x-kubepods-burstable-podb.slice',
    );
    assert.equal(
      toSystemdName('/kubepods/burstable/pod12-34'),
      '/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34.slice',
    );
  });

  test('with systemd and a systemd manager berth makes, limits and stops the slices', async (t) => {
    const root = await mkdtemp(join(tmpdir(), 'berth-podslices-'));
    t.after(() => rm(root, { recursive: true, force: true }));
    const bus = new FakeSystemdBus({ mountRoot: root });
    const cgroups = new FakeCgroupManager();
    const pc = new PodCgroups({
      cgroups,
      systemdCgroups: new SystemdCgroupManager({ version: 'v2', bus, mountRoot: root }),
      cgroupRoot: '/',
      driver: () => 'systemd',
      podPidsLimit: 1024,
      logger: new MemoryLogger(),
    });
    const uid = '12-34';
    const g = { ...guaranteed, metadata: { ...guaranteed.metadata, uid } };
    await pc.start({ cpuMilli: 2000, memoryBytes: 1 << 30 });
    await pc.ensurePod(g);
    assert.equal(cgroups.groups.size, 0);
    assert.deepEqual(
      bus.calls.filter((c) => c.method === 'startTransientUnit').map((c) => c.unit),
      [
        'kubepods.slice',
        'kubepods-burstable.slice',
        'kubepods-besteffort.slice',
        'kubepods-pod12_34.slice',
      ],
    );
    assert.equal(pc.cgroupParent(g), '/kubepods.slice/kubepods-pod12_34.slice');
    const dir = join(root, 'kubepods.slice/kubepods-pod12_34.slice');
    assert.equal((await readFile(join(dir, 'cpu.max'), 'utf8')).trim(), '75000 100000');
    assert.equal((await readFile(join(dir, 'memory.max'), 'utf8')).trim(), String(96 << 20));
    assert.equal((await readFile(join(dir, 'pids.max'), 'utf8')).trim(), '1024');
    assert.equal(
      (await readFile(join(root, 'kubepods.slice/memory.max'), 'utf8')).trim(),
      String(1 << 30),
    );
    assert.deepEqual(await pc.cleanupOrphans(new Set([uid])), []);
    assert.equal(await pc.destroyPod(uid), true);
    assert.equal(bus.units.has('kubepods-pod12_34.slice'), false);
    assert.ok(
      bus.calls.some((c) => c.method === 'stopUnit' && c.unit === 'kubepods-pod12_34.slice'),
    );
  });
});
