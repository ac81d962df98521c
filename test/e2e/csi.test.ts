/**
 * CSI volumes and claims on berth with real components (test/harness/csi.ts):
 * csi-provisioner makes the PVs, kube-controller-manager's attach-detach controller and
 * csi-attacher attach them, upstream's CSI mock driver (one process, controller and node)
 * serves berth's NodeStage/NodePublish, and berth mounts what it publishes into the
 * containers. The mock's NodePublish only creates the target directory, so what a
 * container writes lives in the pod's directory: data does not outlive the pod here, and
 * the tests check what berth asked of the driver (its call log) and what berth mounted.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Pod, Volume, VolumeMount } from 'kubernetes-types/core/v1.js';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { startCsi, type Csi, type CsiCall } from '../harness/csi.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  getJson,
  isRunningAndReady,
  podEvents,
  waitForPod,
} from '../harness/kube-helpers.ts';

const NODE = 'csi-berth';
const NS = 'default';
const ok = (method: string) => (c: CsiCall) => c.method === method && c.error === '';
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

function podWith(
  cluster: Cluster,
  name: string,
  volumes: Volume[],
  mounts: VolumeMount[],
  command = 'sleep 3600',
  extraSpec: Record<string, unknown> = {},
): Pod {
  const pod = busyboxPod(cluster, name, NODE, {
    command: ['sh', '-c', command],
    extraSpec: { volumes, ...extraSpec },
  });
  const main = pod.spec?.containers[0];
  assert.ok(main !== undefined && pod.spec !== undefined);
  return { ...pod, spec: { ...pod.spec, containers: [{ ...main, volumeMounts: mounts }] } };
}

async function claim(cluster: Cluster, name: string, storageClassName: string): Promise<void> {
  await applyJson(cluster, {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name, namespace: NS },
    spec: {
      accessModes: ['ReadWriteOnce'],
      storageClassName,
      resources: { requests: { storage: '1Gi' } },
    },
  });
}

/** Set once the driver is up: the sidecars' and driver's last log lines for failures. */
let describeCsi: () => Promise<string> = () => Promise.resolve('');

async function boundVolume(cluster: Cluster, name: string): Promise<string> {
  return eventually(
    `PVC ${name} Bound`,
    async () => {
      const pvc = await getJson<{ status?: { phase?: string }; spec?: { volumeName?: string } }>(
        cluster,
        ['-n', NS, 'get', 'pvc', name],
      );
      return pvc?.status?.phase === 'Bound' ? pvc.spec?.volumeName : undefined;
    },
    60_000,
  ).catch(async (err: unknown) => {
    throw new Error(`${String(err)}\n${await describeCsi()}`);
  });
}

async function handleOf(cluster: Cluster, pv: string): Promise<string> {
  const obj = await getJson<{ spec?: { csi?: { volumeHandle?: string } } }>(cluster, [
    'get',
    'pv',
    pv,
  ]);
  return obj?.spec?.csi?.volumeHandle ?? '';
}

async function deletePod(cluster: Cluster, name: string): Promise<void> {
  await cluster.kubectl(['-n', NS, 'delete', 'pod', name, '--wait=true', '--timeout=120s']);
}

async function eventWith(cluster: Cluster, pod: string, re: RegExp): Promise<string> {
  return eventually(
    `an event on ${pod} matching ${String(re)}`,
    async () => (await podEvents(cluster, NS, pod)).find((e) => re.test(e.message))?.message,
    90_000,
  );
}

