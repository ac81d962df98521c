import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { applyOomScoreAdj } from './oom-score.ts';

test('the value is written where the kernel reads it; out of range is refused', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-oom-'));
  try {
    const file = join(dir, 'oom_score_adj');
    await writeFile(file, '0');
    await applyOomScoreAdj(-999, file);
    assert.equal(await readFile(file, 'utf8'), '-999');
    await assert.rejects(applyOomScoreAdj(-1001, file), RangeError);
    await assert.rejects(applyOomScoreAdj(0.5, file), RangeError);
  } finally {
    await rm(dir, { recursive: true });
  }
});

test("raising this process's own score is allowed without privileges", async () => {
  const before = (await readFile('/proc/self/oom_score_adj', 'utf8')).trim();
  const raised = Math.min(1000, Number(before) + 1);
  await applyOomScoreAdj(raised);
  assert.equal((await readFile('/proc/self/oom_score_adj', 'utf8')).trim(), String(raised));
});
