import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Secret } from 'kubernetes-types/core/v1.js';
import { credentialsFor } from './credentials.ts';
import { InvalidImageReferenceError, parseImageReference } from './reference.ts';

describe('image references', () => {
  test('no tag and no digest means :latest; the registry is docker.io unless a host is named', () => {
    assert.deepEqual(parseImageReference('busybox'), {
      domain: 'docker.io',
      path: 'busybox',
      normalized: 'busybox:latest',
    });
    const r = parseImageReference('127.0.0.1:5000/berth/busybox:1.35');
    assert.equal(r.domain, '127.0.0.1:5000');
    assert.equal(r.path, 'berth/busybox');
    assert.equal(r.tag, '1.35');
    assert.equal(r.normalized, '127.0.0.1:5000/berth/busybox:1.35');
    assert.equal(parseImageReference('library/nginx').domain, 'docker.io');
    assert.equal(parseImageReference('localhost/x').domain, 'localhost');
    const digest = `registry.k8s.io/pause@sha256:${'a'.repeat(64)}`;
    assert.equal(parseImageReference(digest).normalized, digest);
  });

  test('malformed references are rejected with the upstream wording', () => {
    for (const bad of [
      '',
      'UPPER/case',
      'busybox:',
      'a//b',
      'bad image',
      'busybox:tag:again',
      '-leading',
    ]) {
      assert.throws(
        () => parseImageReference(bad),
        (e: unknown) =>
          e instanceof InvalidImageReferenceError && /invalid reference format/.test(e.message),
        bad,
      );
    }
  });
});

function dockerSecret(auths: Record<string, unknown>): Secret {
  return {
    type: 'kubernetes.io/dockerconfigjson',
    data: { '.dockerconfigjson': Buffer.from(JSON.stringify({ auths })).toString('base64') },
  };
}

describe('pull secret credentials', () => {
  test('matches by registry host, from auth or username/password, in secret order', () => {
    const secrets = [
      dockerSecret({
        'https://127.0.0.1:5000/v1/': { auth: Buffer.from('u1:p:1').toString('base64') },
      }),
      dockerSecret({
        '127.0.0.1:5000': { username: 'u2', password: 'p2' },
        'other.io': { username: 'x', password: 'y' },
      }),
    ];
    assert.deepEqual(credentialsFor(secrets, '127.0.0.1:5000'), [
      { username: 'u1', password: 'p:1', serverAddress: '127.0.0.1:5000' },
      { username: 'u2', password: 'p2', serverAddress: '127.0.0.1:5000' },
    ]);
    assert.deepEqual(credentialsFor(secrets, 'docker.io'), []);
  });

  test('docker.io aliases match each other; malformed secrets are skipped', () => {
    const secrets: Secret[] = [
      {
        type: 'kubernetes.io/dockerconfigjson',
        data: { '.dockerconfigjson': Buffer.from('not json').toString('base64') },
      },
      dockerSecret({ 'https://index.docker.io/v1/': { username: 'hub', password: 'pw' } }),
    ];
    assert.equal(credentialsFor(secrets, 'docker.io')[0]?.username, 'hub');
  });
});
