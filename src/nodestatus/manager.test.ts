/**
 * NodeStatusManager's own behaviour beyond the NodeStatusController contract, over the
 * fake API client and the fake CRI on the fake clock: the runtime's conditions in Ready,
 * NodeReady / NodeNotReady events on transitions only, status.images from the runtime,
 * and adopting a Node that already exists.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Node, NodeStatus } from 'kubernetes-types/core/v1.js';
import { FakeCriClient } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { NODES } from '../kube/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { CONTRACT_HOST, NODE_STATUS_CONTRACT } from './contract.ts';
import { NodeStatusManager } from './manager.ts';

const live = (): AbortSignal => new AbortController().signal;

function harness(maxImages = 50, flavor: 'containerd1' | 'containerd2' = 'containerd2') {
  const clock = new FakeClock();
  const client = new FakeKubeClient({ clock });
  const cri = new FakeCriClient({ clock, flavor });
  const recorder = new MemoryEventRecorder();
  const manager = new NodeStatusManager({
    client,
    clock,
    logger: new MemoryLogger(),
    host: CONTRACT_HOST,
    runtime: cri.runtime,
    images: cri.image,
    maxImages,
    recorder,
    taints: [],
    nodeIPs: ['10.0.0.1'],
    kubeletPort: 10250,
    evictionMemoryBytes: 0,
    evictionNodefsFraction: 0,
    healthProblems: () => [],
    ...NODE_STATUS_CONTRACT,
  });
  const ready = () =>
    client.objects<Node>(NODES)[0]?.status?.conditions?.find((c) => c.type === 'Ready');
  return { clock, client, cri, recorder, manager, ready };
}

describe('NodeStatusManager', () => {
  test('a runtime that is not ready makes the node NotReady with its reason', async () => {
    const h = harness();
    h.cri.setCondition('NetworkReady', false, { reason: 'NoCNI', message: 'no network config' });
    await h.manager.syncOnce(live());
    assert.equal(h.ready()?.status, 'False');
    assert.equal(
      h.ready()?.message,
      'container runtime network not ready: NetworkReady=false reason:NoCNI message:no network config',
    );
    h.cri.setCondition('NetworkReady', true);
    assert.equal(await h.manager.syncOnce(live()), true);
    assert.equal(h.ready()?.status, 'True');
  });

  test('NodeReady and NodeNotReady events are recorded on transitions only', async () => {
    const h = harness();
    await h.manager.syncOnce(live());
    await h.clock.advance(300_000);
    await h.manager.syncOnce(live());
    h.cri.setCondition('RuntimeReady', false, { reason: 'Down' });
    await h.manager.syncOnce(live());
    assert.deepEqual(
      h.recorder.events.map((e) => [e.reason, e.message]),
      [
        ['NodeReady', 'Node node-a status is now: NodeReady'],
        ['NodeNotReady', 'Node node-a status is now: NodeNotReady'],
      ],
    );
  });

  test('status.images lists the runtime’s images, largest first, up to nodeStatusMaxImages', async () => {
    const h = harness(1);
    h.cri.addImage('registry.test/big:1', { preloaded: true, sizeBytes: 9_000_000 });
    await h.manager.syncOnce(live());
    const images = h.client.objects<Node>(NODES)[0]?.status?.images ?? [];
    assert.equal(images.length, 1);
    assert.ok(images[0]?.names?.includes('registry.test/big:1') === true, JSON.stringify(images));
    assert.equal(images[0]?.sizeBytes, 9_000_000);

    const none = harness(0);
    await none.manager.syncOnce(live());
    assert.equal(none.client.objects<Node>(NODES)[0]?.status?.images, undefined);
  });

  test('status.runtimeHandlers and status.features come from CRI Status, as upstream reports them', async () => {
    const h = harness();
    await h.manager.syncOnce(live());
    const status = h.client.objects<Node>(NODES)[0]?.status as
      (NodeStatus & { features?: unknown }) | undefined;
    const features = { recursiveReadOnlyMounts: true, userNamespaces: false };
    assert.deepEqual(status?.runtimeHandlers, [
      { name: '', features },
      { name: 'runc', features },
    ]);
    assert.deepEqual(status?.features, { supplementalGroupsPolicy: true });
    // containerd 1.6 reports neither: the Node has neither.
    const old = harness(50, 'containerd1');
    await old.manager.syncOnce(live());
    const oldStatus = old.client.objects<Node>(NODES)[0]?.status as
      (NodeStatus & { features?: unknown }) | undefined;
    assert.equal(oldStatus?.runtimeHandlers, undefined);
    assert.equal(oldStatus?.features, undefined);
  });

  test('a Node that already exists is adopted, keeping what others set', async () => {
    const h = harness();
    await h.client.create<Node>(NODES, {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'node-a', labels: { 'set-by': 'admin' } },
      spec: { podCIDR: '10.244.1.0/24' },
    });
    const node = await h.manager.register(live());
    assert.equal(node.metadata?.labels?.['set-by'], 'admin');
    assert.equal(node.metadata?.labels?.['contract/label'], 'yes');
    assert.equal(node.spec?.podCIDR, '10.244.1.0/24');
    assert.equal(h.client.objects<Node>(NODES).length, 1);
  });
});
