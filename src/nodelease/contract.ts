/**
 * The NodeLeaseController contract: what start-up and the node's heartbeat rely on.
 * LeaseController (over the fake API client, on the fake clock) and FakeLeaseController
 * pass it; both run it from contract.test.ts. Conflicts, owner references and back-off
 * are the real controller's own behaviour (test/faults/clock-jump.test.ts and its unit tests).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Lease } from 'kubernetes-types/coordination/v1.js';
import type { FakeClock } from '../util/clock.ts';
import { microTime } from './controller.ts';
import type { NodeLeaseController } from './types.ts';

export interface LeaseContractSubject {
  readonly lease: NodeLeaseController;
  readonly clock: FakeClock;
  /** The Lease as stored (API or memory), undefined when there is none. */
  stored(): Lease | undefined;
  /** Makes the next renewal fail. */
  failNextRenewal(): void;
}

/** The node and lease duration every factory must use. */
export const LEASE_CONTRACT = { nodeName: 'node-a', leaseDurationSeconds: 40 } as const;

const live = (): AbortSignal => new AbortController().signal;

/** Waits (without timers) until `cond` holds; a bounded number of turns of the loop. */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 10_000 && !cond(); i++) await new Promise((r) => setImmediate(r));
  assert.ok(cond(), `never happened: ${what}`);
}

export function nodeLeaseContract(name: string, make: () => LeaseContractSubject): void {
  describe(`NodeLeaseController contract: ${name}`, () => {
    test('renew stores kube-node-lease/<node>, held by the node, renewed now', async () => {
      const s = make();
      assert.equal(s.lease.renewIntervalMs, 10_000);
      const got = await s.lease.renew(live());
      for (const l of [got, s.stored()]) {
        assert.ok(l !== undefined);
        assert.deepEqual(
          [
            l.metadata?.name,
            l.metadata?.namespace,
            l.spec?.holderIdentity,
            l.spec?.leaseDurationSeconds,
            l.spec?.renewTime,
          ],
          ['node-a', 'kube-node-lease', 'node-a', 40, microTime(s.clock.now())],
        );
      }
      await s.clock.advance(1234);
      await s.lease.renew(live());
      assert.equal(s.stored()?.spec?.renewTime, microTime(s.clock.now()));
    });

    test('a failed renewal rejects and the next one succeeds', async () => {
      const s = make();
      await s.lease.renew(live());
      s.failNextRenewal();
      await assert.rejects(s.lease.renew(live()));
      await s.clock.advance(1);
      await s.lease.renew(live());
      assert.equal(s.stored()?.spec?.renewTime, microTime(s.clock.now()));
    });

    test('run renews at once and every renew interval, and stops on abort', async () => {
      const s = make();
      const ac = new AbortController();
      const running = s.lease.run(ac.signal);
      const start = microTime(s.clock.now());
      // Renewed, and asleep until the next interval (advancing earlier would be lost).
      await until(
        () => s.stored()?.spec?.renewTime === start && s.clock.pending > 0,
        'the first renewal',
      );
      await s.clock.advance(10_000);
      const next = microTime(s.clock.now());
      await until(() => s.stored()?.spec?.renewTime === next, 'the renewal one interval later');
      ac.abort();
      await running;
    });
  });
}
