import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { isSwapOn, swapOnAccordingTo } from './swap.ts';

const HEADER = 'Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n';

describe('swap detection', () => {
  test('only the header: off; any area listed: on', () => {
    assert.equal(swapOnAccordingTo(HEADER), false);
    assert.equal(swapOnAccordingTo(`${HEADER}/swapfile  file  1048572  0  -2\n`), true);
  });

  test('reads the file; a missing /proc/swaps means no swap', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-swap-'));
    try {
      const path = join(dir, 'swaps');
      await writeFile(path, `${HEADER}/dev/sda2 partition 999 0 -2\n`);
      assert.equal(await isSwapOn(path), true);
      assert.equal(await isSwapOn(join(dir, 'missing')), false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
