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
import { LogWakeup } from './log-wakeup.ts';

describe('LogWakeup', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-wakeup-'));
    await writeFile(join(dir, '0.log'), '');
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('a write ends the wait without the clock moving', async () => {
    const clock = new FakeClock();
    const wakeup = new LogWakeup(dir);
    assert.equal(wakeup.watching, true);
    const signal = new AbortController().signal;
    let woke = false;
    const waiting = wakeup.wait(250, clock, signal).then(() => (woke = true));
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(woke, false);
    await appendFile(join(dir, '0.log'), 'x\n');
    await waiting;
    assert.equal(clock.pending, 0);
    // A change while nobody waits makes the next wait return at once.
    await appendFile(join(dir, '0.log'), 'y\n');
    await new Promise((r) => setTimeout(r, 50));
    await wakeup.wait(250, clock, signal);
    assert.equal(clock.pending, 0);
    wakeup.close();
  });

  test('quiet or unwatchable: the wait is the clock sleep; abort rejects', async () => {
    for (const watched of [dir, join(dir, 'missing'), undefined]) {
      const clock = new FakeClock();
      const wakeup = new LogWakeup(watched);
      assert.equal(wakeup.watching, watched === dir);
      const controller = new AbortController();
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
