import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Node, Pod } from 'kubernetes-types/core/v1.js';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { inNamespace, NODES, PODS } from '../kube/types.ts';
import { PodConfig } from '../podsource/config.ts';
import { decodeStaticPod } from '../podsource/static-pod.ts';
import { StatusManager } from '../status/manager.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { MirrorPodManager } from './manager.ts';
import { MirrorClient } from './mirror-client.ts';

const pods = inNamespace(PODS, 'default');

function staticPod(command: string[]): Pod {
  return decodeStaticPod(
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'web' },
      spec: { containers: [{ name: 'c', image: 'busybox:1', command }] },
    }),
    { nodeName: 'n1', source: '/m/web.yaml', kind: 'file' },
  ).pod;
}

async function setup(onMirror?: (uid: string) => void) {
  const client = new FakeKubeClient();
  const clock = new FakeClock();
  const logger = new MemoryLogger();
  const node = await client.create<Node>(NODES, { metadata: { name: 'n1' } });
  let synced = false;
  const config = new PodConfig({
    sources: ['api', 'file'],
    clock,
    logger,
    apiSynced: () => synced,
    consumer: { add: () => undefined, update: () => undefined, remove: () => undefined },
  });
  const mirrors = new MirrorPodManager({
    client: new MirrorClient({
      client,
      nodeName: 'n1',
      nodeUID: () => node.metadata?.uid,
      logger,
    }),
    pods: config,
    clock,
    logger,
    ...(onMirror !== undefined && { onMirror }),
  });
  /** What the API source would report: the API's pods. */
  const relist = async (): Promise<void> => {
    const { items } = await client.list<Pod>(pods);
    for (const m of [...config.mirrorPods().values()]) config.api.remove(m);
    for (const p of items) config.api.add(p);
    synced = true;
  };
  return { client, config, mirrors, node, relist };
}

describe('MirrorPodManager', () => {
  test('creates a mirror with the hash, the static annotations and a Node owner', async () => {
    const { client, config, mirrors, node } = await setup();
    const pod = staticPod(['sleep', '1']);
    config.set('file', [pod]);
    await mirrors.reconcile(new AbortController().signal);
    const mirror = await client.get<Pod>(pods, 'web-n1');
    const hash = pod.metadata?.uid;
    assert.equal(mirror.metadata?.annotations?.['kubernetes.io/config.mirror'], hash);
    assert.equal(mirror.metadata?.annotations?.['kubernetes.io/config.hash'], hash);
    assert.equal(mirror.metadata?.annotations?.['kubernetes.io/config.source'], 'file');
    assert.notEqual(mirror.metadata?.uid, hash);
    assert.deepEqual(mirror.metadata?.ownerReferences, [
      { apiVersion: 'v1', kind: 'Node', name: 'n1', uid: node.metadata?.uid, controller: true },
    ]);
  });

  test('a mirror being deleted, or with a stale hash, is replaced; an orphan is deleted', async () => {
    const { client, config, mirrors, relist } = await setup();
    const signal = new AbortController().signal;
    config.set('file', [staticPod(['sleep', '1'])]);
    await mirrors.reconcile(signal);
    await relist();
    const first = await client.get<Pod>(pods, 'web-n1');
    // kubectl delete: the API marks it; berth deletes it at once and makes it again.
    config.api.update({
      ...first,
      metadata: { ...first.metadata, deletionTimestamp: '2026-01-01T00:00:00Z' },
    });
    await mirrors.reconcile(signal);
    const second = await client.get<Pod>(pods, 'web-n1');
    assert.notEqual(second.metadata?.uid, first.metadata?.uid);
    await relist();
    // The manifest changed: a new hash, so the mirror is replaced.
    const changed = staticPod(['sleep', '2']);
    config.set('file', [changed]);
    await mirrors.reconcile(signal);
    const third = await client.get<Pod>(pods, 'web-n1');
    assert.equal(
      third.metadata?.annotations?.['kubernetes.io/config.mirror'],
      changed.metadata?.uid,
    );
    await relist();
    // The manifest is gone: the mirror goes.
    config.set('file', []);
    await mirrors.reconcile(signal);
    await assert.rejects(client.get<Pod>(pods, 'web-n1'), /not found/);
  });

  test('no orphan is deleted before every source has reported', async () => {
    const { client, config, mirrors } = await setup();
    await client.create<Pod>(pods, {
      metadata: { name: 'old-n1', annotations: { 'kubernetes.io/config.mirror': 'h' } },
      spec: { containers: [{ name: 'c', image: 'i' }] },
    });
    const { items } = await client.list<Pod>(pods);
    for (const p of items) config.api.add(p);
    await mirrors.reconcile(new AbortController().signal);
    assert.ok(await client.get<Pod>(pods, 'old-n1'));
  });

  test("the static pod's status is written to its mirror, with the mirror's UID", async () => {
    const late: { status?: StatusManager } = {};
    const { client, config, mirrors, relist } = await setup((uid) => {
      late.status?.resend(uid);
    });
    const pod = staticPod(['sleep', '1']);
    config.set('file', [pod]);
    const status = new StatusManager({
      client,
      clock: new FakeClock(),
      logger: new MemoryLogger(),
      target: (p) => mirrors.statusTarget(p),
    });
    late.status = status;
    const [running] = config.staticPods();
    assert.ok(running);
    status.set(running, { phase: 'Running', podIP: '10.0.0.9' });
    await status.drain();
    // No mirror yet: nothing written, and nothing lost.
    assert.equal(client.calls.filter((c) => c.verb === 'patch').length, 0);
    await mirrors.reconcile(new AbortController().signal);
    await relist();
    // The API source shows the mirror: the next round passes that on, and the status goes.
    await mirrors.reconcile(new AbortController().signal);
    await status.drain();
    const mirror = await client.get<Pod>(pods, 'web-n1');
    assert.equal(mirror.status?.phase, 'Running');
    assert.equal(mirror.status?.podIP, '10.0.0.9');
    assert.equal(status.get(running.metadata?.uid ?? '')?.phase, 'Running');
  });
});
