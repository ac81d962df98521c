/**
 * Clock jumps (issue #32, item 6), at the unit level: the kernel clock of this machine
 * cannot be stepped without moving every other process's, and berth reads time only
 * through its injected Clock, so the wall clock is jumped an hour forward and back on a
 * FakeClock (`jump`: Date.now() moves, pending sleeps keep the time they had left, as
 * monotonic timers do) under the real components, and their calls are counted:
 * - the node Lease keeps its 10 s cadence through both jumps (no burst of renewals,
 *   no hour-long silence), its renewTime follows the wall clock;
 * - CrashLoopBackOff / image pull back-off: forward, a waiting key may retry at once
 *   (once), backward, it waits its back-off, not the back-off plus the hour;
 * - the reflector's watch loop is not disturbed (no relist, no extra watch).
 * What a real stepped kernel clock would add is in RELIABILITY.md.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ConfigMap } from 'kubernetes-types/core/v1.js';
import type { Lease } from 'kubernetes-types/coordination/v1.js';
import { FakeKubeClient } from '../../src/kube/fake-client.ts';
import { Reflector } from '../../src/kube/reflector.ts';
import { CONFIGMAPS, inNamespace, LEASES } from '../../src/kube/types.ts';
import { LeaseController } from '../../src/nodelease/controller.ts';
import { Backoff } from '../../src/util/backoff.ts';
import { FakeClock } from '../../src/util/clock.ts';
import { MemoryLogger } from '../../src/util/logger.ts';

const HOUR = 3_600_000;

/** Advances the fake clock in 1 s steps (so woken loops run between steps). */
async function run(clock: FakeClock, ms: number): Promise<void> {
  for (let t = 0; t < ms; t += 1000) await clock.advance(1000);
}

describe('clock jumps of an hour, forward and back', () => {
  test('the node Lease keeps renewing every 10 s and its renewTime follows the wall clock', async () => {
    const clock = new FakeClock();
    const client = new FakeKubeClient({ clock });
    const lease = new LeaseController({
      client,
      clock,
      logger: new MemoryLogger(),
      nodeName: 'n1',
      leaseDurationSeconds: 40,
      nodeUID: () => undefined,
    });
    const controller = new AbortController();
    const running = lease.run(controller.signal);
    const writes = (): number =>
      client.calls.filter((c) => c.verb === 'update' || c.verb === 'create').length;
    const renewTime = async (): Promise<number> => {
      const got = await client.get<Lease>(inNamespace(LEASES, 'kube-node-lease'), 'n1');
      return Date.parse(got.spec?.renewTime ?? '');
    };
    await run(clock, 60_000);
    const before = writes();
    clock.jump(HOUR);
    await run(clock, 60_000);
    const afterForward = writes() - before;
    assert.ok((await renewTime()) > clock.now() - 11_000, 'renewTime in the new wall time');
    clock.jump(-2 * HOUR);
    await run(clock, 60_000);
    const afterBack = writes() - before - afterForward;
    assert.ok((await renewTime()) > clock.now() - 11_000, 'renewTime back in the old wall time');
    controller.abort();
    await running;
    // 60 s at one renewal per 10 s: 6 each side of each jump, no storm, no silence.
    assert.ok(before >= 6 && before <= 7, `before: ${before}`);
    assert.equal(afterForward, 6);
    assert.equal(afterBack, 6);
  });

  test('a crash-looping container restarts on its back-off through both jumps', async () => {
    const clock = new FakeClock();
    const backoff = new Backoff(clock, {
      initialMs: 10_000,
      maxMs: 300_000,
      resetAfterMs: 600_000,
    });
    let restarts = 0;
    /** The pod worker's decision every second: restart when out of back-off. */
    const loop = async (ms: number): Promise<number> => {
      const start = restarts;
      for (let t = 0; t < ms; t += 1000) {
        if (!backoff.inBackoff('pod/c')) {
          restarts++;
          backoff.next('pod/c');
        }
        await clock.advance(1000);
      }
      return restarts - start;
    };
    // At 0, 10, 30, 70 and 150 s (delays 10, 20, 40, 80, 160 s), then waiting 160 s.
    assert.equal(await loop(155_000), 5);
    clock.jump(-HOUR);
    // Back: the wait is at most the 160 s back-off, not an hour more.
    assert.equal(backoff.remaining('pod/c'), 160_000);
    const afterBack = await loop(170_000);
    assert.equal(afterBack, 1, 'one restart once the back-off ran out');
    clock.jump(HOUR);
    // Forward: the last failure looks older than the 10-minute reset, so one restart at
    // once with the initial delay, then the delays double again: no storm.
    const afterForward = await loop(75_000);
    assert.equal(afterForward, 4, 'at 0, 10, 30 and 70 s');
  });

  test('the reflector neither relists nor rewatches when the wall clock jumps', async () => {
    const clock = new FakeClock();
    const client = new FakeKubeClient({ clock });
    const synced: number[] = [];
    const reflector = new Reflector<ConfigMap>({
      client,
      path: inNamespace(CONFIGMAPS, 'ns'),
      clock,
      logger: new MemoryLogger(),
      random: () => 0,
      handler: {
        onSync: (items) => {
          synced.push(items.length);
        },
        onEvent: () => undefined,
      },
    });
    const controller = new AbortController();
    const running = reflector.run(controller.signal);
    await run(clock, 5000);
    const calls = client.calls.length;
    clock.jump(HOUR);
    await run(clock, 60_000);
    clock.jump(-2 * HOUR);
    await run(clock, 60_000);
    assert.equal(client.calls.length, calls, 'no list or watch call');
    assert.deepEqual(synced, [0]);
    controller.abort();
    await running;
  });
});
