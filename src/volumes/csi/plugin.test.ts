import { status as GrpcStatus } from '@grpc/grpc-js';
import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readFile, readdir, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type {
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  Volume,
} from 'kubernetes-types/core/v1.js';
import type { CSIDriver, VolumeAttachment } from 'kubernetes-types/storage/v1.js';
import { FakeCsiDriver, FakeCsiDriverRegistry, FakeCsiNodeClient } from '../../csi/fake.ts';
import type { CsiPublishRequest } from '../../csi/types.ts';
import { FakeKubeClient } from '../../kube/fake-client.ts';
import {
  CSIDRIVERS,
  inNamespace,
  NODES,
  PERSISTENTVOLUMECLAIMS,
  PERSISTENTVOLUMES,
  VOLUMEATTACHMENTS,
} from '../../kube/types.ts';
import { FakeClock } from '../../util/clock.ts';
import { MemoryLogger } from '../../util/logger.ts';
import { HostVolumeManager } from '../manager.ts';
import { FakeMounter } from '../mounter.ts';
import { VolumeError, type ResolvedPayload } from '../types.ts';
import { attachmentName, inlineVolumeHandle, stagingPath, uniqueVolumeName } from './paths.ts';
import { CsiVolumePlugin } from './plugin.ts';

const DRIVER = 'mock.csi.berth.test';
const NODE = 'node-a';
const HANDLE = 'vol-1';
const signal = new AbortController().signal;

/** The fake driver, plus what a real driver does on publish: create the target. */
class DirMakingClient extends FakeCsiNodeClient {
  symlinkTo: string | undefined;
  override async nodePublishVolume(req: CsiPublishRequest, s: AbortSignal): Promise<void> {
    await super.nodePublishVolume(req, s);
    if (this.symlinkTo !== undefined) await symlink(this.symlinkTo, req.targetPath);
    else await mkdir(req.targetPath, { recursive: true });
  }
  override async nodeUnpublishVolume(id: string, target: string, s: AbortSignal): Promise<void> {
    await super.nodeUnpublishVolume(id, target, s);
    await rm(target, { recursive: true, force: true });
  }
}

function pvcPod(uid: string, claim = 'data', extra: Partial<Volume> = {}): Pod {
  return {
    metadata: { name: `p-${uid}`, namespace: 'ns', uid },
    spec: {
      containers: [{ name: 'c', volumeMounts: [{ name: 'v', mountPath: '/data' }] }],
      volumes: [{ name: 'v', persistentVolumeClaim: { claimName: claim }, ...extra }],
    },
  };
}

