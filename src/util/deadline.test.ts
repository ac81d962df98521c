import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from './clock.ts';
import { withDeadline } from './deadline.ts';

const late = (): Error => new Error('too late');

describe('withDeadline', () => {
  it('returns the result of an operation that ends in time and leaves no timer', async () => {
    const clock = new FakeClock();
    const out = await withDeadline(clock, new AbortController().signal, 1000, late, () =>
      Promise.resolve(7),
    );
    assert.equal(out, 7);
    assert.equal(clock.pending, 0);
  });

  it('rejects with the deadline error even when the operation ignores its signal', async () => {
    const clock = new FakeClock();
    let seen: AbortSignal | undefined;
    const p = withDeadline(clock, new AbortController().signal, 1000, late, (s) => {
      seen = s;
      return new Promise<number>(() => undefined);
    });
    const rejected = assert.rejects(p, /too late/);
    await clock.advance(999);
    assert.equal(seen?.aborted, false);
    await clock.advance(1);
    await rejected;
    assert.equal(seen?.aborted, true);
  });

  it('passes the parent abort on with its reason', async () => {
    const clock = new FakeClock();
    const parent = new AbortController();
    const p = withDeadline(
      clock,
      parent.signal,
      1000,
      late,
      (s) =>
        new Promise<number>((_, reject) => {
          s.addEventListener(
            'abort',
            () => {
              reject(s.reason as Error);
            },
            { once: true },
          );
        }),
    );
    parent.abort(new Error('stopping'));
    await assert.rejects(p, /stopping/);
    assert.equal(clock.pending, 0);
  });

  it('refuses to start under an aborted parent', async () => {
    const parent = new AbortController();
    parent.abort(new Error('gone'));
    await assert.rejects(
      withDeadline(new FakeClock(), parent.signal, 1000, late, () => Promise.resolve(1)),
      /gone/,
    );
  });
});
