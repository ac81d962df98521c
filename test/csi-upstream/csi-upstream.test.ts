/**
 * The CSI chain end to end with real components (test/harness/csi.ts): csi-provisioner
 * makes the PV, the attach-detach controller and csi-attacher attach it, the node agent
 * registers the driver, stages and publishes it for a pod, and unpublishes, unstages and
 * lets it detach once the pod is gone. Not part of `make test`: `make test-csi-upstream`.
 *
 * It runs against the upstream kubelet by default, which makes its observations the
 * reference berth must match; CSI_NODE_AGENT=berth runs the same scenario against berth.
 * CSI_REFERENCE_OUT=<file> writes what the node agent did (calls, paths, files, Node and
 * CSINode changes) as JSON.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { startBerth } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { startCsi, type Csi, type CsiCall } from '../harness/csi.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  getJson,
  podEvents,
  waitForPod,
} from '../harness/kube-helpers.ts';
import { startUpstreamKubelet } from '../harness/upstream-kubelet.ts';

const AGENT = process.env['CSI_NODE_AGENT'] ?? 'upstream';
const NODE = `csi-${AGENT}`;
const NS = 'default';

interface NodeAgent {
  readonly rootDir: string;
  stop(): Promise<void>;
}

interface NodeView {
  readonly metadata?: { readonly annotations?: Readonly<Record<string, string>> };
  readonly status?: {
    readonly volumesInUse?: readonly string[];
    readonly volumesAttached?: readonly { readonly name?: string; readonly devicePath?: string }[];
  };
}

interface CsiNodeView {
  readonly spec?: {
    readonly drivers?: readonly {
      readonly name?: string;
      readonly nodeID?: string;
      readonly topologyKeys?: readonly string[] | null;
      readonly allocatable?: { readonly count?: number };
    }[];
  };
}

interface PvView {
  readonly metadata?: { readonly name?: string };
  readonly spec?: { readonly csi?: { readonly driver?: string; readonly volumeHandle?: string } };
}

interface VolumeAttachmentView {
  readonly metadata?: { readonly name?: string };
  readonly spec?: {
    readonly nodeName?: string;
    readonly source?: { readonly persistentVolumeName?: string };
  };
  readonly status?: {
    readonly attached?: boolean;
    readonly attachmentMetadata?: Record<string, string>;
  };
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

async function startAgent(cluster: Cluster): Promise<NodeAgent> {
  if (AGENT === 'berth') {
    const node = await startBerth(cluster, { nodeName: NODE });
    return { rootDir: node.dir, stop: () => node.stop() };
  }
  if (AGENT !== 'upstream')
    throw new Error(`CSI_NODE_AGENT must be upstream or berth, not ${AGENT}`);
  const kubelet = await startUpstreamKubelet(cluster, { nodeName: NODE, verbosity: 2 });
  return { rootDir: kubelet.rootDir, stop: () => kubelet.stop() };
}

const ok = (method: string) => (c: CsiCall) => c.method === method && c.error === '';
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** A PVC of the mock's StorageClass; resolves to its PV's name and volume handle once Bound. */
async function boundClaim(
  cluster: Cluster,
  csi: Csi,
  name: string,
): Promise<{ pvName: string; handle: string }> {
  await applyJson(cluster, {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name, namespace: NS },
    spec: {
      accessModes: ['ReadWriteOnce'],
      storageClassName: csi.storageClassName,
      resources: { requests: { storage: '1Gi' } },
    },
  });
  const pvName = await eventually(
    `PVC ${name} Bound`,
    async () => {
      const pvc = await getJson<{ status?: { phase?: string }; spec?: { volumeName?: string } }>(
        cluster,
        ['-n', NS, 'get', 'pvc', name],
      );
      return pvc?.status?.phase === 'Bound' ? pvc.spec?.volumeName : undefined;
    },
    60_000,
  );
  const pv = await getJson<PvView>(cluster, ['get', 'pv', pvName]);
  assert.equal(pv?.spec?.csi?.driver, csi.driverName);
  const handle = pv.spec.csi.volumeHandle ?? '';
  assert.notEqual(handle, '');
  return { pvName, handle };
}

