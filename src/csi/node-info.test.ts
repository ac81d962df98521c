import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import type { Node } from 'kubernetes-types/core/v1.js';
import type { CSINode } from 'kubernetes-types/storage/v1.js';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { CSINODES, KubeApiError, NODES } from '../kube/types.ts';
import type { Clock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { ANNOTATION_NODE_ID, KubeCsiNodeInfoManager } from './node-info.ts';

const signal = new AbortController().signal;
/** Retries' back-off sleeps record their delay and return at once. */
const slept: number[] = [];
const instantClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  sleep: (ms) => {
    slept.push(ms);
    return Promise.resolve();
  },
};

describe('KubeCsiNodeInfoManager', () => {
  let kube: FakeKubeClient;
  let nim: KubeCsiNodeInfoManager;
  let uid: string;
  const node = (): Promise<Node> => kube.get<Node>(NODES, 'n1');
  const csiNode = (): Promise<CSINode> => kube.get<CSINode>(CSINODES, 'n1');

  beforeEach(async () => {
    kube = new FakeKubeClient();
    const created = await kube.create<Node>(NODES, {
      metadata: { name: 'n1', labels: { 'kubernetes.io/hostname': 'n1' } },
    });
    uid = created.metadata?.uid ?? '';
    nim = new KubeCsiNodeInfoManager({
      client: kube,
      nodeName: 'n1',
      clock: instantClock,
      logger: new MemoryLogger(),
    });
  });

  test('initialize creates an empty CSINode owned by the Node, once', async () => {
    await nim.initialize(signal);
    await nim.initialize(signal);
    const c = await csiNode();
    assert.deepEqual(c.spec.drivers, []);
    assert.deepEqual(c.metadata?.ownerReferences, [
      { apiVersion: 'v1', kind: 'Node', name: 'n1', uid },
    ]);
    assert.equal(
      kube.calls.filter((x) => x.verb === 'create' && x.resource === 'csinodes').length,
      1,
    );
  });

  test('a CSINode owned by an older Node of the same name is replaced', async () => {
    await kube.create<CSINode>(CSINODES, {
      metadata: {
        name: 'n1',
        ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: 'n1', uid: 'old-uid' }],
      },
      spec: { drivers: [{ name: 'stale.csi', nodeID: 'x' }] },
    });
    await nim.initialize(signal);
    const c = await csiNode();
    assert.equal(c.metadata?.ownerReferences?.[0]?.uid, uid);
    assert.deepEqual(c.spec.drivers, []);
  });

  test('a CSINode whose driver list the API serves as null is read as empty', async () => {
    await kube.create<CSINode>(CSINODES, {
      metadata: {
        name: 'n1',
        ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: 'n1', uid }],
      },
      spec: { drivers: null as unknown as [] },
    });
    await nim.installDriver('a.csi', 'node-a', 0, {}, signal);
    assert.deepEqual(
      (await csiNode()).spec.drivers.map((d) => d.name),
      ['a.csi'],
    );
    await kube.update<CSINode>(CSINODES, 'n1', {
      ...(await csiNode()),
      spec: { drivers: null as unknown as [] },
    });
    await nim.uninstallDriver('a.csi', signal);
  });

  test('installDriver writes the CSINode driver, the nodeid annotation and topology labels', async () => {
    await nim.installDriver('b.csi', 'node-b', 0, {}, signal);
    await nim.installDriver(
      'a.csi',
      'node-a',
      16,
      { 'topology.a.csi/zone': 'z1', 'topology.a.csi/rack': 'r1' },
      signal,
    );
    const c = await csiNode();
    assert.deepEqual(c.spec.drivers, [
      { name: 'b.csi', nodeID: 'node-b', topologyKeys: [] },
      {
        name: 'a.csi',
        nodeID: 'node-a',
        topologyKeys: ['topology.a.csi/rack', 'topology.a.csi/zone'],
        allocatable: { count: 16 },
      },
    ]);
    const n = await node();
    assert.equal(
      n.metadata?.annotations?.[ANNOTATION_NODE_ID],
      '{"a.csi":"node-a","b.csi":"node-b"}',
    );
    assert.equal(n.metadata?.labels?.['topology.a.csi/zone'], 'z1');
    assert.equal(n.metadata?.labels?.['kubernetes.io/hostname'], 'n1');
    // The same install again writes nothing.
    const writes = kube.calls.filter((x) => x.verb !== 'get').length;
    await nim.installDriver(
      'a.csi',
      'node-a',
      16,
      { 'topology.a.csi/zone': 'z1', 'topology.a.csi/rack': 'r1' },
      signal,
    );
    assert.equal(kube.calls.filter((x) => x.verb !== 'get').length, writes);
  });

  test("an empty node ID, a topology collision and a bad annotation are refused with upstream's errors", async () => {
    await assert.rejects(
      nim.installDriver('a.csi', '', 0, {}, signal),
      /driverNodeID must not be empty/,
    );
    await kube.patch(
      NODES,
      'n1',
      { metadata: { labels: { 'topology.a.csi/zone': 'z9' } } },
      'merge',
    );
    await assert.rejects(
      nim.installDriver('a.csi', 'node-a', 0, { 'topology.a.csi/zone': 'z1' }, signal),
      /error updating Node object with CSI driver node info: .*detected topology value collision: driver reported "topology.a.csi\/zone":"z1" but existing label is "topology.a.csi\/zone":"z9"/,
    );
    await kube.patch(
      NODES,
      'n1',
      { metadata: { annotations: { [ANNOTATION_NODE_ID]: '{bad' } } },
      'merge',
    );
    await assert.rejects(
      nim.installDriver('b.csi', 'node-b', 0, {}, signal),
      /failed to parse node's "csi.volume.kubernetes.io\/nodeid" annotation value/,
    );
  });

  test('a conflicting write is retried', async () => {
    kube.failNext({
      verb: 'patch',
      resource: 'nodes',
      error: new KubeApiError(409, 'Conflict', 'the object has been modified'),
    });
    slept.length = 0;
    await nim.installDriver('a.csi', 'node-a', 0, {}, signal);
    assert.equal((await node()).metadata?.annotations?.[ANNOTATION_NODE_ID], '{"a.csi":"node-a"}');
    assert.deepEqual(slept, [10]);
  });

  test('uninstallDriver removes the driver from the CSINode and the annotation (the key when last)', async () => {
    await nim.installDriver('a.csi', 'node-a', 0, { 'topology.a.csi/zone': 'z1' }, signal);
    await nim.installDriver('b.csi', 'node-b', 0, {}, signal);
    await nim.uninstallDriver('a.csi', signal);
    assert.deepEqual(
      (await csiNode()).spec.drivers.map((d) => d.name),
      ['b.csi'],
    );
    assert.equal((await node()).metadata?.annotations?.[ANNOTATION_NODE_ID], '{"b.csi":"node-b"}');
    await nim.uninstallDriver('b.csi', signal);
    await nim.uninstallDriver('b.csi', signal);
    assert.deepEqual((await csiNode()).spec.drivers, []);
    assert.equal((await node()).metadata?.annotations?.[ANNOTATION_NODE_ID], undefined);
    // Upstream leaves topology labels in place.
    assert.equal((await node()).metadata?.labels?.['topology.a.csi/zone'], 'z1');
  });
});
