/** The token bucket on a fake clock. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FakeClock } from '../util/clock.ts';
import { TokenBucket } from './rate-limiter.ts';

const settled = async (p: Promise<unknown>): Promise<boolean> => {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((r) => setImmediate(r));
  return done;
};

describe('TokenBucket', () => {
  test('allows a burst, then refills at qps', async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ qps: 2, burst: 3, clock });
    for (let i = 0; i < 3; i++) assert.ok(bucket.tryTake());
    assert.ok(!bucket.tryTake());
    await clock.advance(499);
    assert.ok(!bucket.tryTake());
    await clock.advance(1);
    assert.ok(bucket.tryTake());
    await clock.advance(60_000);
    assert.equal(bucket.available(), 3);
  });

  test('take waits in order for reserved tokens', async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ qps: 10, burst: 1, clock });
    await bucket.take();
    const second = bucket.take();
    const third = bucket.take();
    assert.ok(!(await settled(second)));
    await clock.advance(100);
    assert.ok(await settled(second));
    assert.ok(!(await settled(third)));
    await clock.advance(100);
    assert.ok(await settled(third));
  });

  test('an aborted wait rejects and gives its reservation back', async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ qps: 1, burst: 1, clock });
    await bucket.take();
    const controller = new AbortController();
    const waiting = bucket.take(controller.signal);
    controller.abort(new Error('stop'));
    await assert.rejects(waiting, /stop/);
    await clock.advance(1000);
    assert.ok(bucket.tryTake());
    await assert.rejects(bucket.take(AbortSignal.abort()));
  });

  test('qps 0 disables limiting', async () => {
    const bucket = new TokenBucket({ qps: 0, burst: 1, clock: new FakeClock() });
    for (let i = 0; i < 1000; i++) assert.ok(bucket.tryTake());
    await bucket.take();
  });
});
