/** secret volumes: base64-decoded data, items, modes, optional, tmpfs medium. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Secret } from 'kubernetes-types/core/v1.js';
import { VolumeError } from '../types.ts';
import { resolveSecretVolume, secretPayload } from './secret.ts';
import { MapObjectReader, plain, podWith } from './testing.ts';

const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
const secret: Secret = {
  metadata: { name: 'creds', namespace: 'ns' },
  data: { user: b64('admin'), password: b64('s3cret') },
};
const signal = new AbortController().signal;

describe('secretPayload', () => {
  test('decodes every key', () => {
    assert.deepEqual(
      plain(secretPayload('creds', secret, { defaultMode: 0o600, optional: false })),
      {
        user: ['admin', '600'],
        password: ['s3cret', '600'],
      },
    );
  });

  test('items with modes; a missing key is an error unless optional', () => {
    const items = [{ key: 'password', path: 'db/pw', mode: 0o400 }];
    assert.deepEqual(
      plain(secretPayload('creds', secret, { items, defaultMode: 0o644, optional: false })),
      {
        'db/pw': ['s3cret', '400'],
      },
    );
    const missing = [{ key: 'token', path: 't' }];
    assert.equal(
      secretPayload('creds', secret, { items: missing, defaultMode: 0o644, optional: true }).size,
      0,
    );
    assert.throws(
      () => secretPayload('creds', secret, { items: missing, defaultMode: 0o644, optional: false }),
      /^VolumeError: references non-existent secret key: token$/,
    );
  });

  test('a missing secret: empty when optional, else secret "x" not found', () => {
    assert.equal(secretPayload('x', undefined, { defaultMode: 0o644, optional: true }).size, 0);
    assert.throws(
      () => secretPayload('x', undefined, { defaultMode: 0o644, optional: false }),
      (err: unknown) =>
        err instanceof VolumeError &&
        err.code === 'BERTH_VOLUME_SOURCE_NOT_FOUND' &&
        err.message === 'secret "x" not found',
    );
  });

  test('refuses an escaping item path', () => {
    assert.throws(
      () =>
        secretPayload('creds', secret, {
          items: [{ key: 'user', path: '../../etc/shadow' }],
          defaultMode: 0o644,
          optional: false,
        }),
      (err: unknown) => err instanceof VolumeError && err.code === 'BERTH_VOLUME_PATH_ESCAPE',
    );
  });
});

describe('resolveSecretVolume', () => {
  test('memory medium, secret plugin, defaultMode 0644 when unset', async () => {
    const objects = new MapObjectReader().set('secret', 'ns', secret);
    const resolved = await resolveSecretVolume(
      podWith({}),
      { secretName: 'creds' },
      objects,
      signal,
    );
    assert.equal(resolved.medium, 'memory');
    assert.equal(resolved.plugin, 'kubernetes.io~secret');
    assert.equal(resolved.payload.get('user')?.mode, 0o644);
  });

  test('a missing non-optional secret fails, an optional one is empty', async () => {
    const objects = new MapObjectReader();
    await assert.rejects(
      resolveSecretVolume(podWith({}), { secretName: 'nope' }, objects, signal),
      /secret "nope" not found/,
    );
    const empty = await resolveSecretVolume(
      podWith({}),
      { secretName: 'nope', optional: true },
      objects,
      signal,
    );
    assert.equal(empty.payload.size, 0);
  });
});
