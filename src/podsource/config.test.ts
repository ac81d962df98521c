import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { PodConfig } from './config.ts';
import { decodeStaticPod } from './static-pod.ts';

function staticPod(name: string, command: string[], file = `/m/${name}.yaml`): Pod {
  return decodeStaticPod(
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name },
      spec: { containers: [{ name: 'c', image: 'busybox:1', command }] },
    }),
    { nodeName: 'n1', source: file, kind: 'file' },
  ).pod;
}

function setup(sources: ('api' | 'file' | 'http')[] = ['api', 'file']) {
  const events: string[] = [];
  let apiSynced = false;
  const mirrors: string[] = [];
  const config = new PodConfig({
    sources,
    clock: new FakeClock(Date.UTC(2026, 0, 1, 0, 0, 0, 123)),
    logger: new MemoryLogger(),
    apiSynced: () => apiSynced,
    consumer: {
      add: (p) => events.push(`add ${p.metadata?.name ?? ''}`),
      update: (p) => events.push(`update ${p.metadata?.name ?? ''}`),
      remove: (p) => events.push(`remove ${p.metadata?.name ?? ''}`),
    },
    onMirrorChange: (name) => mirrors.push(name),
  });
  return {
    config,
    events,
    mirrors,
    syncApi: () => {
      apiSynced = true;
    },
  };
}

describe('PodConfig', () => {
  test('a file source set is diffed: adds, removes before adds, unchanged pods left alone', () => {
    const { config, events } = setup();
    const a = staticPod('a', ['sleep', '1']);
    const b = staticPod('b', ['sleep', '1']);
    config.set('file', [a, b]);
    config.set('file', [a, b]);
    const b2 = staticPod('b', ['sleep', '2']);
    config.set('file', [a, b2]);
    assert.deepEqual(events, ['add a-n1', 'add b-n1', 'remove b-n1', 'add b-n1']);
    assert.deepEqual([...config.pods().keys()].sort(), [a.metadata?.uid, b2.metadata?.uid].sort());
  });

  test('source and first-seen annotations, the seen time kept across reads', () => {
    const { config } = setup();
    config.set('file', [staticPod('a', ['x'])]);
    const [pod] = config.staticPods();
    assert.equal(pod?.metadata?.annotations?.['kubernetes.io/config.source'], 'file');
    assert.equal(
      pod?.metadata?.annotations?.['kubernetes.io/config.seen'],
      '2026-01-01T00:00:00.123000000Z',
    );
  });

  test('synced only once every source has reported, an empty set included', () => {
    const { config, syncApi } = setup(['api', 'file', 'http']);
    assert.equal(config.synced, false);
    syncApi();
    config.set('file', []);
    assert.equal(config.synced, false);
    config.set('http', []);
    assert.equal(config.synced, true);
  });

  test('mirror pods from the API are kept apart, never handed over to run', () => {
    const { config, events, mirrors } = setup();
    const mirror: Pod = {
      metadata: {
        name: 'a-n1',
        namespace: 'default',
        uid: 'm1',
        annotations: { 'kubernetes.io/config.mirror': 'h' },
      },
    };
    config.api.add(mirror);
    config.api.add({ metadata: { name: 'api-pod', namespace: 'default', uid: 'u1' } });
    assert.deepEqual(events, ['add api-pod']);
    assert.equal(config.mirrorPods().get('default/a-n1')?.metadata?.uid, 'm1');
    assert.deepEqual([...config.pods().keys()], ['u1']);
    // A stale removal (the mirror was already recreated) does not forget the new one.
    config.api.add({ ...mirror, metadata: { ...mirror.metadata, uid: 'm2' } });
    config.api.remove(mirror);
    assert.equal(config.mirrorPods().get('default/a-n1')?.metadata?.uid, 'm2');
    assert.deepEqual(mirrors, ['default/a-n1', 'default/a-n1', 'default/a-n1']);
  });
});
