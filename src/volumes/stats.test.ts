import assert from 'node:assert/strict';
import { link, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { PersistentVolumeClaim, Pod, Volume } from 'kubernetes-types/core/v1.js';
import {
  FAKE_DRIVER_DEFAULTS,
  FakeCsiDriver,
  FakeCsiDriverRegistry,
  FakeCsiNodeClient,
} from '../csi/fake.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { inNamespace, PERSISTENTVOLUMECLAIMS } from '../kube/types.ts';
import { diskUsage } from '../stats/disk-usage.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { saveVolData } from './csi/vol-data.ts';
import { VolumeStatsCollector, type VolumeStatsCollectorOptions } from './stats.ts';

const DRIVER = 'stats.csi.berth.test';
const PERIOD = 60_000;

function pod(uid: string, volumes: Volume[], name = `p-${uid}`): Pod {
  return {
    metadata: { name, namespace: 'ns', uid },
    spec: { containers: [{ name: 'c' }], volumes },
  };
}

/** Polls until `fn` returns something (real filesystem work finishes on its own time). */
async function until<T>(what: string, fn: () => T | undefined): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const v = fn();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('VolumeStatsCollector', () => {
  let root: string;
  let clock: FakeClock;
  let kube: FakeKubeClient;
  let registry: FakeCsiDriverRegistry;
  let driver: FakeCsiDriver;
  let logger: MemoryLogger;
  let pods: Pod[];
  let ac: AbortController;
  const collected: string[] = [];

  const collector = (o: Partial<VolumeStatsCollectorOptions> = {}): VolumeStatsCollector =>
    new VolumeStatsCollector({
      rootDir: root,
      periodMs: PERIOD,
      pods: () => pods,
      kube,
      csi: registry,
      clock,
      logger,
      timeoutMs: 5_000,
      recorder: {
        collected: (source) => {
          collected.push(source);
        },
      },
      ...o,
    });
  const volDir = (uid: string, plugin: string, name: string): string =>
    path.join(root, 'pods', uid, 'volumes', plugin, name);
  async function csiVolume(uid: string, dirName: string, handle: string): Promise<string> {
    const dir = volDir(uid, 'kubernetes.io~csi', dirName);
    await mkdir(path.join(dir, 'mount'), { recursive: true });
    await saveVolData(dir, { specVolID: dirName, volumeHandle: handle, driverName: DRIVER });
    return dir;
  }
  async function claim(name: string, pv: string): Promise<void> {
    await kube.create<PersistentVolumeClaim>(inNamespace(PERSISTENTVOLUMECLAIMS, 'ns'), {
      metadata: { name, namespace: 'ns' },
      spec: { volumeName: pv },
      status: { phase: 'Bound' },
    });
  }
  const warnings = (): string[] =>
    logger.records.filter((r) => r.level === 'warn').map((r) => r.msg);

  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'berth-volstats-'));
    clock = new FakeClock();
    kube = new FakeKubeClient({ clock });
    driver = new FakeCsiDriver();
    registry = new FakeCsiDriverRegistry();
    registry.add(new FakeCsiNodeClient(DRIVER, driver, { clock }));
    logger = new MemoryLogger();
    pods = [];
    ac = new AbortController();
    collected.length = 0;
  });

  afterEach(async () => {
    ac.abort();
    await rm(root, { recursive: true, force: true });
  });

  it('measures emptyDir and content volumes with du and statfs, split as upstream', async () => {
    pods = [
      pod('u1', [
        { name: 'scratch', emptyDir: {} },
        { name: 'ram', emptyDir: { medium: 'Memory' } },
        { name: 'cfg', configMap: { name: 'cm' } },
        { name: 'sec', secret: { secretName: 's' } },
      ]),
    ];
    const scratch = volDir('u1', 'kubernetes.io~empty-dir', 'scratch');
    await mkdir(path.join(scratch, 'sub'), { recursive: true });
    await writeFile(path.join(scratch, 'sub', 'f'), Buffer.alloc(64 * 1024, 1));
    await mkdir(volDir('u1', 'kubernetes.io~empty-dir', 'ram'), { recursive: true });
    await mkdir(volDir('u1', 'kubernetes.io~configmap', 'cfg'), { recursive: true });
    await mkdir(volDir('u1', 'kubernetes.io~secret', 'sec'), { recursive: true });
    // A directory no volume of the pod names is not reported.
    await mkdir(volDir('u1', 'kubernetes.io~empty-dir', 'leftover'), { recursive: true });
    const c = collector();
    assert.equal(c.podStats('u1'), undefined);
    c.round(ac.signal);
    await c.settled();
    const s = c.podStats('u1');
    assert.ok(s);
    assert.deepEqual(
      s.ephemeral.map((v) => v.name),
      ['cfg', 'scratch'],
    );
    assert.deepEqual(
      s.persistent.map((v) => v.name),
      ['ram', 'sec'],
    );
    const v = s.ephemeral.find((x) => x.name === 'scratch');
    assert.ok(v);
    assert.ok((v.usedBytes ?? 0) >= 64 * 1024, `usedBytes ${String(v.usedBytes)}`);
    assert.equal(v.inodesUsed, 3); // the volume dir, sub/ and f
    assert.ok((v.capacityBytes ?? 0) > 0 && (v.inodes ?? 0) > 0);
    assert.ok((v.availableBytes ?? -1) >= 0 && (v.inodesFree ?? -1) >= 0);
    assert.equal(v.time, new Date(clock.now()).toISOString());
    assert.equal(v.pvcRef, undefined);
    assert.deepEqual(collected, ['du', 'du', 'du', 'du']);
  });

  it('measures each period on the clock; content volumes only once, emptyDirs again', async () => {
    pods = [
      pod('u1', [
        { name: 'scratch', emptyDir: {} },
        { name: 'cfg', configMap: { name: 'cm' } },
      ]),
    ];
    const scratch = volDir('u1', 'kubernetes.io~empty-dir', 'scratch');
    const cfg = volDir('u1', 'kubernetes.io~configmap', 'cfg');
    await mkdir(scratch, { recursive: true });
    await mkdir(cfg, { recursive: true });
    const c = collector();
    const running = c.run(ac.signal);
    const first = await until('the first measurement', () => c.podStats('u1'));
    const used = (name: string, s = c.podStats('u1')): number | undefined =>
      s?.ephemeral.find((v) => v.name === name)?.usedBytes;
    const before = { scratch: used('scratch', first), cfg: used('cfg', first) };
    await writeFile(path.join(scratch, 'big'), Buffer.alloc(256 * 1024, 1));
    await writeFile(path.join(cfg, 'big'), Buffer.alloc(256 * 1024, 1));
    await clock.advance(PERIOD - 1);
    await c.settled();
    assert.equal(used('scratch'), before.scratch, 'not measured again before the period');
    await clock.advance(1);
    await until('the second measurement', () =>
      used('scratch') !== before.scratch ? true : undefined,
    );
    assert.ok((used('scratch') ?? 0) >= (before.scratch ?? 0) + 256 * 1024);
    assert.equal(used('cfg'), before.cfg, 'a configMap is measured once (NewCachedMetrics)');
    ac.abort();
    await running;
  });

  it('reports a claim on a CSI driver through NodeGetVolumeStats, claims read once a period', async () => {
    pods = [
      pod('u1', [
        { name: 'data', persistentVolumeClaim: { claimName: 'claim-a' } },
        { name: 'gen', ephemeral: { volumeClaimTemplate: { spec: {} } } },
      ]),
    ];
    await claim('claim-a', 'pv-a');
    await claim('p-u1-gen', 'pv-gen');
    const dir = await csiVolume('u1', 'pv-a', 'handle-a');
    await csiVolume('u1', 'pv-gen', 'handle-gen');
    const c = collector();
    c.round(ac.signal);
    await c.settled();
    const s = c.podStats('u1');
    assert.deepEqual(s?.ephemeral, []);
    assert.deepEqual(s.persistent, [
      {
        name: 'data',
        pvcRef: { name: 'claim-a', namespace: 'ns' },
        time: new Date(clock.now()).toISOString(),
        availableBytes: 900,
        capacityBytes: 1000,
        usedBytes: 100,
        inodesFree: 90,
        inodes: 100,
        inodesUsed: 10,
      },
      {
        name: 'gen',
        pvcRef: { name: 'p-u1-gen', namespace: 'ns' },
        time: new Date(clock.now()).toISOString(),
        availableBytes: 900,
        capacityBytes: 1000,
        usedBytes: 100,
        inodesFree: 90,
        inodes: 100,
        inodesUsed: 10,
      },
    ]);
    const calls = driver.callsOf('NodeGetVolumeStats');
    assert.deepEqual(calls.map((x) => [x.volumeId, x.path]).sort(), [
      ['handle-a', path.join(dir, 'mount')],
      ['handle-gen', path.join(path.dirname(dir), 'pv-gen', 'mount')],
    ]);
    assert.deepEqual(collected, [DRIVER, DRIVER]);
    const gets = (): number =>
      kube.calls.filter((x) => x.verb === 'get' && x.resource === 'persistentvolumeclaims').length;
    const afterFirst = gets();
    await clock.advance(PERIOD / 2);
    c.round(ac.signal);
    await c.settled();
    assert.equal(gets(), afterFirst, 'the claims are cached within the period');
    await clock.advance(PERIOD / 2);
    c.round(ac.signal);
    await c.settled();
    assert.ok(gets() > afterFirst, 'and read again after it');
  });

  it('reports nothing for a CSI driver without GET_VOLUME_STATS (upstream: NotSupported)', async () => {
    driver.state = {
      ...FAKE_DRIVER_DEFAULTS,
      capabilities: { ...FAKE_DRIVER_DEFAULTS.capabilities, getVolumeStats: false },
    };
    pods = [pod('u1', [{ name: 'inline', csi: { driver: DRIVER } }])];
    await csiVolume('u1', 'inline', 'csi-inline');
    const c = collector();
    c.round(ac.signal);
    await c.settled();
    assert.deepEqual(c.podStats('u1'), { ephemeral: [], persistent: [] });
    assert.equal(driver.callsOf('NodeGetVolumeStats').length, 0);
    assert.deepEqual(warnings(), []);
  });

  it('an inline CSI volume has no pvcRef; a local PV is measured with statfs', async () => {
    pods = [
      pod('u1', [
        { name: 'inline', csi: { driver: DRIVER } },
        { name: 'local', persistentVolumeClaim: { claimName: 'claim-l' } },
      ]),
    ];
    await claim('claim-l', 'pv-local');
    await csiVolume('u1', 'inline', 'csi-inline');
    await mkdir(volDir('u1', 'kubernetes.io~local-volume', 'pv-local'), { recursive: true });
    const c = collector();
    c.round(ac.signal);
    await c.settled();
    const s = c.podStats('u1');
    const inline = s?.persistent.find((v) => v.name === 'inline');
    assert.equal(inline?.usedBytes, 100);
    assert.equal(inline.pvcRef, undefined);
    const local = s?.persistent.find((v) => v.name === 'local');
    assert.deepEqual(local?.pvcRef, { name: 'claim-l', namespace: 'ns' });
    assert.ok((local.capacityBytes ?? 0) > 0 && (local.usedBytes ?? 0) > 0);
    assert.ok(collected.includes('statfs'));
  });

  it('a hanging driver hits its deadline without holding up other pods', async () => {
    pods = [
      pod('slow', [{ name: 'data', persistentVolumeClaim: { claimName: 'claim-a' } }]),
      pod('fast', [{ name: 'scratch', emptyDir: {} }]),
    ];
    await claim('claim-a', 'pv-a');
    await csiVolume('slow', 'pv-a', 'handle-a');
    await mkdir(volDir('fast', 'kubernetes.io~empty-dir', 'scratch'), { recursive: true });
    driver.hangNext('NodeGetVolumeStats');
    const c = collector();
    c.round(ac.signal);
    await until('the fast pod', () => c.podStats('fast'));
    assert.equal(c.podStats('slow'), undefined);
    // The next round skips the pod still being measured, and measures the others.
    c.round(ac.signal);
    assert.ok(logger.records.some((r) => r.msg.includes('still being measured')));
    await until('the hanging call', () => (clock.pending > 0 ? true : undefined));
    await clock.advance(5_000);
    await c.settled();
    const warn = logger.records.find((r) => r.level === 'warn');
    assert.equal(warn?.msg, 'Failed to calculate volume metrics');
    assert.match(String(warn.fields['error']), /within 5s: the deadline passed/);
    assert.equal(warn.fields['pod'], 'ns/p-slow');
    assert.deepEqual(c.podStats('slow'), { ephemeral: [], persistent: [] });
    // Recovered: measured again next round, and said so once.
    c.round(ac.signal);
    await c.settled();
    assert.equal(c.podStats('slow')?.persistent[0]?.usedBytes, 100);
    assert.ok(logger.records.some((r) => r.msg === 'Volume stats available again'));
  });

  it('logs an unregistered driver once over rounds, and forgets pods that are gone', async () => {
    pods = [pod('u1', [{ name: 'inline', csi: { driver: 'other.csi' } }])];
    const dir = volDir('u1', 'kubernetes.io~csi', 'inline');
    await mkdir(path.join(dir, 'mount'), { recursive: true });
    await saveVolData(dir, { volumeHandle: 'h', driverName: 'other.csi' });
    const c = collector();
    for (let i = 0; i < 3; i++) {
      c.round(ac.signal);
      await c.settled();
    }
    assert.deepEqual(warnings(), ['Failed to calculate volume metrics']);
    assert.match(
      String(logger.records.find((r) => r.level === 'warn')?.fields['error']),
      /driver name other.csi not found in the list of registered CSI drivers/,
    );
    assert.ok(c.podStats('u1'));
    pods = [];
    c.round(ac.signal);
    assert.equal(c.podStats('u1'), undefined);
    assert.deepEqual([...c.all()], []);
  });

  it('a broken vol_data.json leaves out that volume only; an unlistable pod is logged once', async () => {
    pods = [
      pod('u1', [
        { name: 'inline', csi: { driver: DRIVER } },
        { name: 'scratch', emptyDir: {} },
      ]),
      pod('u2', [{ name: 'scratch', emptyDir: {} }]),
    ];
    const dir = volDir('u1', 'kubernetes.io~csi', 'inline');
    await mkdir(path.join(dir, 'mount'), { recursive: true });
    await writeFile(path.join(dir, 'vol_data.json'), '{not json');
    await mkdir(volDir('u1', 'kubernetes.io~empty-dir', 'scratch'), { recursive: true });
    // u2's volumes directory is a file: the pod's volumes cannot be listed.
    await mkdir(path.join(root, 'pods', 'u2'), { recursive: true });
    await writeFile(path.join(root, 'pods', 'u2', 'volumes'), '');
    const c = collector();
    for (let i = 0; i < 2; i++) {
      c.round(ac.signal);
      await c.settled();
    }
    assert.deepEqual(
      c.podStats('u1')?.ephemeral.map((v) => v.name),
      ['scratch'],
    );
    assert.deepEqual(c.podStats('u1')?.persistent, []);
    assert.equal(c.podStats('u2'), undefined);
    assert.deepEqual(warnings(), ['Cannot list the volumes of the pod']);
  });

  it('a pod without volume directories has no stats; a zero period turns collection off', async () => {
    pods = [pod('u1', [{ name: 'scratch', emptyDir: {} }])];
    const c = collector();
    c.round(ac.signal);
    await c.settled();
    assert.equal(c.podStats('u1'), undefined);
    const off = collector({ periodMs: 0 });
    await off.run(ac.signal);
    assert.ok(logger.records.some((r) => r.msg === 'Volume stats collection disabled'));
  });
});

describe('diskUsage', () => {
  it('counts hard links once and every inode under the directory', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'berth-du-'));
    try {
      await writeFile(path.join(dir, 'a'), Buffer.alloc(40 * 1024, 1));
      await link(path.join(dir, 'a'), path.join(dir, 'b'));
      await mkdir(path.join(dir, 'd'));
      const u = await diskUsage(dir, new AbortController().signal);
      assert.equal(u.inodes, 3);
      assert.ok(u.bytes >= 40 * 1024 && u.bytes < 80 * 1024, `bytes ${u.bytes}`);
      const aborted = AbortSignal.abort();
      await assert.rejects(diskUsage(dir, aborted));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
