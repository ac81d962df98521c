import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeCsiDriverRegistry, FakeCsiNodeInfoManager } from '../csi/fake.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { FakePluginManager } from '../pluginmanager/fake.ts';
import type { PluginHandler } from '../pluginmanager/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { pluginManagerLoop } from './plugin-wiring.ts';

test('the plugin manager starts once the Node is registered, with the CSI handler, and stops with the kubelet', async () => {
  let registered!: () => void;
  const whenRegistered = new Promise<void>((r) => {
    registered = r;
  });
  const manager = new FakePluginManager();
  let handlers: ReadonlyMap<string, PluginHandler> | undefined;
  const nodeInfo = new FakeCsiNodeInfoManager();
  const registry = new FakeCsiDriverRegistry();
  const ac = new AbortController();
  const loop = pluginManagerLoop(
    { csiDrivers: registry, nodeStatus: { whenRegistered: () => whenRegistered } },
    { nodeName: 'n1', rootDir: '/var/lib/kubelet' },
    {
      kube: new FakeKubeClient(),
      clock: new FakeClock(),
      logger: new MemoryLogger(),
      nodeInfo,
      newPluginManager: (h) => {
        handlers = h;
        return manager;
      },
    },
  )(ac.signal);
  await new Promise<void>((r) => setImmediate(r));
  assert.equal(manager.state, 'NEW');
  assert.equal(nodeInfo.initialized, false);
  registered();
  await new Promise<void>((r) => setImmediate(r));
  assert.equal(manager.state, 'RUNNING');
  assert.equal(nodeInfo.initialized, true);
  assert.deepEqual([...(handlers?.keys() ?? [])], ['CSIPlugin']);
  // The CSI handler registers into the kubelet's store.
  await handlers?.get('CSIPlugin')?.register('a.csi', '/csi/a.sock', ['1.0.0'], ac.signal);
  assert.deepEqual(registry.drivers(), ['a.csi']);
  ac.abort();
  await loop;
  assert.equal(manager.state, 'STOPPED');
});
