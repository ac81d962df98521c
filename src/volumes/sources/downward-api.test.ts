/** downwardAPI volumes: fieldRef and resourceFieldRef items through the resolver. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { VolumeError } from '../types.ts';
import { downwardApiPayload, resolveDownwardApiVolume } from './downward-api.ts';
import { fakeDownward, plain, podWith } from './testing.ts';

describe('downwardApiPayload', () => {
  test('writes pod fields and container resources with item and default modes', () => {
    const payload = downwardApiPayload(
      podWith({}),
      [
        { path: 'name', fieldRef: { fieldPath: 'metadata.name' } },
        { path: 'meta/labels', fieldRef: { fieldPath: 'metadata.labels' }, mode: 0o400 },
        {
          path: 'cpu',
          resourceFieldRef: { containerName: 'c', resource: 'limits.cpu', divisor: '1m' },
        },
      ],
      0o644,
      fakeDownward,
    );
    assert.deepEqual(plain(payload), {
      name: ['web', '644'],
      'meta/labels': ['app="web"\ntier="a"', '400'],
      cpu: ['c:limits.cpu:1m', '644'],
    });
  });

  test('a field the resolver refuses is an error naming the field', () => {
    assert.throws(
      () =>
        downwardApiPayload(
          podWith({}),
          [{ path: 'x', fieldRef: { fieldPath: 'spec.bogus' } }],
          0o644,
          fakeDownward,
        ),
      (err: unknown) =>
        err instanceof VolumeError &&
        err.code === 'BERTH_VOLUME_INVALID' &&
        err.message.startsWith('Unable to extract field spec.bogus:'),
    );
  });

  test('refuses a resourceFieldRef without containerName and escaping paths', () => {
    assert.throws(
      () =>
        downwardApiPayload(
          podWith({}),
          [{ path: 'cpu', resourceFieldRef: { resource: 'limits.cpu' } }],
          0o644,
          fakeDownward,
        ),
      /containerName is required/,
    );
    assert.throws(
      () =>
        downwardApiPayload(
          podWith({}),
          [{ path: '../name', fieldRef: { fieldPath: 'metadata.name' } }],
          0o644,
          fakeDownward,
        ),
      (err: unknown) => err instanceof VolumeError && err.code === 'BERTH_VOLUME_PATH_ESCAPE',
    );
  });
});

test('resolveDownwardApiVolume: disk medium, downward-api plugin, 0644 default', () => {
  const resolved = resolveDownwardApiVolume(
    podWith({}),
    { items: [{ path: 'ns', fieldRef: { fieldPath: 'metadata.namespace' } }] },
    fakeDownward,
  );
  assert.equal(resolved.medium, 'disk');
  assert.equal(resolved.plugin, 'kubernetes.io~downward-api');
  assert.deepEqual(plain(resolved.payload), { ns: ['ns', '644'] });
});
