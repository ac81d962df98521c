import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { MemoryEventRecorder } from '../events/types.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { decodeStaticPod } from '../podsource/static-pod.ts';
import { PodWorkers } from '../podworkers/pod-workers.ts';
import type { PodSyncer } from '../podworkers/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { StaticPods } from './static-pods.ts';

function manifest(command: string): Pod {
  return decodeStaticPod(
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'web' },
      spec: { containers: [{ name: 'c', image: 'busybox:1', command: [command] }] },
    }),
    { nodeName: 'n1', source: '/m/web.yaml', kind: 'file' },
  ).pod;
}

const tick = async (): Promise<void> => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};

describe('StaticPods', () => {
  test('a changed manifest starts its new pod only once the old one has stopped', async () => {
    const clock = new FakeClock();
    let release = (): void => undefined;
    const stopped = new Promise<void>((r) => {
      release = r;
    });
    const synced: string[] = [];
    const syncer: PodSyncer = {
      syncPod: (pod) => {
        synced.push(pod.metadata?.uid ?? '');
        return Promise.resolve({});
      },
      syncTerminatingPod: () => stopped,
      syncTerminatedPod: () => Promise.resolve(),
    };
    const workers = new PodWorkers({ syncer, clock, logger: new MemoryLogger() });
    const forgotten: string[] = [];
    const statics = new StaticPods(
      { staticPodPath: '/m' },
      {
        nodeName: 'n1',
        kube: new FakeKubeClient(),
        recorder: new MemoryEventRecorder(),
        clock,
        logger: new MemoryLogger(),
        podWorkers: () => workers,
        nodeUID: () => 'node-uid',
        apiSynced: () => true,
        onMirror: () => undefined,
        forget: (uid) => forgotten.push(uid),
        consumer: {
          add: (pod) => {
            workers.update(pod, 'add');
          },
          update: (pod) => {
            workers.update(pod, 'update');
          },
          remove: (pod) => {
            workers.update(pod, 'remove');
          },
        },
      },
    );
    const v1 = manifest('one');
    const v2 = manifest('two');
    statics.config.set('file', [v1]);
    await tick();
    assert.deepEqual(synced, [v1.metadata?.uid]);
    statics.config.set('file', [v2]);
    await tick();
    assert.equal(workers.state(v1.metadata?.uid ?? ''), 'terminating');
    assert.equal(workers.state(v2.metadata?.uid ?? ''), undefined, 'held back');
    release();
    await tick();
    assert.equal(workers.state(v1.metadata?.uid ?? ''), undefined);
    assert.equal(workers.state(v2.metadata?.uid ?? ''), 'syncing');
    assert.deepEqual(synced, [v1.metadata?.uid, v2.metadata?.uid]);
    assert.deepEqual(forgotten, [v1.metadata?.uid]);
    await workers.close();
  });
});
