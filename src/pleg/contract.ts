/**
 * The Pleg contract: what the pod workers, the pod sync and the kubelet API read of the
 * PLEG. RelistPleg (over the fake CRI runtime) and FakePleg pass it; both run it from
 * contract.test.ts. The evented strategy and relist metrics stay in generic.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { FakeClock } from '../util/clock.ts';
import type { Pleg, PodLifecycleEvent } from './types.ts';

/** The PLEG under test and the runtime under it, driven the same way for both. */
export interface PlegContractSubject {
  readonly pleg: Pleg;
  readonly clock: FakeClock;
  /** Every event the PLEG sent, in order. */
  readonly events: PodLifecycleEvent[];
  /** A ready sandbox for the pod; its ID. */
  runSandbox(uid: string): Promise<string>;
  /** A running container in the pod's sandbox; its ID. */
  startContainer(uid: string, sandboxId: string, name: string): Promise<string>;
  /** The container exits. */
  stopContainer(uid: string, id: string): Promise<void>;
  /** The container is removed from the runtime. */
  removeContainer(uid: string, id: string): Promise<void>;
}

const live = (): AbortSignal => new AbortController().signal;

export function plegContract(name: string, make: () => Promise<PlegContractSubject>): void {
  describe(`Pleg contract: ${name}`, () => {
    test('before a relist nothing is known, and the PLEG is not yet unhealthy', async () => {
      const s = await make();
      await s.runSandbox('uid-a');
      assert.equal(s.pleg.lastRelistAt, 0);
      assert.deepEqual(s.pleg.uids(), []);
      assert.deepEqual(s.pleg.get('uid-a'), { uid: 'uid-a', sandboxes: [], containers: [] });
      assert.equal(s.pleg.healthProblem(), undefined);
    });

    test('a relist publishes the runtime and sends one event per change', async () => {
      const s = await make();
      const sb = await s.runSandbox('uid-a');
      const c = await s.startContainer('uid-a', sb, 'app');
      await s.pleg.relist(live());
      assert.equal(s.pleg.lastRelistAt, s.clock.now());
      assert.deepEqual(s.pleg.uids(), ['uid-a']);
      const snap = s.pleg.get('uid-a');
      assert.deepEqual(
        [snap.sandboxes.map((x) => x.id), snap.containers.map((x) => x.id)],
        [[sb], [c]],
      );
      assert.deepEqual(
        s.events.map((e) => [e.podUID, e.type, e.id]).sort(),
        [
          ['uid-a', 'ContainerStarted', c],
          ['uid-a', 'SandboxChanged', sb],
        ].sort(),
      );
      s.events.length = 0;
      await s.pleg.relist(live());
      assert.deepEqual(s.events, [], 'an unchanged runtime sends no event');
    });

    test('an exit is ContainerDied, a removal ContainerRemoved', async () => {
      const s = await make();
      const sb = await s.runSandbox('uid-a');
      const c = await s.startContainer('uid-a', sb, 'app');
      await s.pleg.relist(live());
      s.events.length = 0;
      await s.stopContainer('uid-a', c);
      await s.pleg.relist(live());
      assert.deepEqual(s.events, [{ podUID: 'uid-a', type: 'ContainerDied', id: c }]);
      await s.removeContainer('uid-a', c);
      await s.pleg.relist(live());
      assert.deepEqual(s.events.at(-1), { podUID: 'uid-a', type: 'ContainerRemoved', id: c });
      assert.deepEqual(s.pleg.get('uid-a').containers, []);
    });

    test('three minutes without a relist is a health problem; a relist clears it', async () => {
      const s = await make();
      await s.pleg.relist(live());
      await s.clock.advance(3 * 60_000);
      assert.equal(s.pleg.healthProblem(), undefined);
      await s.clock.advance(1000);
      assert.match(
        s.pleg.healthProblem() ?? '',
        /^PLEG is not healthy: pleg was last seen active 181s ago/,
      );
      await s.pleg.relist(live());
      assert.equal(s.pleg.healthProblem(), undefined);
    });

    test('run() stops when its signal aborts', async () => {
      const s = await make();
      const ac = new AbortController();
      const running = s.pleg.run(ac.signal);
      ac.abort();
      await running;
    });
  });
}
