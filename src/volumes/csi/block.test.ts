import { execFileSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readdir, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { PersistentVolume, PersistentVolumeClaim, Pod } from 'kubernetes-types/core/v1.js';
import type { CSIDriver } from 'kubernetes-types/storage/v1.js';
import { FakeCsiDriver, FakeCsiDriverRegistry, FakeCsiNodeClient } from '../../csi/fake.ts';
import type { CsiPublishRequest } from '../../csi/types.ts';
import { FakeKubeClient } from '../../kube/fake-client.ts';
import {
  CSIDRIVERS,
  inNamespace,
  PERSISTENTVOLUMECLAIMS,
  PERSISTENTVOLUMES,
} from '../../kube/types.ts';
import { FakeClock } from '../../util/clock.ts';
import { MemoryLogger } from '../../util/logger.ts';
import { containerDevices } from '../devices.ts';
import { HostVolumeManager } from '../manager.ts';
import { FakeMounter } from '../mounter.ts';
import type { ResolvedPayload } from '../types.ts';
import { FakeLoopDevices } from './loop.ts';
import { uniqueVolumeName } from './paths.ts';
import { CsiVolumePlugin } from './plugin.ts';

const DRIVER = 'block.csi.berth.test';
const HANDLE = 'vol-b';
const signal = new AbortController().signal;
/** The driver's side needs a real device node at the publish path: mknod(1), as root. */
const notRoot = process.getuid?.() !== 0;

/** A driver that makes the publish target a block device node (or what the test says). */
class DeviceMakingClient extends FakeCsiNodeClient {
  leave: 'device' | 'dir' = 'device';
  override async nodePublishVolume(req: CsiPublishRequest, s: AbortSignal): Promise<void> {
    await super.nodePublishVolume(req, s);
    if (this.leave === 'dir') await mkdir(req.targetPath, { recursive: true });
    // 7,200: a loop device number no test machine is likely to use; never opened here.
    else execFileSync('mknod', [req.targetPath, 'b', '7', '200']);
  }
  override async nodeUnpublishVolume(id: string, target: string, s: AbortSignal): Promise<void> {
    await super.nodeUnpublishVolume(id, target, s);
    await rm(target, { recursive: true, force: true });
  }
}

function blockPod(uid: string, readOnly = false): Pod {
  return {
    metadata: { name: `p-${uid}`, namespace: 'ns', uid },
    spec: {
      containers: [{ name: 'c', volumeDevices: [{ name: 'v', devicePath: '/dev/xvda' }] }],
      volumes: [{ name: 'v', persistentVolumeClaim: { claimName: 'data', readOnly } }],
    },
  };
}

async function exists(p: string): Promise<boolean> {
  return lstat(p).then(
    () => true,
    () => false,
  );
}

describe('CSI block volumes through the volume manager', { skip: notRoot }, () => {
  let root = '';
  let kube: FakeKubeClient;
  let driver: FakeCsiDriver;
  let client: DeviceMakingClient;
  let mounter: FakeMounter;
  let loops: FakeLoopDevices;

  function manager(): HostVolumeManager {
    const logger = new MemoryLogger();
    const clock = new FakeClock(1_000_000);
    const registry = new FakeCsiDriverRegistry();
    registry.add(client);
    const csi = new CsiVolumePlugin({
      rootDir: root,
      nodeName: 'node-a',
      registry,
      kube,
      mounter,
      logger,
      clock,
      loops,
    });
    return new HostVolumeManager({
      rootDir: root,
      mounter,
      logger,
      clock,
      kube,
      csi,
      sources: { payload: (): Promise<ResolvedPayload | undefined> => Promise.resolve(undefined) },
    });
  }

  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'berth-csi-block-'));
    const clock = new FakeClock(1_000_000);
    kube = new FakeKubeClient({ clock });
    driver = new FakeCsiDriver();
    client = new DeviceMakingClient(DRIVER, driver, { clock });
    mounter = new FakeMounter();
    loops = new FakeLoopDevices();
    const claim = await kube.create<PersistentVolumeClaim>(
      inNamespace(PERSISTENTVOLUMECLAIMS, 'ns'),
      {
        metadata: { name: 'data', namespace: 'ns' },
        spec: { volumeName: 'pv-b', volumeMode: 'Block' },
        status: { phase: 'Bound' },
      },
    );
    await kube.create<PersistentVolume>(PERSISTENTVOLUMES, {
      metadata: { name: 'pv-b' },
      spec: {
        accessModes: ['ReadWriteOnce'],
        volumeMode: 'Block',
        claimRef: { name: 'data', namespace: 'ns', uid: claim.metadata?.uid ?? '' },
        csi: { driver: DRIVER, volumeHandle: HANDLE },
      },
    });
    await kube.create<CSIDriver>(CSIDRIVERS, {
      metadata: { name: DRIVER },
      spec: { attachRequired: false },
    });
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("stages and publishes with the block access type in upstream's layout, maps the device for the container", async () => {
    const m = manager();
    const pod = blockPod('u1');
    const vols = await m.setUpPod(pod, signal);
    const devs = path.join(root, 'plugins/kubernetes.io/csi/volumeDevices');
    const publish = path.join(devs, 'publish/pv-b/u1');
    const link = path.join(root, 'pods/u1/volumeDevices/kubernetes.io~csi/pv-b');
    const mv = vols.byName.get('v');
    assert.equal(mv?.block, true);
    assert.equal(mv.hostPath, link);
    const stage = driver.callsOf('NodeStageVolume')[0];
    assert.equal(stage?.path, path.join(devs, 'staging/pv-b'));
    assert.equal(stage.accessType, 'block');
    const pub = driver.callsOf('NodePublishVolume')[0];
    assert.equal(pub?.path, publish);
    assert.equal(pub.accessType, 'block');
    assert.equal(await readlink(link), publish);
    const mapFile = path.join(devs, 'pv-b/dev/u1');
    assert.deepEqual(
      mounter.mounts.map((x) => [x.source, x.target]),
      [[publish, mapFile]],
    );
    assert.ok(loops.devices.has(mapFile), 'a loop device holds the device open');
    assert.ok(await exists(path.join(devs, 'pv-b/data/vol_data.json')));
    assert.deepEqual(m.volumesInUse(), [uniqueVolumeName(DRIVER, HANDLE)]);
    const container = pod.spec?.containers[0];
    assert.ok(container !== undefined);
    assert.deepEqual(
      containerDevices(container, vols).map((d) => [d.containerPath, d.hostPath, d.permissions]),
      [['/dev/xvda', link, 'mrw']],
    );
    // A second sync leaves it as it is.
    await m.setUpPod(pod, signal);
    assert.equal(driver.callsOf('NodePublishVolume').length, 1);
  });

  it('unmaps each pod in reverse and unstages after the last one, leaving nothing behind', async () => {
    const m = manager();
    await m.setUpPod(blockPod('u1'), signal);
    await m.setUpPod(blockPod('u2'), signal);
    assert.equal(driver.callsOf('NodeStageVolume').length, 1);
    await m.tearDownPod('u1', signal);
    assert.deepEqual(
      driver.callsOf('NodeUnpublishVolume').map((c) => path.basename(c.path ?? '')),
      ['u1'],
    );
    assert.equal(driver.callsOf('NodeUnstageVolume').length, 0);
    assert.equal(loops.devices.size, 1);
    await m.tearDownPod('u2', signal);
    assert.equal(driver.callsOf('NodeUnstageVolume').length, 1);
    assert.equal(loops.devices.size, 0);
    assert.deepEqual(mounter.mounts, []);
    assert.deepEqual(m.volumesInUse(), []);
    const devs = path.join(root, 'plugins/kubernetes.io/csi/volumeDevices');
    assert.deepEqual((await readdir(devs)).sort(), ['publish', 'staging']);
    assert.deepEqual(await readdir(path.join(devs, 'publish')), []);
    assert.deepEqual(await readdir(path.join(devs, 'staging')), []);
    assert.equal(await exists(path.join(root, 'pods/u2')), false);
  });

  it('refuses a publish target that is not a block device, and the teardown still unpublishes it', async () => {
    client.leave = 'dir';
    const m = manager();
    await assert.rejects(
      m.setUpPod(blockPod('u1'), signal),
      /MapVolume\.MapPodDevice failed for volume "pv-b" : kubernetes\.io\/csi: driver block\.csi\.berth\.test left .*publish\/pv-b\/u1 as something other than a block device; refusing to use it/,
    );
    assert.deepEqual(mounter.mounts, []);
    assert.equal(loops.devices.size, 0);
    // Never mapped, so the pod has no symlink: its tear-down still finds what the driver made.
    const cleaned = await m.cleanupOrphans(new Set(), signal);
    assert.deepEqual(cleaned, ['u1']);
    assert.equal(driver.callsOf('NodeUnpublishVolume').length, 1);
    assert.equal(driver.callsOf('NodeUnstageVolume').length, 1);
  });

  it('a restarted berth unmaps and unstages from disk alone (pod deleted while it was down)', async () => {
    await manager().setUpPod(blockPod('u1'), signal);
    const fresh = manager();
    await fresh.cleanupOrphans(new Set(), signal);
    assert.equal(driver.callsOf('NodeUnpublishVolume').length, 1);
    assert.equal(driver.callsOf('NodeUnstageVolume').length, 1);
    assert.equal(loops.devices.size, 0);
    assert.deepEqual(mounter.mounts, []);
  });

  it('read-only claims give the container a read-only device', async () => {
    const pod = blockPod('u1', true);
    const vols = await manager().setUpPod(pod, signal);
    const container = pod.spec?.containers[0];
    assert.ok(container !== undefined);
    assert.equal(containerDevices(container, vols)[0]?.permissions, 'r');
    assert.equal(driver.callsOf('NodePublishVolume')[0]?.readonly, true);
  });
});

describe('containerDevices', () => {
  it("refuses a device whose volume is not a block volume, with upstream's message", () => {
    assert.throws(
      () =>
        containerDevices(
          { name: 'c', volumeDevices: [{ name: 'v', devicePath: '/dev/x' }] },
          { byName: new Map([['v', { name: 'v', hostPath: '/x', readOnly: false, plugin: 'p' }]]) },
        ),
      /cannot find volume "v" to pass into container "c"/,
    );
    assert.throws(
      () =>
        containerDevices(
          { name: 'c', volumeDevices: [{ name: 'v', devicePath: 'dev/x' }] },
          { byName: new Map() },
        ),
      /error DevicePath `dev\/x` must be an absolute path/,
    );
  });
});
