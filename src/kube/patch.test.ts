/** Patch application and selectors used by the fake client. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { jsonPatch, mergePatch, PatchError, strategicMergePatch } from './patch.ts';
import {
  matchesFields,
  matchesLabels,
  parseFieldSelector,
  parseLabelSelector,
} from './selectors.ts';

describe('mergePatch (RFC 7386)', () => {
  test('merges objects, deletes on null, replaces lists', () => {
    assert.deepEqual(
      mergePatch({ a: { b: 1, c: 2 }, l: [1, 2] }, { a: { b: null, d: 3 }, l: [3] }),
      { a: { c: 2, d: 3 }, l: [3] },
    );
  });
  test('does not modify its inputs', () => {
    const target = { a: { b: 1 } };
    mergePatch(target, { a: { b: 2 } });
    assert.deepEqual(target, { a: { b: 1 } });
  });
});

describe('strategicMergePatch', () => {
  const pod = {
    status: {
      conditions: [
        { type: 'Ready', status: 'False' },
        { type: 'Initialized', status: 'True' },
      ],
    },
    spec: {
      containers: [
        { name: 'a', image: 'x', command: ['sh'] },
        { name: 'b', image: 'y' },
      ],
    },
  };

  test('merges lists by their merge key', () => {
    const out = strategicMergePatch(pod, {
      status: {
        conditions: [
          { type: 'Ready', status: 'True' },
          { type: 'PodScheduled', status: 'True' },
        ],
      },
      spec: { containers: [{ name: 'a', image: 'z' }] },
    }) as typeof pod;
    assert.deepEqual(out.status.conditions, [
      { type: 'Ready', status: 'True' },
      { type: 'Initialized', status: 'True' },
      { type: 'PodScheduled', status: 'True' },
    ]);
    assert.deepEqual(out.spec.containers[0], { name: 'a', image: 'z', command: ['sh'] });
    assert.equal(out.spec.containers.length, 2);
  });

  test('honours $setElementOrder, $patch: delete and $patch: replace', () => {
    const ordered = strategicMergePatch(pod, {
      status: {
        '$setElementOrder/conditions': [{ type: 'Initialized' }, { type: 'Ready' }],
        conditions: [{ type: 'Ready', status: 'True' }],
      },
    }) as typeof pod;
    assert.deepEqual(
      ordered.status.conditions.map((c) => c.type),
      ['Initialized', 'Ready'],
    );
    const deleted = strategicMergePatch(pod, {
      spec: { containers: [{ name: 'b', $patch: 'delete' }] },
    }) as typeof pod;
    assert.deepEqual(
      deleted.spec.containers.map((c) => c.name),
      ['a'],
    );
    const replaced = strategicMergePatch(pod, {
      spec: { containers: [{ name: 'c' }, { $patch: 'replace' }] },
    }) as typeof pod;
    assert.deepEqual(replaced.spec.containers, [{ name: 'c' }]);
    assert.deepEqual(strategicMergePatch({ a: { b: 1 } }, { a: { c: 2, $patch: 'replace' } }), {
      a: { c: 2 },
    });
  });

  test('merges finalizers as a set and deletes from it by directive', () => {
    const meta = { metadata: { finalizers: ['a', 'b'] } };
    assert.deepEqual(strategicMergePatch(meta, { metadata: { finalizers: ['b', 'c'] } }), {
      metadata: { finalizers: ['a', 'b', 'c'] },
    });
    assert.deepEqual(
      strategicMergePatch(meta, { metadata: { '$deleteFromPrimitiveList/finalizers': ['a'] } }),
      { metadata: { finalizers: ['b'] } },
    );
  });

  test('replaces lists it has no merge key for, and rejects unknown directives', () => {
    assert.deepEqual(strategicMergePatch({ args: ['a', 'b'] }, { args: ['c'] }), { args: ['c'] });
    assert.throws(() => strategicMergePatch({}, { $patch: 'frobnicate' }), PatchError);
  });
});

describe('jsonPatch (RFC 6902)', () => {
  test('add, remove, replace, move, copy, test', () => {
    const out = jsonPatch({ a: { b: 1 }, l: [1, 3], 'x/y': 0 }, [
      { op: 'add', path: '/l/1', value: 2 },
      { op: 'add', path: '/l/-', value: 4 },
      { op: 'replace', path: '/a/b', value: 5 },
      { op: 'copy', from: '/a', path: '/c' },
      { op: 'move', from: '/x~1y', path: '/z' },
      { op: 'remove', path: '/a' },
      { op: 'test', path: '/c/b', value: 5 },
    ]);
    assert.deepEqual(out, { l: [1, 2, 3, 4], c: { b: 5 }, z: 0 });
  });
  test('a failed test or a missing path rejects the whole patch', () => {
    assert.throws(() => jsonPatch({ a: 1 }, [{ op: 'test', path: '/a', value: 2 }]), PatchError);
    assert.throws(() => jsonPatch({ a: 1 }, [{ op: 'replace', path: '/b', value: 2 }]), PatchError);
    assert.throws(() => jsonPatch({ a: 1 }, { op: 'add' }), PatchError);
  });
});

describe('selectors', () => {
  test('label selectors: equality, inequality, sets, existence', () => {
    const labels = { app: 'web', tier: 'front' };
    const match = (s: string): boolean => matchesLabels(labels, parseLabelSelector(s));
    assert.ok(match('app=web'));
    assert.ok(match('app==web,tier!=back'));
    assert.ok(match('app in (web, api),tier notin (back)'));
    assert.ok(match('app,!missing'));
    assert.ok(!match('app=api'));
    assert.ok(!match('!app'));
    assert.ok(!match('tier in (back)'));
    assert.ok(matchesLabels(undefined, parseLabelSelector('')));
    assert.throws(() => parseLabelSelector('a=b=c'));
  });
  test('field selectors over dotted paths; a missing field reads as empty', () => {
    const pod = { metadata: { name: 'p', namespace: 'ns' }, spec: { nodeName: 'n1' } };
    const match = (s: string): boolean => matchesFields(pod, parseFieldSelector(s));
    assert.ok(match('metadata.name=p,spec.nodeName=n1'));
    assert.ok(match('spec.nodeName!=n2'));
    assert.ok(match('status.phase='));
    assert.ok(!match('metadata.namespace=other'));
    assert.throws(() => parseFieldSelector('spec.nodeName'));
  });
});
