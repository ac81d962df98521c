/**
 * LeaseController's own behaviour beyond the NodeLeaseController contract, over the
 * fake API client on the fake clock: the Node as owner once its UID is known, a Lease
 * changed by someone else (a conflict) re-read and renewed, a deleted Lease created
 * again, and retries sooner than the renew interval after a failure.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Lease } from 'kubernetes-types/coordination/v1.js';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { inNamespace, LEASES } from '../kube/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { LEASE_CONTRACT } from './contract.ts';
import { LEASE_NAMESPACE, LeaseController, microTime } from './controller.ts';

const live = (): AbortSignal => new AbortController().signal;
const PATH = inNamespace(LEASES, LEASE_NAMESPACE);

function harness() {
  const clock = new FakeClock();
  const client = new FakeKubeClient({ clock });
  let nodeUID: string | undefined;
  const lease = new LeaseController({
    client,
    clock,
    logger: new MemoryLogger(),
    ...LEASE_CONTRACT,
    nodeUID: () => nodeUID,
  });
  return {
    clock,
    client,
    lease,
    stored: () => client.objects<Lease>(PATH)[0],
    setNodeUID: (uid: string) => {
      nodeUID = uid;
    },
  };
}

describe('LeaseController', () => {
  test('the Node owns the Lease once its UID is known', async () => {
    const h = harness();
    await h.lease.renew(live());
    assert.equal(h.stored()?.metadata?.ownerReferences, undefined, 'no UID yet: no owner');
    h.setNodeUID('node-uid-1');
    await h.lease.renew(live());
    assert.deepEqual(h.stored()?.metadata?.ownerReferences, [
      { apiVersion: 'v1', kind: 'Node', name: 'node-a', uid: 'node-uid-1' },
    ]);
  });

  test('a Lease changed by someone else is re-read and renewed', async () => {
    const h = harness();
    await h.lease.renew(live());
    const theirs = h.stored();
    assert.ok(theirs !== undefined);
    await h.client.update(PATH, 'node-a', {
      ...theirs,
      metadata: { ...theirs.metadata, labels: { 'changed-by': 'someone' } },
    });
    await h.clock.advance(10_000);
    await h.lease.renew(live());
    assert.equal(h.stored()?.spec?.renewTime, microTime(h.clock.now()));
    assert.equal(h.stored()?.metadata?.labels?.['changed-by'], 'someone', 'their change kept');
  });

  test('a deleted Lease is created again', async () => {
    const h = harness();
    await h.lease.renew(live());
    await h.client.delete(PATH, 'node-a');
    await h.clock.advance(10_000);
    await h.lease.renew(live());
    assert.equal(h.stored()?.spec?.renewTime, microTime(h.clock.now()));
  });

  test('after a failed renewal the next try comes sooner than the renew interval', async () => {
    const h = harness();
    h.client.failNext({ error: new Error('apiserver down') });
    const ac = new AbortController();
    const running = h.lease.run(ac.signal);
    for (let i = 0; i < 1000 && h.clock.pending === 0; i++)
      await new Promise((r) => setImmediate(r));
    // The failed renewal's retry is due within 7 s (the back-off's cap), before the 10 s interval.
    await h.clock.advance(7_000);
    for (let i = 0; i < 1000 && h.stored() === undefined; i++)
      await new Promise((r) => setImmediate(r));
    assert.ok(h.stored() !== undefined, 'renewed by the retry');
    ac.abort();
    await running;
  });
});
