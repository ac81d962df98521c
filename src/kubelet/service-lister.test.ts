import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { describe, it } from 'node:test';
import type { Service } from 'kubernetes-types/core/v1.js';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { inNamespace } from '../kube/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { SERVICES, ServiceLister } from './service-lister.ts';

const svc = (name: string, clusterIP = '10.96.0.10'): Service => ({
  metadata: { name },
  spec: { clusterIP, ports: [{ port: 80 }] },
});

async function until(what: string, condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (condition()) return;
    await new Promise((r) => setImmediate(r));
  }
  assert.fail(`timed out waiting for ${what}`);
}

const names = (ss: Service[]): string[] => ss.map((s) => s.metadata?.name ?? '').sort();

describe('ServiceLister', () => {
  it('lists all namespaces, then follows adds, updates and deletes', async () => {
    const client = new FakeKubeClient();
    await client.create(inNamespace(SERVICES, 'default'), svc('kubernetes', '10.96.0.1'));
    await client.create(inNamespace(SERVICES, 'shop'), svc('web'));
    const lister = new ServiceLister({
      client,
      clock: new FakeClock(),
      logger: new MemoryLogger(),
    });
    assert.equal(lister.hasSynced(), false);
    assert.deepEqual(lister.list('shop'), []);

    const controller = new AbortController();
    const running = lister.run(controller.signal);
    await lister.whenSynced();
    assert.equal(lister.hasSynced(), true);
    assert.deepEqual(names(lister.list('default')), ['kubernetes']);
    assert.deepEqual(names(lister.list('shop')), ['web']);
    assert.deepEqual(lister.list('nowhere'), []);

    const shop = inNamespace(SERVICES, 'shop');
    await client.create(shop, svc('db'));
    await until('db added', () => lister.list('shop').length === 2);
    const web = await client.get<Service>(shop, 'web');
    await client.update(shop, 'web', { ...web, spec: { ...web.spec, clusterIP: '10.96.0.77' } });
    await until('web updated', () =>
      lister.list('shop').some((s) => s.spec?.clusterIP === '10.96.0.77'),
    );
    await client.delete(shop, 'db');
    await until('db deleted', () => lister.list('shop').length === 1);
    assert.deepEqual(names(lister.list('shop')), ['web']);

    controller.abort();
    await running;
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
  });

  it('replaces its view on a relist, dropping services deleted meanwhile', async () => {
    const client = new FakeKubeClient();
    const ns = inNamespace(SERVICES, 'ns');
    await client.create(ns, svc('a'));
    await client.create(ns, svc('b'));
    const lister = new ServiceLister({
      client,
      clock: new FakeClock(),
      logger: new MemoryLogger(),
    });
    const controller = new AbortController();
    const running = lister.run(controller.signal);
    await lister.whenSynced();
    assert.deepEqual(names(lister.list('ns')), ['a', 'b']);
    const lists = (): number => client.calls.filter((c) => c.verb === 'list').length;
    const before = lists();
    // 410 Gone for the running watch: the reflector lists again.
    client.expireWatches();
    await client.delete(ns, 'a');
    await until('relist', () => lists() > before && names(lister.list('ns')).join() === 'b');
    controller.abort();
    await running;
  });
});
