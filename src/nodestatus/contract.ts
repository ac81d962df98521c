/**
 * The NodeStatusController contract: what start-up, the plugin wiring and node shutdown
 * rely on. NodeStatusManager (over the fake API client and the fake CRI, on the fake
 * clock) and FakeNodeStatusManager pass it; both run it from contract.test.ts. The
 * runtime's conditions, images, pressure events and registration back-off are the real
 * manager's own (manager.test.ts, build.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Node, NodeCondition } from 'kubernetes-types/core/v1.js';
import type { FakeClock } from '../util/clock.ts';
import type { HostInfoProvider } from './host-info.ts';
import type { NodeStatusController } from './types.ts';

export interface NodeStatusContractSubject {
  readonly ctl: NodeStatusController;
  readonly clock: FakeClock;
  /** The Node as the API (or memory) stores it, undefined when there is none. */
  stored(): Node | undefined;
  /** Deletes the stored Node (as `kubectl delete node` would). */
  deleteStored(): Promise<void>;
  /** Makes the next sync fail. */
  failNextSync(): void;
  /** Health problems the controller reads (mutable). */
  readonly problems: string[];
}

/** What every factory must build the controller with. */
export const NODE_STATUS_CONTRACT = {
  nodeName: 'node-a',
  labels: { 'contract/label': 'yes' },
  maxPods: 110,
  updateFrequencyMs: 10_000,
  reportFrequencyMs: 300_000,
} as const;

/** Fixed host facts: 4 cores, 8 GiB, 100 GiB of disk. */
export const CONTRACT_HOST: HostInfoProvider = {
  capacity: () =>
    Promise.resolve({
      cpu: 4,
      memoryBytes: 8 * 2 ** 30,
      ephemeralStorageBytes: 100 * 2 ** 30,
      hugepages: {},
    }),
  systemInfo: () =>
    Promise.resolve({
      machineID: 'machine',
      systemUUID: 'uuid',
      bootID: 'boot',
      kernelVersion: '6.1.0',
      osImage: 'Test Linux',
      operatingSystem: 'linux',
      architecture: 'amd64',
    }),
};

const live = (): AbortSignal => new AbortController().signal;

function ready(node: Node | undefined): NodeCondition | undefined {
  return node?.status?.conditions?.find((c) => c.type === 'Ready');
}

/** Waits (without timers) until `cond` holds; a bounded number of turns of the loop. */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 10_000 && !cond(); i++) await new Promise((r) => setImmediate(r));
  assert.ok(cond(), `never happened: ${what}`);
}

export function nodeStatusContract(name: string, make: () => NodeStatusContractSubject): void {
  describe(`NodeStatusController contract: ${name}`, () => {
    test('before registration the Node is the one built from this host', async () => {
      const s = make();
      // Read through a function: an assertion on s.ctl.node would narrow it for good.
      const current = (): Node | undefined => s.ctl.node;
      assert.equal(current(), undefined);
      let registered = false;
      const waiting = s.ctl.whenRegistered(live()).then(() => (registered = true));
      const local = await s.ctl.buildLocal(live());
      assert.ok(current() === local);
      assert.deepEqual(
        [
          local.metadata?.name,
          local.metadata?.labels?.['kubernetes.io/hostname'],
          local.metadata?.labels?.['contract/label'],
          local.status?.capacity?.['cpu'],
          local.status?.allocatable?.['pods'],
        ],
        ['node-a', 'node-a', 'yes', '4', '110'],
      );
      assert.equal(s.stored(), undefined, 'nothing registered');
      await new Promise((r) => setImmediate(r));
      assert.equal(registered, false);
      await s.ctl.register(live());
      await waiting;
      assert.ok((current()?.metadata?.uid ?? '') !== '', 'now the API’s Node, with its UID');
    });

    test('register creates the Node and whenRegistered resolves', async () => {
      const s = make();
      const node = await s.ctl.register(live());
      assert.equal(node.metadata?.name, 'node-a');
      assert.equal(s.stored()?.metadata?.labels?.['contract/label'], 'yes');
      assert.ok((s.ctl.node?.metadata?.uid ?? '') !== '', 'the API’s Node, with its UID');
      await s.ctl.whenRegistered(live());
      const ac = new AbortController();
      ac.abort(new Error('stop'));
      await assert.rejects(s.ctl.whenRegistered(ac.signal), /stop/);
    });

    test('syncOnce posts the status once per change or report period', async () => {
      const s = make();
      assert.equal(await s.ctl.syncOnce(live()), true, 'registers, then posts');
      assert.equal(ready(s.stored())?.status, 'True');
      assert.equal(s.stored()?.status?.capacity?.['memory'], '8388608Ki');
      assert.equal(await s.ctl.syncOnce(live()), false, 'nothing changed');
      await s.clock.advance(10_000);
      assert.equal(await s.ctl.syncOnce(live()), false, 'nothing changed, report not due');
      s.problems.push('PLEG is not healthy');
      assert.equal(await s.ctl.syncOnce(live()), true);
      assert.deepEqual(
        [ready(s.stored())?.status, ready(s.stored())?.reason, ready(s.stored())?.message],
        ['False', 'KubeletNotReady', 'PLEG is not healthy'],
      );
      await s.clock.advance(300_000);
      assert.equal(await s.ctl.syncOnce(live()), true, 'the report period passed');
      assert.equal(ready(s.ctl.node)?.status, 'False', 'node is what was posted');
    });

    test('a deleted Node is registered again, and a failed sync rejects once', async () => {
      const s = make();
      await s.ctl.syncOnce(live());
      await s.deleteStored();
      assert.equal(s.stored(), undefined);
      assert.equal(await s.ctl.syncOnce(live()), true);
      assert.equal(ready(s.stored())?.status, 'True');
      s.failNextSync();
      await assert.rejects(s.ctl.syncOnce(live()));
      await s.clock.advance(300_000);
      assert.equal(await s.ctl.syncOnce(live()), true);
    });

    test('run syncs at once and every update period, past a failure, until aborted', async () => {
      const s = make();
      const ac = new AbortController();
      const running = s.ctl.run(ac.signal);
      await until(() => ready(s.stored())?.status === 'True' && s.clock.pending > 0, 'first sync');
      s.failNextSync();
      s.problems.push('runtime down');
      // The failed round, then at most one more update period.
      await s.clock.advance(10_000);
      await until(() => s.clock.pending > 0, 'the failed round');
      await s.clock.advance(10_000);
      await until(() => ready(s.stored())?.status === 'False', 'the change posted');
      ac.abort();
      await running;
    });
  });
}
