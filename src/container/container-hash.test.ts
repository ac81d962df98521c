/**
 * hashContainer: values match the upstream kubelet's (vectors computed with
 * k8s.io/kubernetes v1.37.2's HashContainer, the first one from its own unit test), and
 * the hash depends on name and image only.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container } from 'kubernetes-types/core/v1.js';
import { hashContainer, normalizeContainerHash, sameContainerHash } from './container-hash.ts';

describe('hashContainer', () => {
  const vectors: [string, string, string][] = [
    ['test_container', 'foo/image:v1', '8e45cbd0'],
    ['main', 'berth.local/busybox:1.37', '1cc68a90'],
    ['', '', 'edd67cc4'],
    // Go's encoder escapes HTML characters and the line/paragraph separators.
    ['a<b>&c', 'x\u2028y\u2029z', 'd7efc1de'],
    ['ctl\b\f\n\r\t\u0001\u001f\u007f', 'ünïcødé/日本:v1', '36cb51a3'],
    ['emoji', '😀@sha256:abc', 'c1a0a276'],
    // Sum32 0x08f2cabc: printed without the leading zero.
    ['main', 'busybox:1', '8f2cabc'],
  ];
  for (const [name, image, want] of vectors) {
    test(`matches upstream for ${JSON.stringify(name)} / ${JSON.stringify(image)}`, () => {
      assert.equal(hashContainer({ name, image }), want);
    });
  }

  test('a missing image hashes like an empty one', () => {
    assert.equal(hashContainer({ name: '' }), 'edd67cc4');
  });

  test('ignores every field but name and image, and key order', () => {
    const base: Container = { name: 'test_container', image: 'foo/image:v1' };
    const full: Container = {
      resources: { limits: { cpu: '1' }, requests: { memory: '1Gi' } },
      env: [{ name: 'A', value: 'b' }],
      args: ['/bin/sh', '-c', 'echo abc'],
      command: ['/bin/testcmd'],
      ports: [{ containerPort: 8001 }],
      image: 'foo/image:v1',
      livenessProbe: { exec: { command: ['true'] } },
      name: 'test_container',
    };
    assert.equal(hashContainer(full), hashContainer(base));
    assert.equal(hashContainer(full), '8e45cbd0');
  });

  test('changes with the image and with the name', () => {
    const base = hashContainer({ name: 'main', image: 'busybox:1' });
    assert.notEqual(hashContainer({ name: 'main', image: 'busybox:2' }), base);
    assert.notEqual(hashContainer({ name: 'other', image: 'busybox:1' }), base);
  });

  test('is lower-case hex without leading zeros', () => {
    for (let i = 0; i < 200; i++) {
      const hash = hashContainer({ name: `c${i}`, image: `img:${i}` });
      assert.match(hash, /^[1-9a-f][0-9a-f]{0,7}$/);
    }
  });
});

describe('sameContainerHash / normalizeContainerHash', () => {
  test('compares numerically like upstream ParseUint(…, 16)', () => {
    assert.equal(sameContainerHash('08e45cbd0', '8e45cbd0'), true);
    assert.equal(sameContainerHash('8E45CBD0', '8e45cbd0'), true);
    assert.equal(sameContainerHash('8e45cbd1', '8e45cbd0'), false);
  });

  test('a garbled or missing hash never matches', () => {
    for (const bad of ['', 'xyz', '0x12', '-1', '12345678901234567', ' 8e45cbd0']) {
      assert.equal(sameContainerHash(bad, bad), false, bad);
      assert.equal(normalizeContainerHash(bad), undefined, bad);
    }
    assert.equal(normalizeContainerHash(undefined), undefined);
    assert.equal(normalizeContainerHash('00ABC'), 'abc');
  });
});
