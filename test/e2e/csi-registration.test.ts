/**
 * CSI driver registration on berth with the real components of test/harness/csi.ts:
 * upstream's CSI mock driver and the registration helper that serves
 * pluginregistration.Registration on <root>/plugins_registry/. berth's plugin manager
 * must find the socket, register the driver (CSINode, the nodeid annotation, the
 * topology label), deregister it when the registrar's socket goes, register it again
 * when it returns, and refuse a registrar offering no CSI 1.x version, telling it why.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { csiBinaries, startCsi, type Csi } from '../harness/csi.ts';
import { eventually, getJson } from '../harness/kube-helpers.ts';
import { ComponentProcess } from '../harness/process.ts';

const NODE = 'csi-reg-berth';
const NODE_ID = 'mock-node-id-1';
/** The mock's topology segment (upstream's mock service TopologyKey / TopologyValue). */
const TOPOLOGY_KEY = 'io.kubernetes.storage.mock/node';
const TOPOLOGY_VALUE = 'some-mock-node';
const ANNOTATION = 'csi.volume.kubernetes.io/nodeid';

interface CsiNodeObject {
  metadata?: { ownerReferences?: { kind?: string; name?: string; uid?: string }[] };
  spec?: {
    drivers?: {
      name?: string;
      nodeID?: string;
      topologyKeys?: string[];
      allocatable?: { count?: number };
    }[];
  };
}

interface NodeObject {
  metadata?: {
    uid?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
}

describe('CSI driver registration through the plugin manager', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let csi: Csi;

  const csiNode = (): Promise<CsiNodeObject | undefined> =>
    getJson<CsiNodeObject>(cluster, ['get', 'csinode', NODE]);
  const node = (): Promise<NodeObject | undefined> =>
    getJson<NodeObject>(cluster, ['get', 'node', NODE]);
  const driverEntry = async (name: string) =>
    (await csiNode())?.spec?.drivers?.find((d) => d.name === name);

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    berth = await startBerth(cluster, { nodeName: NODE });
  });

  after(async () => {
    await csi?.stop();
    await berth?.stop();
    await cluster?.stop();
  });

  test('berth creates an empty CSINode owned by its Node at start', async () => {
    const owned = await eventually(
      `CSINode ${NODE}`,
      async () => {
        const [c, n] = await Promise.all([csiNode(), node()]);
        const owner = c?.metadata?.ownerReferences?.find((r) => r.kind === 'Node');
        return c !== undefined && owner !== undefined && n?.metadata?.uid !== undefined
          ? { c, owner, n }
          : undefined;
      },
      60_000,
    );
    assert.equal(owned.owner.name, NODE);
    assert.equal(owned.owner.uid, owned.n.metadata?.uid);
    assert.deepEqual(owned.c.spec?.drivers ?? [], []);
  });

  test('the driver registers within seconds of its registration socket appearing', async () => {
    const started = Date.now();
    csi = await startCsi(cluster, {
      nodeName: NODE,
      rootDir: berth.dir,
      nodeId: NODE_ID,
      sidecars: false,
      mock: { enableTopology: true, attachLimit: 7 },
    });
    const entry = await eventually(
      'the CSINode listing the driver',
      () => driverEntry(csi.driverName),
      30_000,
      100,
    );
    const seconds = (Date.now() - started) / 1000;
    assert.ok(seconds < 15, `registered after ${seconds.toFixed(1)} s`);
    assert.deepEqual(entry, {
      name: csi.driverName,
      nodeID: NODE_ID,
      topologyKeys: [TOPOLOGY_KEY],
      allocatable: { count: 7 },
    });
    const n = await node();
    assert.deepEqual(JSON.parse(n?.metadata?.annotations?.[ANNOTATION] ?? '{}'), {
      [csi.driverName]: NODE_ID,
    });
    assert.equal(n?.metadata?.labels?.[TOPOLOGY_KEY], TOPOLOGY_VALUE);
    // The registrar was told it is registered.
    await eventually(
      'the registrar told registered=true',
      async () =>
        (await readFile(join(csi.dir, 'csi-registrar.log'), 'utf8')).includes(
          'NotifyRegistrationStatus: registered=true',
        ) || undefined,
      10_000,
    );
    // berth asked the driver for its node info.
    assert.ok((await csi.calls()).some((c) => c.method === 'NodeGetInfo' && c.error === ''));
  });

  test('the driver deregisters when the registrar stops, and registers again when it returns', async () => {
    await csi.stopRegistrar();
    await eventually(
      'the driver gone from the CSINode and the annotation',
      async () => {
        const [entry, n] = await Promise.all([driverEntry(csi.driverName), node()]);
        return entry === undefined && n?.metadata?.annotations?.[ANNOTATION] === undefined
          ? true
          : undefined;
      },
      30_000,
      100,
    );
    const started = Date.now();
    await csi.startRegistrar();
    await eventually(
      'the driver back in the CSINode',
      () => driverEntry(csi.driverName),
      30_000,
      100,
    );
    assert.ok(Date.now() - started < 15_000);
    const n = await node();
    assert.deepEqual(JSON.parse(n?.metadata?.annotations?.[ANNOTATION] ?? '{}'), {
      [csi.driverName]: NODE_ID,
    });
  });

  test('a registrar offering no CSI 1.x version is refused and told why; berth logs it', async () => {
    const bin = await csiBinaries();
    const name = 'unsupported.csi.berth.dev';
    const logFile = join(csi.dir, 'unsupported-registrar.log');
    const registrar = ComponentProcess.start({
      name: `csi-registrar-unsupported-${NODE}`,
      command: bin.registrar,
      args: [
        `--driver-name=${name}`,
        `--csi-address=${csi.driverSocket}`,
        `--socket=${join(berth.dir, 'plugins_registry', 'unsupported-reg.sock')}`,
        '--versions=2.0.0,0.3.0',
      ],
      logFile,
    });
    try {
      const refusal = await eventually(
        'NotifyRegistrationStatus(registered=false)',
        async () =>
          (await readFile(logFile, 'utf8').catch(() => ''))
            .split('\n')
            .find((l) => l.includes('registered=false')),
        30_000,
        200,
      );
      assert.match(
        refusal,
        /RegisterPlugin error -- plugin validation failed with err: validation failed for CSI Driver unsupported\.csi\.berth\.dev/,
      );
      assert.match(refusal, /None of the versions specified/);
      const berthLog = await readFile(berth.logFile, 'utf8');
      assert.match(berthLog, /Plugin validation failed/);
      assert.match(berthLog, /unsupported\.csi\.berth\.dev/);
      assert.equal(await driverEntry(name), undefined);
      // The good driver is untouched.
      assert.notEqual(await driverEntry(csi.driverName), undefined);
    } finally {
      await registrar.stop(5000);
    }
  });
});