describe('CSI volumes and claims on berth (real provisioner, attacher, mock driver)', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let csi: Csi;
  const sc = 'csi-mock';

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    // On the pod bridge's gateway, not loopback: the API server refuses to proxy to a
    // loopback node, and /stats/summary is read through its node proxy.
    berth = await startBerth(cluster, {
      nodeName: NODE,
      nodeIp: cluster.runtime.gateway,
      extraConfig: ['volumeStatsAggPeriod: 2s'],
    });
    csi = await startCsi(cluster, {
      nodeName: NODE,
      rootDir: berth.dir,
      podInfoOnMount: true,
      volumeLifecycleModes: ['Persistent', 'Ephemeral'],
      storageClass: { name: sc, parameters: { 'csi.storage.k8s.io/fstype': 'ext4' } },
      mock: { nodeExpansion: true },
    });
    describeCsi = async () =>
      [
        `csi-provisioner:\n${(await csi.provisioner?.tail(8)) ?? ''}`,
        `csi-attacher:\n${(await csi.attacher?.tail(8)) ?? ''}`,
        `driver:\n${(await csi.driver()?.tail()) ?? ''}`,
      ].join('\n');
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

  test('a PVC is attached, staged, published and mounted; the pod gone, it is unpublished and unstaged', async () => {
    await claim(cluster, 'data', sc);
    const pv = await boundVolume(cluster, 'data');
    const handle = await handleOf(cluster, pv);
    await applyJson(
      cluster,
      podWith(
        cluster,
        'writer',
        [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }],
        [{ name: 'data', mountPath: '/data' }],
        'echo hello > /data/file && sleep 3600',
        { securityContext: { fsGroup: 1234 } },
      ),
    );
    const pod = await waitForPod(cluster, NS, 'writer', 'Running', isRunningAndReady, 180_000);
    const uid = pod.metadata?.uid ?? '';
    const staging = join(
      berth.dir,
      'plugins/kubernetes.io/csi',
      csi.driverName,
      sha(handle),
      'globalmount',
    );
    const target = join(berth.dir, 'pods', uid, 'volumes/kubernetes.io~csi', pv, 'mount');
    const calls = await csi.calls();
    const stage = calls.find(ok('NodeStageVolume'));
    const publish = calls.find(ok('NodePublishVolume'));
    assert.ok(calls.some(ok('ControllerPublishVolume')), 'the attacher attached the volume');
    assert.equal(str(stage?.request['staging_target_path']), staging);
    assert.equal(str(publish?.request['target_path']), target);
    assert.equal(str(publish?.request['staging_target_path']), staging);
    // podInfoOnMount: the pod's identity in the volume context.
    const context = publish?.request['volume_context'] as Record<string, string> | undefined;
    assert.equal(context?.['csi.storage.k8s.io/pod.name'], 'writer');
    assert.equal(context?.['csi.storage.k8s.io/ephemeral'], 'false');
    // What the container wrote went through berth's mount of the published target.
    assert.equal((await readFile(join(target, 'file'), 'utf8')).trim(), 'hello');
    // fsGroup (the PV has fsType ext4, RWO): berth applied the group, the driver could not.
    assert.equal((await stat(target)).gid, 1234);
    const inUse = `kubernetes.io/csi/${csi.driverName}^${handle}`;
    await eventually(
      'volumesInUse naming the volume',
      async () => {
        const n = await getJson<{ status?: { volumesInUse?: string[] } }>(cluster, [
          'get',
          'node',
          NODE,
        ]);
        return n?.status?.volumesInUse?.includes(inUse) === true ? true : undefined;
      },
      30_000,
    );
    const data = JSON.parse(await readFile(join(target, '..', 'vol_data.json'), 'utf8')) as Record<
      string,
      string
    >;
    assert.equal(data['volumeHandle'], handle);
    assert.equal(data['driverName'], csi.driverName);

    await deletePod(cluster, 'writer');
    const unpublish = await csi.waitForCall('NodeUnpublishVolume', ok('NodeUnpublishVolume'));
    const unstage = await csi.waitForCall('NodeUnstageVolume', ok('NodeUnstageVolume'), {
      timeoutMs: 60_000,
    });
    assert.equal(str(unpublish.request['target_path']), target);
    assert.equal(str(unstage.request['staging_target_path']), staging);
    assert.equal(await exists(join(berth.dir, 'pods', uid)), false);
    assert.equal(await exists(staging), false);
    const mounts = await readFile('/proc/self/mounts', 'utf8');
    assert.ok(!mounts.includes(uid), 'nothing of the pod is still mounted');
    await csi.waitForCall('ControllerUnpublishVolume', ok('ControllerUnpublishVolume'), {
      timeoutMs: 120_000,
    });
  });

  test('a StatefulSet with a volumeClaimTemplate: each replica its own claim, kept across a delete', async () => {
    await applyJson(cluster, {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'web', namespace: NS },
      spec: {
        serviceName: 'web',
        replicas: 2,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: {
            automountServiceAccountToken: false,
            terminationGracePeriodSeconds: 2,
            containers: [
              {
                name: 'main',
                image: cluster.images.busyboxLocal,
                imagePullPolicy: 'IfNotPresent',
                command: ['sh', '-c', 'hostname > /data/owner; sleep 3600'],
                volumeMounts: [{ name: 'www', mountPath: '/data' }],
              },
            ],
          },
        },
        volumeClaimTemplates: [
          {
            metadata: { name: 'www' },
            spec: {
              accessModes: ['ReadWriteOnce'],
              storageClassName: sc,
              resources: { requests: { storage: '1Gi' } },
            },
          },
        ],
      },
    });
    const pvs = new Map<string, string>();
    for (const i of [0, 1]) {
      await waitForPod(cluster, NS, `web-${i}`, 'Running', isRunningAndReady, 180_000);
      pvs.set(`web-${i}`, await boundVolume(cluster, `www-web-${i}`));
    }
    assert.notEqual(pvs.get('web-0'), pvs.get('web-1'));
    const before0 = await waitForPod(cluster, NS, 'web-0', 'Running', isRunningAndReady);
    await cluster.kubectl(['-n', NS, 'delete', 'pod', 'web-0', '--wait=true', '--timeout=120s']);
    const again = await waitForPod(
      cluster,
      NS,
      'web-0',
      'Running again',
      (p) => isRunningAndReady(p) && p.metadata?.uid !== before0.metadata?.uid,
      180_000,
    );
    const claimName = again.spec?.volumes?.find((v) => v.name === 'www')?.persistentVolumeClaim
      ?.claimName;
    assert.equal(claimName, 'www-web-0');
    assert.equal(await boundVolume(cluster, 'www-web-0'), pvs.get('web-0'));
    await cluster.kubectl(['-n', NS, 'delete', 'statefulset', 'web', '--wait=true']);
  });

  test('readOnly claims are published read-only and mounted read-only', async () => {
    await claim(cluster, 'ro', sc);
    await boundVolume(cluster, 'ro');
    await applyJson(
      cluster,
      podWith(
        cluster,
        'reader',
        [{ name: 'ro', persistentVolumeClaim: { claimName: 'ro', readOnly: true } }],
        [{ name: 'ro', mountPath: '/ro' }],
        'if touch /ro/x; then echo writable; else echo readonly; fi; sleep 3600',
      ),
    );
    await waitForPod(cluster, NS, 'reader', 'Running', isRunningAndReady, 180_000);
    const roPv = await boundVolume(cluster, 'ro');
    const publish = (await csi.calls())
      .filter(ok('NodePublishVolume'))
      .find((c) => str(c.request['target_path']).includes(`/volumes/kubernetes.io~csi/${roPv}/`));
    assert.equal(publish?.request['readonly'], true);
    await eventually('the container to report', async () => {
      const logs = await cluster.kubectl(['-n', NS, 'logs', 'reader']);
      return logs.includes('readonly') ? true : undefined;
    });
    await deletePod(cluster, 'reader');
  });

  test('an inline ephemeral CSI volume is published with its derived handle and pod info', async () => {
    await applyJson(
      cluster,
      podWith(
        cluster,
        'inline',
        [{ name: 'scratch', csi: { driver: csi.driverName, volumeAttributes: { size: '1' } } }],
        [{ name: 'scratch', mountPath: '/scratch' }],
      ),
    );
    const uid = await eventually('the inline pod UID', async () => {
      const p = await getJson<Pod>(cluster, ['-n', NS, 'get', 'pod', 'inline']);
      return p?.metadata?.uid;
    });
    const inlineHandle = `csi-${sha(`${uid}scratch`)}`;
    const inline = await csi.waitForCall(
      'NodePublishVolume of the inline volume',
      (c) => c.method === 'NodePublishVolume' && str(c.request['volume_id']) === inlineHandle,
      { timeoutMs: 120_000 },
    );
    const target = join(berth.dir, 'pods', uid, 'volumes/kubernetes.io~csi/scratch/mount');
    assert.equal(str(inline.request['target_path']), target);
    assert.equal(str(inline.request['staging_target_path']), '', 'inline volumes are not staged');
    const context = inline.request['volume_context'] as Record<string, string>;
    assert.equal(context['csi.storage.k8s.io/ephemeral'], 'true');
    assert.equal(context['csi.storage.k8s.io/pod.uid'], uid);
    assert.equal(context['size'], '1');
    // Upstream's mock dereferences a nil volume when it publishes an inline ephemeral
    // volume (mock/service/node.go); the harness turns that panic into an Internal error,
    // which berth reports on the pod as upstream words it.
    if (inline.error !== '') {
      await eventWith(
        cluster,
        'inline',
        /MountVolume\.SetUp failed for volume "scratch" : .*panicked/,
      );
    } else {
      await waitForPod(cluster, NS, 'inline', 'Running', isRunningAndReady, 120_000);
    }
    await deletePod(cluster, 'inline');
  });

  test("a generic ephemeral volume: the pod's own claim, provisioned and mounted", async () => {
    await applyJson(
      cluster,
      podWith(
        cluster,
        'geph',
        [
          {
            name: 'eph',
            ephemeral: {
              volumeClaimTemplate: {
                spec: {
                  accessModes: ['ReadWriteOnce'],
                  storageClassName: sc,
                  resources: { requests: { storage: '1Gi' } },
                },
              },
            },
          },
        ],
        [{ name: 'eph', mountPath: '/eph' }],
        'echo b > /eph/f && sleep 3600',
      ),
    );
    await waitForPod(cluster, NS, 'geph', 'Running', isRunningAndReady, 180_000);
    // Made by the ephemeral-volume controller, owned by the pod, named <pod>-<volume>.
    const pv = await boundVolume(cluster, 'geph-eph');
    // Read before the pod goes: its claim goes with it, and the PV (reclaim Delete) may
    // be gone by the time the deletion returns.
    const handle = await handleOf(cluster, pv);
    assert.notEqual(handle, '');
    await deletePod(cluster, 'geph');
    await csi.waitForCall(
      'NodeUnstageVolume of the generic ephemeral volume',
      (c) => ok('NodeUnstageVolume')(c) && str(c.request['volume_id']) === handle,
      { timeoutMs: 60_000 },
    );
  });
  test('a local PV is bind-mounted from its path, no CSI involved', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-local-pv-'));
    try {
      await applyJson(cluster, {
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        metadata: { name: 'local-pv' },
        spec: {
          capacity: { storage: '1Gi' },
          accessModes: ['ReadWriteOnce'],
          storageClassName: 'local',
          local: { path: dir },
          claimRef: { namespace: NS, name: 'local' },
          nodeAffinity: {
            required: {
              nodeSelectorTerms: [
                {
                  matchExpressions: [
                    { key: 'kubernetes.io/hostname', operator: 'In', values: [NODE] },
                  ],
                },
              ],
            },
          },
        },
      });
      await claim(cluster, 'local', 'local');
      await boundVolume(cluster, 'local');
      await applyJson(
        cluster,
        podWith(
          cluster,
          'local',
          [{ name: 'l', persistentVolumeClaim: { claimName: 'local' } }],
          [{ name: 'l', mountPath: '/l' }],
          'echo from-pod > /l/f && sleep 3600',
        ),
      );
      await waitForPod(cluster, NS, 'local', 'Running', isRunningAndReady, 120_000);
      await eventually('the file on the host', async () =>
        (await readFile(join(dir, 'f'), 'utf8').catch(() => '')).trim() === 'from-pod'
          ? true
          : undefined,
      );
      await deletePod(cluster, 'local');
      assert.equal((await readFile(join(dir, 'f'), 'utf8')).trim(), 'from-pod');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('NodeExpandVolume when the claim grows (the resizer side done by hand: the proxy does not serve external-resizer)', async () => {
    await claim(cluster, 'grow', sc);
    const pv = await boundVolume(cluster, 'grow');
    const handle = await handleOf(cluster, pv);
    await applyJson(
      cluster,
      podWith(
        cluster,
        'grower',
        [{ name: 'g', persistentVolumeClaim: { claimName: 'grow' } }],
        [{ name: 'g', mountPath: '/g' }],
      ),
    );
    await waitForPod(cluster, NS, 'grower', 'Running', isRunningAndReady, 180_000);
    // What external-resizer does after ControllerExpandVolume: the PV grows and the claim
    // waits for the node.
    await cluster.kubectl([
      'patch',
      'pv',
      pv,
      '--type=merge',
      '-p',
      '{"spec":{"capacity":{"storage":"2Gi"}}}',
    ]);
    await cluster.kubectl([
      '-n',
      NS,
      'patch',
      'pvc',
      'grow',
      '--subresource=status',
      '--type=merge',
      '-p',
      '{"status":{"capacity":{"storage":"1Gi"},"allocatedResourceStatuses":{"storage":"NodeResizePending"}}}',
    ]);
    const expand = await csi.waitForCall(
      'NodeExpandVolume',
      (c) => ok('NodeExpandVolume')(c) && str(c.request['volume_id']) === handle,
      { timeoutMs: 120_000 },
    );
    assert.equal(
      Number((expand.request['capacity_range'] as { required_bytes?: number })?.required_bytes),
      2 * 1024 ** 3,
    );
    await eventually('the claim to show 2Gi', async () => {
      const pvc = await getJson<{ status?: { capacity?: { storage?: string } } }>(cluster, [
        '-n',
        NS,
        'get',
        'pvc',
        'grow',
      ]);
      return pvc?.status?.capacity?.storage === '2Gi' ? true : undefined;
    });
    await deletePod(cluster, 'grower');
  });

  test('the driver killed during NodePublish: FailedMount, then the pod starts once it is back', async () => {
    await claim(cluster, 'flaky', sc);
    await boundVolume(cluster, 'flaky');
    await csi.setFaults({ NodePublishVolume: { delay: '300s' } });
    await applyJson(
      cluster,
      podWith(
        cluster,
        'flaky',
        [{ name: 'f', persistentVolumeClaim: { claimName: 'flaky' } }],
        [{ name: 'f', mountPath: '/f' }],
      ),
    );
    await csi.waitForCall('NodeStageVolume', ok('NodeStageVolume'), { timeoutMs: 120_000 });
    // Let berth's NodePublish reach the driver and hang there, then kill the driver under it.
    await new Promise((r) => setTimeout(r, 3000));
    await csi.stopDriver({ kill: true });
    await eventWith(cluster, 'flaky', /MountVolume\.SetUp failed for volume/);
    await csi.setFaults({});
    await csi.startDriver();
    await waitForPod(cluster, NS, 'flaky', 'Running', isRunningAndReady, 180_000);
    await deletePod(cluster, 'flaky');
  });

  test('berth killed between stage and publish: one staging, the pod starts, nothing leaks', async () => {
    await claim(cluster, 'crash', sc);
    const pv = await boundVolume(cluster, 'crash');
    const handle = await handleOf(cluster, pv);
    await csi.setFaults({ NodePublishVolume: { delay: '300s' } });
    await applyJson(
      cluster,
      podWith(
        cluster,
        'crash',
        [{ name: 'c', persistentVolumeClaim: { claimName: 'crash' } }],
        [{ name: 'c', mountPath: '/c' }],
      ),
    );
    await csi.waitForCall(
      'NodeStageVolume of the volume',
      (c) => ok('NodeStageVolume')(c) && str(c.request['volume_id']) === handle,
      { timeoutMs: 120_000 },
    );
    await berth.kill();
    await csi.setFaults({});
    berth = await berth.restart();
    const pod = await waitForPod(cluster, NS, 'crash', 'Running', isRunningAndReady, 180_000);
    const stagings = new Set(
      (await csi.calls())
        .filter((c) => ok('NodeStageVolume')(c) && str(c.request['volume_id']) === handle)
        .map((c) => str(c.request['staging_target_path'])),
    );
    assert.equal(stagings.size, 1, `one staging path: ${[...stagings].join(', ')}`);
    await deletePod(cluster, 'crash');
    await csi.waitForCall(
      'NodeUnstageVolume of the volume',
      (c) => ok('NodeUnstageVolume')(c) && str(c.request['volume_id']) === handle,
      { timeoutMs: 60_000 },
    );
    const mounts = await readFile('/proc/self/mounts', 'utf8');
    assert.ok(!mounts.includes(pod.metadata?.uid ?? '-'), 'nothing of the pod is still mounted');
  });

  test('bad input: a claim that never binds, an unregistered driver', async () => {
    await claim(cluster, 'unbound', 'no-such-class');
    await applyJson(
      cluster,
      podWith(
        cluster,
        'waiting',
        [{ name: 'u', persistentVolumeClaim: { claimName: 'unbound' } }],
        [{ name: 'u', mountPath: '/u' }],
      ),
    );
    await eventWith(cluster, 'waiting', /error processing PVC default\/unbound: PVC is not bound/);
    await deletePod(cluster, 'waiting');

    await applyJson(cluster, {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'CSIDriver',
      metadata: { name: 'nope.csi.berth.test' },
      spec: { attachRequired: false, volumeLifecycleModes: ['Ephemeral'] },
    });
    await applyJson(
      cluster,
      podWith(
        cluster,
        'nodriver',
        [{ name: 'n', csi: { driver: 'nope.csi.berth.test' } }],
        [{ name: 'n', mountPath: '/n' }],
      ),
    );
    await eventWith(
      cluster,
      'nodriver',
      /driver name nope\.csi\.berth\.test not found in the list of registered CSI drivers/,
    );
    await deletePod(cluster, 'nodriver');
  });
});
