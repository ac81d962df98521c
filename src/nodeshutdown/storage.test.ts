import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fillDisk } from '../util/test-full-disk.ts';
import { LOCAL_STORAGE_STATE_FILE, ShutdownStateStorage } from './storage.ts';

const root = await mkdtemp(join(tmpdir(), 'berth-shutdown-state-'));
after(() => rm(root, { recursive: true, force: true }));

test('stores and loads the start and end times', async () => {
  const storage = new ShutdownStateStorage(join(root, LOCAL_STORAGE_STATE_FILE));
  assert.deepEqual(await storage.load(), {});
  await storage.store({ startTime: Date.UTC(2026, 0, 1), endTime: Date.UTC(2026, 0, 1, 0, 1) });
  assert.deepEqual(await storage.load(), {
    startTime: Date.UTC(2026, 0, 1),
    endTime: Date.UTC(2026, 0, 1, 0, 1),
  });
});

test('on a full disk the stored state stays whole and no temporary file is left', async () => {
  const dir = await mkdtemp(join(root, 'full-'));
  const storage = new ShutdownStateStorage(join(dir, LOCAL_STORAGE_STATE_FILE));
  await storage.store({ startTime: Date.UTC(2026, 0, 1) });
  const disk = fillDisk(dir);
  try {
    await assert.rejects(storage.store({ startTime: Date.UTC(2026, 0, 2) }), {
      code: 'ENOSPC',
    });
  } finally {
    disk.restore();
  }
  assert.deepEqual(await readdir(dir), [LOCAL_STORAGE_STATE_FILE]);
  assert.deepEqual(await storage.load(), { startTime: Date.UTC(2026, 0, 1) });
});
