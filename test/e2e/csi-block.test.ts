/**
 * Block volumes (volumeMode: Block) on berth with real components: csi-provisioner makes
 * the PV, csi-attacher attaches it, upstream's CSI mock driver stages and publishes it
 * with the block access type and, through our main's --block-dir, makes the publish target
 * a real device (a loop device over a backing file that outlives the pods, as a disk
 * would). berth maps it in upstream's layout and the container gets it at its
 * volumeDevices devicePath: what one pod writes with dd, the next one reads back. When
 * the pods are gone, nothing is left: no loop device, no symlink, no mount.
 */
import assert from 'node:assert/strict';
import { lstat, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { loopsUnder, startCsi, type Csi, type CsiCall } from '../harness/csi.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  getJson,
  isRunningAndReady,
  podEvents,
  waitForPod,
} from '../harness/kube-helpers.ts';

const NODE = 'csi-block';
const NS = 'default';
const DEVICE = '/dev/xvda';
const ok = (method: string) => (c: CsiCall) => c.method === method && c.error === '';
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

describe('CSI block volumes on berth (real provisioner, attacher, mock driver with loop devices)', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let csi: Csi;
  const sc = 'csi-mock-block';

  function blockPod(name: string, script: string): Pod {
    const pod = busyboxPod(cluster, name, NODE, {
      command: ['sh', '-c', script],
      extraSpec: { volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'raw' } }] },
    });
    const main = pod.spec?.containers[0];
    assert.ok(main !== undefined && pod.spec !== undefined);
    return {
      ...pod,
      spec: {
        ...pod.spec,
        containers: [{ ...main, volumeDevices: [{ name: 'data', devicePath: DEVICE }] }],
      },
    };
  }

  async function running(name: string): Promise<Pod> {
    return waitForPod(cluster, NS, name, 'Running', isRunningAndReady, 180_000).catch(
      async (err: unknown) => {
        const events = (await podEvents(cluster, NS, name)).map((e) => e.message);
        throw new Error(
          `${String(err)}\nevents: ${events.join('\n')}\ndriver:\n${(await csi.driver()?.tail()) ?? ''}`,
        );
      },
    );
  }

  async function logsOf(name: string, want: RegExp): Promise<string> {
    return eventually(
      `logs of ${name} matching ${String(want)}`,
      async () => {
        const logs = await cluster.kubectl(['-n', NS, 'logs', name]);
        return want.test(logs) ? logs : undefined;
      },
      60_000,
    );
  }

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    berth = await startBerth(cluster, { nodeName: NODE });
    csi = await startCsi(cluster, {
      nodeName: NODE,
      rootDir: berth.dir,
      storageClass: { name: sc },
      mock: { blockDevices: true },
    });
    await eventually(
      `CSINode ${NODE} listing the driver`,
      async () => {
        const node = await getJson<{ spec?: { drivers?: { name?: string }[] } }>(cluster, [
          'get',
          'csinode',
          NODE,
        ]);
        return node?.spec?.drivers?.some((d) => d.name === csi.driverName) === true
          ? true
          : undefined;
      },
      60_000,
    );
  });

  after(async () => {
    await csi?.stop();
    await berth?.stop();
    await cluster?.stop();
  });

  test('a Block claim: the device at devicePath, written and read back with dd across pods, nothing left after', async () => {
    await applyJson(cluster, {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'raw', namespace: NS },
      spec: {
        accessModes: ['ReadWriteOnce'],
        volumeMode: 'Block',
        storageClassName: sc,
        resources: { requests: { storage: '16Mi' } },
      },
    });
    const pv = await eventually(
      'PVC raw Bound',
      async () => {
        const pvc = await getJson<{ status?: { phase?: string }; spec?: { volumeName?: string } }>(
          cluster,
          ['-n', NS, 'get', 'pvc', 'raw'],
        );
        return pvc?.status?.phase === 'Bound' ? pvc.spec?.volumeName : undefined;
      },
      60_000,
    );

    await applyJson(
      cluster,
      blockPod(
        'writer',
        `test -b ${DEVICE} && echo is-block-device; ` +
          `printf berth-block-data | dd of=${DEVICE} bs=512 conv=sync,notrunc 2>/dev/null && sync && ` +
          `echo "read: $(dd if=${DEVICE} bs=16 count=1 2>/dev/null)"; sleep 3600`,
      ),
    );
    const writer = await running('writer');
    const uid = writer.metadata?.uid ?? '';
    const logs = await logsOf('writer', /read: /);
    assert.match(logs, /is-block-device/);
    assert.match(logs, /read: berth-block-data/);

    const devices = join(berth.dir, 'plugins/kubernetes.io/csi/volumeDevices');
    const calls = await csi.calls();
    const stage = calls.find(ok('NodeStageVolume'));
    const publish = calls.find(ok('NodePublishVolume'));
    assert.ok(calls.some(ok('ControllerPublishVolume')), 'the attacher attached the volume');
    assert.equal(str(stage?.request['staging_target_path']), join(devices, 'staging', pv));
    const publishPath = join(devices, 'publish', pv, uid);
    assert.equal(str(publish?.request['target_path']), publishPath);
    // The block access type (Go's JSON of the oneof: {"AccessType": {"Block": {}}}).
    assert.match(JSON.stringify(publish?.request['volume_capability']), /"Block"/);
    const link = join(berth.dir, 'pods', uid, 'volumeDevices/kubernetes.io~csi', pv);
    assert.equal(await readlink(link), publishPath);
    assert.ok((await lstat(publishPath)).isBlockDevice());
    const mapFile = join(devices, pv, 'dev', uid);
    const loops = await loopsUnder(berth.dir);
    assert.equal(loops.length, 1, `one loop device holds ${mapFile}: ${loops.join(', ')}`);

    await cluster.kubectl(['-n', NS, 'delete', 'pod', 'writer', '--wait=true', '--timeout=120s']);
    await csi.waitForCall('NodeUnpublishVolume', ok('NodeUnpublishVolume'));
    await csi.waitForCall('NodeUnstageVolume', ok('NodeUnstageVolume'), { timeoutMs: 60_000 });

    // The data is on the volume, not in the pod: a new pod reads it back.
    await applyJson(
      cluster,
      blockPod('reader', `echo "read: $(dd if=${DEVICE} bs=16 count=1 2>/dev/null)"; sleep 3600`),
    );
    await running('reader');
    assert.match(await logsOf('reader', /read: /), /read: berth-block-data/);
    await cluster.kubectl(['-n', NS, 'delete', 'pod', 'reader', '--wait=true', '--timeout=120s']);
    await eventually(
      'the second NodeUnstageVolume',
      async () =>
        (await csi.calls()).filter(ok('NodeUnstageVolume')).length >= 2 ? true : undefined,
      60_000,
    );

    assert.deepEqual(await loopsUnder(berth.dir), [], 'no loop device of berth is left');
    assert.equal(
      await exists(join(berth.dir, 'pods', uid)),
      false,
      'the pod dir and its symlink are gone',
    );
    const mountinfo = await readFile('/proc/self/mountinfo', 'utf8');
    assert.ok(!mountinfo.includes(devices), `nothing mounted under ${devices}`);
    assert.equal(await exists(join(devices, pv)), false);
    assert.equal(await exists(join(devices, 'staging', pv)), false);
    assert.equal(await exists(join(devices, 'publish', pv)), false);
  });
});
