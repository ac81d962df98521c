/** The PluginManager lifecycle contract: the real manager and the fake both pass it. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PluginManager } from './types.ts';

export function pluginManagerContract(name: string, make: () => PluginManager): void {
  describe(`PluginManager contract: ${name}`, () => {
    test('NEW -> RUNNING -> STOPPED; start twice or after stop throws; stop is idempotent', async () => {
      const pm = make();
      assert.equal(pm.state, 'NEW');
      assert.deepEqual(pm.registered(), []);
      await pm.start(new AbortController().signal);
      assert.equal(pm.state, 'RUNNING');
      await assert.rejects(pm.start(new AbortController().signal), /Cannot start/);
      await pm.stop();
      await pm.stop();
      assert.equal(pm.state, 'STOPPED');
      await assert.rejects(pm.start(new AbortController().signal), /Cannot start/);
    });
  });
}