describe('CSI volumes through the volume manager', () => {
  let root = '';
  let kube: FakeKubeClient;
  let driver: FakeCsiDriver;
  let client: DirMakingClient;
  let registry: FakeCsiDriverRegistry;
  let clock: FakeClock;

  function manager(): HostVolumeManager {
    const logger = new MemoryLogger();
    const mounter = new FakeMounter();
    const csi = new CsiVolumePlugin({
      rootDir: root,
      nodeName: NODE,
      registry,
      kube,
      mounter,
      logger,
      clock,
      attachTimeoutMs: 10_000,
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

  const claimUids = new Map<string, string>();
  async function claim(name: string, phase: string, pv = 'pv-1'): Promise<void> {
    const created = await kube.create<PersistentVolumeClaim>(
      inNamespace(PERSISTENTVOLUMECLAIMS, 'ns'),
      {
        metadata: { name, namespace: 'ns', uid: `uid-${name}` },
        spec: { volumeName: pv },
        status: { phase },
      },
    );
    claimUids.set(name, created.metadata?.uid ?? '');
  }

  async function csiPv(name = 'pv-1', claimUid = claimUids.get('data') ?? ''): Promise<void> {
    await kube.create<PersistentVolume>(PERSISTENTVOLUMES, {
      metadata: { name },
      spec: {
        accessModes: ['ReadWriteOnce'],
        claimRef: { name: 'data', namespace: 'ns', uid: claimUid },
        csi: { driver: DRIVER, volumeHandle: HANDLE, fsType: 'ext4', volumeAttributes: { a: 'b' } },
      },
    });
  }

  async function csiDriver(spec: CSIDriver['spec']): Promise<void> {
    await kube.create<CSIDriver>(CSIDRIVERS, { metadata: { name: DRIVER }, spec });
  }

  async function attached(meta: Record<string, string> = { dev: '/dev/x' }): Promise<void> {
    await kube.create<Node>(NODES, {
      metadata: { name: NODE },
      status: { volumesAttached: [{ name: uniqueVolumeName(DRIVER, HANDLE), devicePath: '' }] },
    });
    await kube.create<VolumeAttachment>(VOLUMEATTACHMENTS, {
      metadata: { name: attachmentName(HANDLE, DRIVER, NODE) },
      spec: { attacher: DRIVER, nodeName: NODE, source: { persistentVolumeName: 'pv-1' } },
      status: { attached: true, attachmentMetadata: meta },
    });
  }

  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'berth-csi-'));
    clock = new FakeClock(1_000_000);
    kube = new FakeKubeClient({ clock });
    driver = new FakeCsiDriver();
    client = new DirMakingClient(DRIVER, driver, { clock });
    registry = new FakeCsiDriverRegistry();
    registry.add(client);
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('stages at the global mount, publishes at the pod path, in upstream layout', async () => {
    await claim('data', 'Bound');
    await csiPv();
    await csiDriver({ attachRequired: true });
    await attached();
    const m = manager();
    const vols = await m.setUpPod(pvcPod('u1'), signal);
    const target = path.join(root, 'pods/u1/volumes/kubernetes.io~csi/pv-1/mount');
    assert.equal(vols.byName.get('v')?.hostPath, target);
    const staging = stagingPath(root, DRIVER, HANDLE);
    assert.match(
      staging,
      /plugins\/kubernetes\.io\/csi\/mock\.csi\.berth\.test\/[0-9a-f]{64}\/globalmount$/,
    );
    assert.deepEqual(
      driver.calls.map((c) => c.rpc).filter((r) => r !== 'NodeGetCapabilities'),
      ['NodeStageVolume', 'NodePublishVolume'],
    );
    assert.equal(driver.callsOf('NodeStageVolume')[0]?.path, staging);
    assert.equal(driver.callsOf('NodePublishVolume')[0]?.path, target);
    const data = JSON.parse(
      await readFile(path.join(path.dirname(target), 'vol_data.json'), 'utf8'),
    ) as Record<string, string>;
    assert.deepEqual(data, {
      specVolID: 'pv-1',
      volumeHandle: HANDLE,
      driverName: DRIVER,
      nodeName: NODE,
      volumeLifecycleMode: 'Persistent',
      attachmentID: attachmentName(HANDLE, DRIVER, NODE),
    });
    assert.deepEqual(m.volumesInUse(), [uniqueVolumeName(DRIVER, HANDLE)]);
    // A second sync of the same pod does not publish again.
    await m.setUpPod(pvcPod('u1'), signal);
    assert.equal(driver.callsOf('NodePublishVolume').length, 1);
  });

  it('unpublishes each pod and unstages after the last one', async () => {
    await claim('data', 'Bound');
    await csiPv();
    await csiDriver({ attachRequired: false });
    const m = manager();
    await m.setUpPod(pvcPod('u1'), signal);
    await m.setUpPod(pvcPod('u2'), signal);
    assert.equal(driver.callsOf('NodeStageVolume').length, 1);
    await m.tearDownPod('u1', signal);
    assert.equal(driver.callsOf('NodeUnpublishVolume').length, 1);
    assert.equal(driver.callsOf('NodeUnstageVolume').length, 0);
    await m.tearDownPod('u2', signal);
    assert.equal(driver.callsOf('NodeUnstageVolume').length, 1);
    assert.deepEqual(m.volumesInUse(), []);
    assert.deepEqual(await readdir(path.join(root, 'plugins/kubernetes.io/csi', DRIVER)), []);
  });

  it('a restarted berth tears down from vol_data.json alone', async () => {
    await claim('data', 'Bound');
    await csiPv();
    await csiDriver({ attachRequired: false });
    await manager().setUpPod(pvcPod('u1'), signal);
    const fresh = manager();
    await fresh.cleanupOrphans(new Set(), signal);
    assert.equal(driver.callsOf('NodeUnpublishVolume').length, 1);
    assert.equal(driver.callsOf('NodeUnstageVolume').length, 1);
    await assert.rejects(lstat(path.join(root, 'pods/u1')), { code: 'ENOENT' });
  });

  it('a volume staged before a crash, with no pod left, is unstaged by cleanup', async () => {
    await claim('data', 'Bound');
    await csiPv();
    await csiDriver({ attachRequired: false });
    driver.failNext('NodePublishVolume', GrpcStatus.UNAVAILABLE, 'driver restarting');
    await assert.rejects(manager().setUpPod(pvcPod('u1'), signal), VolumeError);
    assert.equal(driver.callsOf('NodeStageVolume').length, 1);
    await manager().cleanupOrphans(new Set(), signal);
    assert.equal(driver.callsOf('NodeUnstageVolume').length, 1);
  });

  it('waits for the attachment and reports an attach error in upstream words', async () => {
    await kube.create(NODES, { metadata: { name: NODE } });
    await claim('data', 'Bound');
    await csiPv();
    await kube.create<VolumeAttachment>(VOLUMEATTACHMENTS, {
      metadata: { name: attachmentName(HANDLE, DRIVER, NODE) },
      spec: { attacher: DRIVER, nodeName: NODE, source: { persistentVolumeName: 'pv-1' } },
      status: { attached: false, attachError: { message: 'disk on fire' } },
    });
    await assert.rejects(manager().setUpPod(pvcPod('u1'), signal), (err: unknown) => {
      assert.ok(err instanceof VolumeError);
      assert.match(
        err.message,
        /^MountVolume\.WaitForAttach failed for volume "pv-1" : .*disk on fire/,
      );
      return true;
    });
    assert.equal(driver.callsOf('NodeStageVolume').length, 0);
  });

  it('times out waiting for an attachment that never comes', async () => {
    await kube.create(NODES, { metadata: { name: NODE } });
    await claim('data', 'Bound');
    await csiPv();
    const done = manager()
      .setUpPod(pvcPod('u1'), signal)
      .then(
        () => assert.fail('set up without an attachment'),
        (err: unknown) => err,
      );
    for (let i = 0; i < 50; i++) {
      await new Promise((r) => setImmediate(r));
      await clock.advance(1000);
    }
    const err = await done;
    assert.ok(err instanceof VolumeError);
    assert.match(
      err.message,
      /timed out waiting for external-attacher of mock\.csi\.berth\.test CSI driver to attach volume vol-1/,
    );
  });

  it('refuses an unbound claim, a missing claim and an unregistered driver with upstream messages', async () => {
    const m = manager();
    await assert.rejects(
      m.setUpPod(pvcPod('u1', 'nope'), signal),
      /error processing PVC ns\/nope: failed to fetch PVC from API server/,
    );
    await claim('pending', 'Pending');
    await assert.rejects(
      m.setUpPod(pvcPod('u1', 'pending'), signal),
      /error processing PVC ns\/pending: PVC is not bound/,
    );
    await claim('data', 'Bound');
    await csiPv('pv-1', 'someone-else');
    await assert.rejects(m.setUpPod(pvcPod('u1'), signal), /does not point to claim\.UID /);
    registry = new FakeCsiDriverRegistry();
    await rm(root, { recursive: true, force: true });
    await kube.delete(PERSISTENTVOLUMES, 'pv-1');
    await csiPv();
    await csiDriver({ attachRequired: false });
    await assert.rejects(
      manager().setUpPod(pvcPod('u1'), signal),
      /driver name mock\.csi\.berth\.test not found in the list of registered CSI drivers/,
    );
  });

  it('a volume handle with ../ is hashed into the path, never used raw', () => {
    const evil = '../../../../etc';
    const p = stagingPath(root, DRIVER, evil);
    assert.ok(p.startsWith(path.join(root, 'plugins/kubernetes.io/csi', DRIVER)));
    assert.ok(!p.includes('etc'));
    assert.throws(() => stagingPath(root, '../x', HANDLE), /Cannot use CSI driver name/);
  });

  it('refuses a publish target the driver turned into a symlink', async () => {
    await claim('data', 'Bound');
    await csiPv();
    await csiDriver({ attachRequired: false });
    client.symlinkTo = '/etc';
    await assert.rejects(
      manager().setUpPod(pvcPod('u1'), signal),
      /something other than a directory/,
    );
  });

  it('inline ephemeral volumes need the CSIDriver to allow them, and are published only', async () => {
    const pod: Pod = {
      metadata: { name: 'inline', namespace: 'ns', uid: 'u9' },
      spec: {
        serviceAccountName: 'sa',
        containers: [{ name: 'c' }],
        volumes: [{ name: 'scratch', csi: { driver: DRIVER, volumeAttributes: { size: '1' } } }],
      },
    };
    await assert.rejects(manager().setUpPod(pod, signal), /no CSIDriver object/);
    await csiDriver({
      attachRequired: false,
      podInfoOnMount: true,
      volumeLifecycleModes: ['Ephemeral'],
    });
    const m = manager();
    await m.setUpPod(pod, signal);
    assert.deepEqual(driver.callsOf('NodeStageVolume'), []);
    assert.equal(
      driver.callsOf('NodePublishVolume')[0]?.volumeId,
      inlineVolumeHandle('u9', 'scratch'),
    );
    assert.deepEqual(m.volumesInUse(), []);
    await m.tearDownPod('u9', signal);
    assert.equal(driver.callsOf('NodeUnpublishVolume').length, 1);
    assert.equal(driver.callsOf('NodeUnstageVolume').length, 0);
  });

  it('generic ephemeral claims must be owned by the pod', async () => {
    await kube.create<PersistentVolumeClaim>(inNamespace(PERSISTENTVOLUMECLAIMS, 'ns'), {
      metadata: {
        name: 'p-u1-v',
        namespace: 'ns',
        uid: 'uid-eph',
        ownerReferences: [
          { apiVersion: 'v1', kind: 'Pod', name: 'other', uid: 'other', controller: true },
        ],
      },
      spec: { volumeName: 'pv-1' },
      status: { phase: 'Bound' },
    });
    const pod = pvcPod('u1');
    const spec = pod.spec;
    assert.ok(spec?.volumes?.[0] !== undefined);
    spec.volumes[0] = { name: 'v', ephemeral: { volumeClaimTemplate: { spec: {} } } };
    await assert.rejects(
      manager().setUpPod(pod, signal),
      /PVC ns\/p-u1-v was not created for pod ns\/p-u1 \(pod is not owner\)/,
    );
  });

  it('expands a mounted volume when its claim waits for the node, then records the size', async () => {
    await claim('data', 'Bound');
    await csiPv();
    await csiDriver({ attachRequired: false });
    const m = manager();
    await m.setUpPod(pvcPod('u1'), signal);
    assert.equal(driver.callsOf('NodeExpandVolume').length, 0);
    const pvcPath = inNamespace(PERSISTENTVOLUMECLAIMS, 'ns');
    await kube.patch(
      PERSISTENTVOLUMES,
      'pv-1',
      { spec: { capacity: { storage: '2Gi' } } },
      'merge',
    );
    await kube.patch(
      pvcPath,
      'data',
      {
        status: {
          capacity: { storage: '1Gi' },
          allocatedResourceStatuses: { storage: 'NodeResizePending' },
        },
      },
      'merge',
      { subresource: 'status' },
    );
    await m.setUpPod(pvcPod('u1'), signal);
    const expand = driver.callsOf('NodeExpandVolume');
    assert.equal(expand.length, 1);
    assert.equal(expand[0]?.requiredBytes, 2n * 1024n ** 3n);
    assert.equal(expand[0]?.path, path.join(root, 'pods/u1/volumes/kubernetes.io~csi/pv-1/mount'));
    const after = await kube.get<PersistentVolumeClaim>(pvcPath, 'data');
    assert.equal(after.status?.capacity?.['storage'], '2Gi');
    assert.equal(after.status?.allocatedResourceStatuses?.['storage'], undefined);
    // Done: the next sync does not expand again.
    await m.setUpPod(pvcPod('u1'), signal);
    assert.equal(driver.callsOf('NodeExpandVolume').length, 1);
  });

  it('a final publish error forgets the target; an uncertain one keeps it for the teardown', async () => {
    await claim('data', 'Bound');
    await csiPv();
    await csiDriver({ attachRequired: false });
    const m = manager();
    const volDir = path.join(root, 'pods/u1/volumes/kubernetes.io~csi/pv-1');
    driver.failNext('NodePublishVolume', GrpcStatus.INTERNAL, 'driver bug');
    await assert.rejects(m.setUpPod(pvcPod('u1'), signal), {
      message:
        'MountVolume.SetUp failed for volume "pv-1" : rpc error: code = Internal desc = driver bug',
    });
    await assert.rejects(lstat(volDir), { code: 'ENOENT' });
    await m.tearDownPod('u1', signal);
    assert.equal(driver.callsOf('NodeUnpublishVolume').length, 0);

    driver.failNext('NodePublishVolume', GrpcStatus.DEADLINE_EXCEEDED, 'slow');
    await assert.rejects(m.setUpPod(pvcPod('u2'), signal), VolumeError);
    const kept = path.join(root, 'pods/u2/volumes/kubernetes.io~csi/pv-1/vol_data.json');
    assert.ok((await lstat(kept)).isFile());
    await m.tearDownPod('u2', signal);
    assert.equal(driver.callsOf('NodeUnpublishVolume').length, 1);
  });
});
