import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { FakeVolumeManager } from './fake.ts';
import { VolumeError } from './types.ts';

const signal = new AbortController().signal;
const pod = (uid: string): Pod => ({ metadata: { uid }, spec: { containers: [] } });

describe('FakeVolumeManager', () => {
  it('records calls and returns the configured volumes and mounts', async () => {
    const f = new FakeVolumeManager();
    f.volumes.set('u1', [
      { name: 'v', hostPath: '/h', readOnly: false, plugin: 'kubernetes.io~empty-dir' },
    ]);
    const m = { containerPath: '/c', hostPath: '/h' } as const;
    f.mounts.set('u1/app', [
      {
        ...m,
        readonly: false,
        selinuxRelabel: false,
        propagation: 0,
        uidMappings: [],
        gidMappings: [],
        recursiveReadOnly: false,
        image: undefined,
        imageSubPath: '',
        mountOptions: [],
      },
    ]);
    const pv = await f.setUpPod(pod('u1'), signal);
    assert.deepEqual([...pv.byName.keys()], ['v']);
    const mounts = await f.containerMounts(pod('u1'), { name: 'app' }, pv, new Map(), signal);
    assert.equal(mounts[0]?.containerPath, '/c');
    assert.deepEqual(
      await f.containerMounts(pod('u1'), { name: 'other' }, pv, new Map(), signal),
      [],
    );
    assert.deepEqual(f.calls, [
      { op: 'setUpPod', uid: 'u1' },
      { op: 'containerMounts', uid: 'u1', container: 'app' },
      { op: 'containerMounts', uid: 'u1', container: 'other' },
    ]);
  });

  it('fails the next call of an operation once, and honours an aborted signal', async () => {
    const f = new FakeVolumeManager();
    f.errors.set(
      'setUpPod',
      new VolumeError('BERTH_VOLUME_SOURCE_NOT_FOUND', 'configmap "c" not found'),
    );
    await assert.rejects(f.setUpPod(pod('u'), signal), /configmap "c" not found/);
    await f.setUpPod(pod('u'), signal);
    const ac = new AbortController();
    ac.abort(new Error('stop'));
    await assert.rejects(f.tearDownPod('u', ac.signal), /stop/);
  });

  it('cleanupOrphans removes the pods set up and not active', async () => {
    const f = new FakeVolumeManager();
    await f.setUpPod(pod('a'), signal);
    await f.setUpPod(pod('b'), signal);
    assert.deepEqual(await f.cleanupOrphans(new Set(['a']), signal), ['b']);
    assert.deepEqual(await f.cleanupOrphans(new Set(['a']), signal), []);
    await f.tearDownPod('a', signal);
    assert.deepEqual(await f.cleanupOrphans(new Set(), signal), []);
  });
});
