/**
 * LogWakeup: a write in the watched directory ends a wait early (or the next one at
 * once), a quiet directory waits for the clock, an unwatchable directory falls back to
 * the clock, and an abort rejects. No sleeper is left on the clock after a wake.
 */
import assert from 'node:assert/strict';
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { FakeClock } from '../util/clock.ts';
import { isAbortError } from '../util/errors.ts';
import { COALESCE_MS, LogWakeup } from './log-wakeup.ts';

describe('LogWakeup', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-wakeup-'));
    await writeFile(join(dir, '0.log'), '');
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** Advances the clock in coalescing steps until `done`; returns how far it went. */
  const settle = async (clock: FakeClock, done: () => boolean): Promise<number> => {
    let advanced = 0;
    for (let i = 0; i < 200 && !done(); i++) {
      await new Promise((r) => setTimeout(r, 5));
      if (clock.pending > 0 && advanced < 200) {
        await clock.advance(COALESCE_MS);
        advanced += COALESCE_MS;
      }
    }
    return advanced;
  };

  test('a write ends the wait after the coalescing delay, long before the timer', async () => {
    const clock = new FakeClock();
    const wakeup = new LogWakeup(dir);
    const signal = new AbortController().signal;
    // The first wait arms the watch and returns at once, for the caller to read again.
    assert.equal(wakeup.watching, false);
    await wakeup.wait(250, clock, signal);
    assert.equal(wakeup.watching, true);
    let woke = false;
    const waiting = wakeup.wait(250, clock, signal).then(() => (woke = true));
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(woke, false);
    await appendFile(join(dir, '0.log'), 'x\n');
    // Without the write nothing happens before the full 250 ms; settle stops at 200.
    assert.ok((await settle(clock, () => woke)) < 200);
    await waiting;
    assert.equal(clock.pending, 0);
    // The wake closed the watch (a fast writer would call back per line); the next
    // wait arms it again and returns without the clock, so the caller reads what came.
    assert.equal(wakeup.watching, false);
    await appendFile(join(dir, '0.log'), 'y\n');
    await wakeup.wait(250, clock, signal);
    assert.equal(wakeup.watching, true);
    assert.equal(clock.pending, 0);
    wakeup.close();
    assert.equal(wakeup.watching, false);
  });

  test('quiet or unwatchable: the wait is the clock sleep; abort rejects', async () => {
    for (const watched of [dir, join(dir, 'missing'), undefined]) {
      const clock = new FakeClock();
      const wakeup = new LogWakeup(watched);
      const controller = new AbortController();
      if (watched === dir) await wakeup.wait(250, clock, controller.signal);
      assert.equal(wakeup.watching, watched === dir);
      let woke = false;
      const waiting = wakeup.wait(250, clock, controller.signal).then(() => (woke = true));
      await new Promise((r) => setTimeout(r, 20));
      assert.equal(woke, false);
      await clock.advance(250);
      await waiting;
      const aborted = wakeup.wait(250, clock, controller.signal);
      controller.abort();
      await assert.rejects(aborted, isAbortError);
      assert.equal(clock.pending, 0);
      wakeup.close();
    }
  });
});
