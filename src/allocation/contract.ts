/** The ResourceState contract: the checkpointed state and the in-memory fake both pass it. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ResourceState } from './types.ts';

export function resourceStateContract(name: string, make: () => Promise<ResourceState>): void {
  describe(`ResourceState contract: ${name}`, () => {
    test('set, get and uids; what get returns is a copy', async () => {
      const s = await make();
      assert.equal(s.get('u1'), undefined);
      await s.set('u1', { containerResources: { c: { limits: { cpu: '1' } } } });
      assert.deepEqual(s.get('u1'), { containerResources: { c: { limits: { cpu: '1' } } } });
      const copy = s.get('u1');
      (copy?.containerResources['c']?.limits as Record<string, string>)['cpu'] = '2';
      assert.equal(s.get('u1')?.containerResources['c']?.limits?.['cpu'], '1');
      assert.deepEqual(s.uids(), ['u1']);
    });

    test('setContainer keeps the other containers; setPodLevel keeps the containers', async () => {
      const s = await make();
      await s.set('u1', { containerResources: { a: {}, b: { requests: { memory: '1Mi' } } } });
      await s.setContainer('u1', 'a', { requests: { cpu: '100m' } });
      await s.setPodLevel('u1', { limits: { cpu: '2' } });
      assert.deepEqual(s.get('u1'), {
        containerResources: {
          a: { requests: { cpu: '100m' } },
          b: { requests: { memory: '1Mi' } },
        },
        podLevelResources: { limits: { cpu: '2' } },
      });
      await s.setPodLevel('u1', undefined);
      assert.equal(s.get('u1')?.podLevelResources, undefined);
    });

    test('remove and removeOrphans forget pods', async () => {
      const s = await make();
      await s.set('u1', { containerResources: {} });
      await s.set('u2', { containerResources: {} });
      await s.set('u3', { containerResources: {} });
      s.remove('u1');
      s.removeOrphans(new Set(['u3']));
      assert.deepEqual(s.uids(), ['u3']);
    });
  });
}
