/**
 * configMap volumes: all keys (data and binaryData), items with paths and modes,
 * defaultMode, optional, missing keys and path escapes.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ConfigMap } from 'kubernetes-types/core/v1.js';
import { VolumeError } from '../types.ts';
import { configMapPayload, resolveConfigMapVolume } from './configmap.ts';
import { MapObjectReader, plain, podWith } from './testing.ts';

const cm: ConfigMap = {
  metadata: { name: 'cfg', namespace: 'ns' },
  data: { 'app.conf': 'port=80', empty: '' },
  binaryData: { blob: Buffer.from([0, 1, 2, 255]).toString('base64') },
};
const signal = new AbortController().signal;

function rejectsCode(fn: () => unknown, code: string, message?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof VolumeError, String(err));
    assert.equal(err.code, code);
    if (message !== undefined) assert.match(err.message, message);
    return true;
  });
}

describe('configMapPayload', () => {
  test('projects every data and binaryData key with the default mode', () => {
    const payload = configMapPayload('cfg', cm, { defaultMode: 0o644, optional: false });
    assert.deepEqual(
      { ...plain(payload), blob: undefined },
      { 'app.conf': ['port=80', '644'], empty: ['', '644'], blob: undefined },
    );
    assert.deepEqual([...(payload.get('blob')?.data ?? [])], [0, 1, 2, 255]);
  });

  test('with items, projects only those, to their paths, with per-item modes', () => {
    const payload = configMapPayload('cfg', cm, {
      items: [
        { key: 'app.conf', path: 'etc/app.conf', mode: 0o400 },
        { key: 'empty', path: 'e' },
      ],
      defaultMode: 0o640,
      optional: false,
    });
    assert.deepEqual(plain(payload), { 'etc/app.conf': ['port=80', '400'], e: ['', '640'] });
  });

  test('a missing configMap is empty when optional, else not found', () => {
    assert.equal(
      configMapPayload('gone', undefined, { defaultMode: 0o644, optional: true }).size,
      0,
    );
    rejectsCode(
      () => configMapPayload('gone', undefined, { defaultMode: 0o644, optional: false }),
      'BERTH_VOLUME_SOURCE_NOT_FOUND',
      /^configmap "gone" not found$/,
    );
  });

  test('a missing item key is skipped when optional, else an error naming the key', () => {
    const items = [
      { key: 'nope', path: 'n' },
      { key: 'empty', path: 'e' },
    ];
    const optional = configMapPayload('cfg', cm, { items, defaultMode: 0o644, optional: true });
    assert.deepEqual(Object.keys(plain(optional)), ['e']);
    rejectsCode(
      () => configMapPayload('cfg', cm, { items, defaultMode: 0o644, optional: false }),
      'BERTH_VOLUME_SOURCE_ERROR',
      /^configmap references non-existent config key: nope$/,
    );
  });

  test('refuses item paths that are absolute, contain .. or start with ..', () => {
    for (const path of ['/etc/passwd', '../x', 'a/../../x', 'a/..', '..data', '']) {
      rejectsCode(
        () =>
          configMapPayload('cfg', cm, {
            items: [{ key: 'empty', path }],
            defaultMode: 0o644,
            optional: false,
          }),
        'BERTH_VOLUME_PATH_ESCAPE',
      );
    }
    // Dots inside a name are fine.
    const ok = configMapPayload('cfg', cm, {
      items: [{ key: 'empty', path: 'a..b/.c' }],
      defaultMode: 0o644,
      optional: false,
    });
    assert.deepEqual(Object.keys(plain(ok)), ['a..b/.c']);
  });

  test('refuses a key that would escape when projected without items', () => {
    const bad: ConfigMap = { metadata: { name: 'bad' }, data: { '..data': 'x' } };
    rejectsCode(
      () => configMapPayload('bad', bad, { defaultMode: 0o644, optional: false }),
      'BERTH_VOLUME_PATH_ESCAPE',
    );
  });
});

describe('resolveConfigMapVolume', () => {
  test('reads the configMap in the pod namespace; disk medium, configmap plugin, 0644 default', async () => {
    const objects = new MapObjectReader().set('configmap', 'ns', cm);
    const pod = podWith({});
    const resolved = await resolveConfigMapVolume(pod, { name: 'cfg' }, objects, signal);
    assert.equal(resolved.medium, 'disk');
    assert.equal(resolved.plugin, 'kubernetes.io~configmap');
    assert.equal(resolved.payload.get('app.conf')?.mode, 0o644);
    assert.deepEqual(objects.reads, ['configmap/ns/cfg']);
  });

  test('a read failure other than not found names the object', async () => {
    const objects = new MapObjectReader();
    objects.failWith = new Error('forbidden');
    await assert.rejects(
      resolveConfigMapVolume(podWith({}), { name: 'cfg' }, objects, signal),
      (err: unknown) =>
        err instanceof VolumeError &&
        err.code === 'BERTH_VOLUME_SOURCE_ERROR' &&
        err.message === "Couldn't get configmap ns/cfg: forbidden",
    );
  });
});