/** A busybox pod on the node with claim `claim` mounted at /data. */
function podWithClaim(cluster: Cluster, name: string, claim: string, script: string): Pod {
  const pod: Pod = busyboxPod(cluster, name, NODE, {
    command: ['sh', '-c', script],
    extraSpec: { volumes: [{ name: 'data', persistentVolumeClaim: { claimName: claim } }] },
  });
  const main = pod.spec?.containers[0];
  assert.ok(main !== undefined);
  return {
    ...pod,
    spec: {
      ...pod.spec,
      containers: [{ ...main, volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
    },
  };
}

const isRunning = (p: Pod): boolean => p.status?.phase === 'Running';

describe(`CSI with real components against the ${AGENT} node agent`, () => {
  let cluster: Cluster;
  let agent: NodeAgent;
  let csi: Csi;
  const reference: Record<string, unknown> = { agent: AGENT };

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    agent = await startAgent(cluster);
    csi = await startCsi(cluster, { nodeName: NODE, rootDir: agent.rootDir });
  });

  after(async () => {
    const out = process.env['CSI_REFERENCE_OUT'];
    if (out !== undefined) await writeFile(out, JSON.stringify(reference, null, 2) + '\n');
    await csi?.stop();
    await agent?.stop();
    await cluster?.stop();
  });

  test('the driver registers: CSINode and the node ID annotation', async () => {
    const driver = await eventually(
      `CSINode ${NODE} listing ${csi.driverName}`,
      async () => {
        const node = await getJson<CsiNodeView>(cluster, ['get', 'csinode', NODE]);
        return node?.spec?.drivers?.find((d) => d.name === csi.driverName);
      },
      30_000,
    );
    assert.equal(driver.nodeID, csi.nodeId);
    const node = await getJson<NodeView>(cluster, ['get', 'node', NODE]);
    const annotations = node?.metadata?.annotations ?? {};
    const ids = JSON.parse(annotations['csi.volume.kubernetes.io/nodeid'] ?? '{}') as Record<
      string,
      string
    >;
    assert.equal(ids[csi.driverName], csi.nodeId);
    assert.equal(annotations['volumes.kubernetes.io/controller-managed-attach-detach'], 'true');
    const calls = await csi.calls();
    assert.ok(calls.some(ok('NodeGetInfo')), 'NodeGetInfo was called');
    reference['registration'] = {
      csiNodeDriver: driver,
      nodeAnnotations: annotations,
      registrarLog: await readFile(join(csi.dir, 'csi-registrar.log'), 'utf8'),
      nodeCallsAtRegistration: calls
        .filter(
          (c) =>
            c.fullMethod.startsWith('/csi.v1.Node/') ||
            c.fullMethod.startsWith('/csi.v1.Identity/'),
        )
        .map((c) => c.method),
    };
  });

  test('a PVC is provisioned, attached, staged and published for a pod, and cleaned up after it', async () => {
    const { pvName, handle } = await boundClaim(cluster, csi, 'data');
    await applyJson(
      cluster,
      podWithClaim(cluster, 'writer', 'data', 'echo hello > /data/file && sleep 3600'),
    );
    const running = await waitForPod(cluster, NS, 'writer', 'Running', isRunning, 120_000);
    const uid = running.metadata?.uid ?? '';

    const csiDir = join(agent.rootDir, 'plugins', 'kubernetes.io', 'csi', csi.driverName);
    const staging = join(csiDir, createHash('sha256').update(handle).digest('hex'), 'globalmount');
    const podVolume = join(agent.rootDir, 'pods', uid, 'volumes', 'kubernetes.io~csi', pvName);
    const target = join(podVolume, 'mount');
    const calls = await csi.calls();
    const stage = calls.find(ok('NodeStageVolume'));
    const publish = calls.find(ok('NodePublishVolume'));
    const controllerPublish = calls.find(ok('ControllerPublishVolume'));
    assert.ok(controllerPublish !== undefined, 'ControllerPublishVolume succeeded');
    assert.ok(stage !== undefined, 'NodeStageVolume succeeded');
    assert.ok(publish !== undefined, 'NodePublishVolume succeeded');
    assert.equal(str(controllerPublish.request['node_id']), csi.nodeId);
    assert.equal(str(stage.request['volume_id']), handle);
    assert.equal(str(stage.request['staging_target_path']), staging);
    assert.equal(str(publish.request['target_path']), target);
    assert.equal(str(publish.request['staging_target_path']), staging);
    // The mock only makes the target directory; the container wrote through the kubelet's
    // bind of it.
    assert.equal((await readFile(join(target, 'file'), 'utf8')).trim(), 'hello');
    const stageData = await readFile(
      join(csiDir, createHash('sha256').update(handle).digest('hex'), 'vol_data.json'),
      'utf8',
    );
    const publishData = await readFile(join(podVolume, 'vol_data.json'), 'utf8');

    const uniqueName = `kubernetes.io/csi/${csi.driverName}^${handle}`;
    const node = await eventually(
      'the node to report the volume in use and attached',
      async () => {
        const n = await getJson<NodeView>(cluster, ['get', 'node', NODE]);
        const inUse = n?.status?.volumesInUse?.includes(uniqueName) === true;
        const attached = n?.status?.volumesAttached?.some((v) => v.name === uniqueName) === true;
        return inUse && attached ? n : undefined;
      },
      30_000,
    );
    const attachments = await getJson<{ items: VolumeAttachmentView[] }>(cluster, [
      'get',
      'volumeattachments',
    ]);
    const va = attachments?.items.find((a) => a.spec?.source?.persistentVolumeName === pvName);
    assert.equal(va?.status?.attached, true);
    assert.equal(va.spec?.nodeName, NODE);
    const mounts = (await readFile('/proc/self/mounts', 'utf8'))
      .split('\n')
      .filter((l) => l.includes(agent.rootDir));

    await cluster.kubectl(['-n', NS, 'delete', 'pod', 'writer', '--wait=true', '--timeout=120s']);
    const unpublish = await csi.waitForCall('NodeUnpublishVolume', ok('NodeUnpublishVolume'));
    const unstage = await csi.waitForCall('NodeUnstageVolume', ok('NodeUnstageVolume'), {
      timeoutMs: 120_000,
    });
    assert.equal(str(unpublish.request['target_path']), target);
    assert.equal(str(unstage.request['staging_target_path']), staging);
    await eventually(
      'the pod directory removed',
      async () => ((await exists(join(agent.rootDir, 'pods', uid))) ? undefined : true),
      60_000,
    );
    const detach = await csi.waitForCall(
      'ControllerUnpublishVolume',
      ok('ControllerUnpublishVolume'),
      { timeoutMs: 120_000 },
    );
    await eventually(
      'volumesInUse and volumesAttached cleared',
      async () => {
        const n = await getJson<NodeView>(cluster, ['get', 'node', NODE]);
        const inUse = n?.status?.volumesInUse?.includes(uniqueName) === true;
        const attached = n?.status?.volumesAttached?.some((v) => v.name === uniqueName) === true;
        return !inUse && !attached ? true : undefined;
      },
      120_000,
    );
    const stagingDirLeft = await exists(staging);
    const stagingParentLeft = await exists(join(staging, '..'));

    await cluster.kubectl(['-n', NS, 'delete', 'pvc', 'data', '--wait=true', '--timeout=60s']);
    await csi.waitForCall('DeleteVolume', ok('DeleteVolume'));

    reference['volume'] = {
      pvName,
      volumeHandle: handle,
      podUid: uid,
      stagingTargetPath: staging,
      targetPath: target,
      stageVolData: JSON.parse(stageData) as unknown,
      publishVolData: JSON.parse(publishData) as unknown,
      node: {
        volumesInUse: node.status?.volumesInUse,
        volumesAttached: node.status?.volumesAttached,
      },
      volumeAttachment: va,
      mountsUnderRootWhileRunning: mounts,
      afterUnstage: { stagingDirLeft, stagingParentLeft },
      calls: (await csi.calls()).map((c) => ({
        method: c.method,
        error: c.error,
        request: c.request,
      })),
      detachCall: detach.request,
    };
  });

  test('a failing NodePublishVolume is a FailedMount, retried; a killed driver comes back with its volumes', async () => {
    await boundClaim(cluster, csi, 'faulty');
    await csi.setFaults({ NodePublishVolume: { code: 'Unavailable', message: 'injected: busy' } });
    await applyJson(cluster, podWithClaim(cluster, 'faulty', 'faulty', 'sleep 3600'));
    const failed = await eventually(
      'a FailedMount event',
      async () => (await podEvents(cluster, NS, 'faulty')).find((e) => e.reason === 'FailedMount'),
      120_000,
    );
    assert.match(failed.message, /code = Unavailable desc = injected: busy/);
    await csi.setFaults({});
    await waitForPod(cluster, NS, 'faulty', 'Running once the fault is gone', isRunning, 180_000);
    const publishes = (await csi.calls()).filter((c) => c.method === 'NodePublishVolume');
    assert.ok(publishes.some((c) => c.error === ''));

    // SIGKILL leaves the socket behind, as a crash would; the driver's state file brings its
    // volumes back, so the node agent can still unpublish and unstage.
    await csi.stopDriver({ kill: true });
    await csi.startDriver();
    await cluster.kubectl(['-n', NS, 'delete', 'pod', 'faulty', '--wait=true', '--timeout=120s']);
    const restarted = (c: CsiCall): boolean => c.generation > 1;
    await csi.waitForCall(
      'NodeUnpublishVolume after the restart',
      (c) => ok('NodeUnpublishVolume')(c) && restarted(c),
      {
        timeoutMs: 120_000,
      },
    );
    await csi.waitForCall(
      'NodeUnstageVolume after the restart',
      (c) => ok('NodeUnstageVolume')(c) && restarted(c),
      {
        timeoutMs: 120_000,
      },
    );
    await csi.waitForCall(
      'ControllerUnpublishVolume after the restart',
      (c) => ok('ControllerUnpublishVolume')(c) && restarted(c),
      { timeoutMs: 120_000 },
    );
    await cluster.kubectl(['-n', NS, 'delete', 'pvc', 'faulty', '--wait=true', '--timeout=60s']);
    reference['fault'] = {
      failedMountEvent: failed,
      nodePublishCalls: publishes.map((c) => ({ error: c.error, code: c.code })),
    };
  });

  test('the driver deregisters when its registration socket goes, and registers again', async () => {
    const listed = async (): Promise<boolean | undefined> => {
      const node = await getJson<CsiNodeView>(cluster, ['get', 'csinode', NODE]);
      return node === undefined
        ? undefined
        : (node.spec?.drivers ?? []).some((d) => d.name === csi.driverName);
    };
    const calls = (await csi.calls()).length;
    await csi.stopRegistrar();
    await eventually(
      'CSINode without the driver',
      async () => ((await listed()) === false ? true : undefined),
      30_000,
    );
    const node = await getJson<NodeView>(cluster, ['get', 'node', NODE]);
    const annotation = node?.metadata?.annotations?.['csi.volume.kubernetes.io/nodeid'];
    await csi.startRegistrar();
    await eventually(
      'CSINode with the driver again',
      async () => ((await listed()) === true ? true : undefined),
      30_000,
    );
    reference['reregistration'] = {
      nodeIdAnnotationAfterDeregistration: annotation ?? null,
      driverCallsAround: (await csi.calls()).slice(calls).map((c) => c.method),
    };
  });

  test('nothing is left behind', async () => {
    await csi.stop();
    await agent.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });
});
