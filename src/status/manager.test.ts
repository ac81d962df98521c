import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod, PodStatus } from 'kubernetes-types/core/v1.js';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { inNamespace, KubeApiError, PODS } from '../kube/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { StatusManager, statusPatch } from './manager.ts';

const pods = inNamespace(PODS, 'ns');

async function setup(): Promise<{ client: FakeKubeClient; manager: StatusManager; pod: Pod }> {
  const client = new FakeKubeClient();
  const pod = await client.create<Pod>(pods, {
    metadata: { name: 'p', namespace: 'ns' },
    spec: { containers: [{ name: 'main', image: 'busybox:1' }] },
  });
  const manager = new StatusManager({ client, clock: new FakeClock(), logger: new MemoryLogger() });
  return { client, manager, pod };
}

function ours(ready: 'True' | 'False', ip: string): PodStatus {
  return {
    phase: 'Running',
    conditions: [
      { type: 'Ready', status: ready },
      { type: 'ContainersReady', status: ready },
      { type: 'PodScheduled', status: 'True' },
    ],
    podIP: ip,
    podIPs: [{ ip }],
  };
}

describe('StatusManager', () => {
  test('a resize condition it wrote is deleted later, even when handed a pod object from before', async () => {
    const { client, manager, pod } = await setup();
    const inProgress = { type: 'PodResizeInProgress', status: 'True' };
    const withResize = ours('True', '10.88.0.5');
    manager.set(pod, { ...withResize, conditions: [...(withResize.conditions ?? []), inProgress] });
    await manager.drain();
    assert.ok(
      (await client.get<Pod>(pods, 'p')).status?.conditions?.some(
        (c) => c.type === inProgress.type,
      ),
    );
    // The sync hands over the source's pod, whose status never saw the condition.
    manager.set(pod, ours('True', '10.88.0.5'));
    await manager.drain();
    const stored = await client.get<Pod>(pods, 'p');
    assert.equal(
      stored.status?.conditions?.some((c) => c.type === inProgress.type),
      false,
    );
  });

  test('writes the status subresource as a strategic merge patch', async () => {
    const { client, manager, pod } = await setup();
    manager.set(pod, ours('True', '10.88.0.5'));
    await manager.drain();
    const stored = await client.get<Pod>(pods, 'p');
    assert.equal(stored.status?.phase, 'Running');
    assert.equal(stored.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'True');
    const patch = client.calls.find((c) => c.verb === 'patch');
    assert.equal(patch?.subresource, 'status');
    assert.equal(patch?.patchType, 'strategic');
  });

  test('a condition another controller set meanwhile is neither dropped nor overwritten', async () => {
    const { client, manager, pod } = await setup();
    // berth read the pod while the gate was False ...
    const stale: Pod = {
      ...pod,
      status: { conditions: [{ type: 'example.com/gate', status: 'False' }] },
    };
    // ... and the gate's controller has set it True since.
    await client.patch<Pod>(
      pods,
      'p',
      { status: { conditions: [{ type: 'example.com/gate', status: 'True' }] } },
      'strategic',
      { subresource: 'status' },
    );
    const computed = ours('False', '10.88.0.5');
    manager.set(stale, {
      ...computed,
      conditions: [...(computed.conditions ?? []), { type: 'example.com/gate', status: 'False' }],
    });
    await manager.drain();
    const conditions = (await client.get<Pod>(pods, 'p')).status?.conditions ?? [];
    assert.equal(conditions.find((c) => c.type === 'example.com/gate')?.status, 'True');
    assert.equal(conditions.find((c) => c.type === 'Ready')?.status, 'False');
  });

  test('a new sandbox IP replaces the old one rather than joining it', async () => {
    const { client, manager, pod } = await setup();
    manager.set(pod, ours('True', '10.88.0.5'));
    await manager.drain();
    manager.set(pod, ours('True', '10.88.0.9'));
    await manager.drain();
    const stored = await client.get<Pod>(pods, 'p');
    assert.deepEqual(stored.status?.podIPs, [{ ip: '10.88.0.9' }]);
    assert.equal(stored.status?.podIP, '10.88.0.9');
  });

  test('a pod of the same name with another UID is not written', async () => {
    const { client, manager, pod } = await setup();
    await client.delete(pods, 'p');
    await client.create<Pod>(pods, {
      metadata: { name: 'p', namespace: 'ns' },
      spec: { containers: [{ name: 'main', image: 'busybox:1' }] },
    });
    manager.set(pod, ours('True', '10.88.0.5'));
    await manager.drain();
    assert.equal((await client.get<Pod>(pods, 'p')).status?.phase, undefined);
    assert.equal(manager.get(pod.metadata?.uid ?? ''), undefined);
  });

  test('a failed write waits for the batch sync rather than retrying at once', async () => {
    const client = new FakeKubeClient();
    const pod = await client.create<Pod>(pods, {
      metadata: { name: 'p', namespace: 'ns' },
      spec: { containers: [{ name: 'main', image: 'busybox:1' }] },
    });
    const clock = new FakeClock();
    const manager = new StatusManager({ client, clock, logger: new MemoryLogger() });
    const patches = (): number => client.calls.filter((c) => c.verb === 'patch').length;
    client.failNext({
      verb: 'patch',
      times: 1000,
      error: new KubeApiError(500, 'InternalError', 'etcdserver: request timed out'),
    });
    manager.set(pod, ours('True', '10.88.0.5'));
    await manager.drain();
    assert.equal(patches(), 1);
    const stop = new AbortController();
    const running = manager.run(stop.signal);
    await clock.advance(10_000);
    await manager.drain();
    assert.equal(patches(), 2);
    stop.abort();
    await running;
  });

  test('statusPatch sends only the kubelet conditions and replace directives for IP lists', () => {
    const patch = statusPatch({
      conditions: [
        { type: 'Initialized', status: 'True' },
        { type: 'DisruptionTarget', status: 'True' },
      ],
      hostIPs: [{ ip: '127.0.0.1' }],
    });
    assert.deepEqual(patch['conditions'], [{ type: 'Initialized', status: 'True' }]);
    assert.deepEqual(patch['hostIPs'], [{ ip: '127.0.0.1' }, { $patch: 'replace' }]);
    assert.equal('podIPs' in patch, false);
  });
});
