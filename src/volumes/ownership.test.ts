import assert from 'node:assert/strict';
import { chmod, chown, lstat, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, test } from 'node:test';
import { setVolumeOwnership } from './ownership.ts';

let dir = '';
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'berth-own-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const GROUP = 4321;

test('every file gets the group and group rw, directories setgid and exec', async () => {
  await mkdir(path.join(dir, 'sub'));
  await writeFile(path.join(dir, 'sub', 'f'), 'x', { mode: 0o600 });
  await chmod(path.join(dir, 'sub'), 0o700);
  assert.equal(await setVolumeOwnership(dir, { fsGroup: GROUP }), true);
  const f = await lstat(path.join(dir, 'sub', 'f'));
  assert.equal(f.gid, GROUP);
  assert.equal(f.mode & 0o7777, 0o660);
  const d = await lstat(path.join(dir, 'sub'));
  assert.equal(d.gid, GROUP);
  assert.equal(d.mode & 0o7777, 0o2770);
});

test('read-only volumes get group r only', async () => {
  await writeFile(path.join(dir, 'f'), 'x', { mode: 0o600 });
  await setVolumeOwnership(dir, { fsGroup: GROUP, readOnly: true });
  assert.equal((await lstat(path.join(dir, 'f'))).mode & 0o777, 0o640);
});

test('a symlink is re-grouped itself, its target outside the volume is untouched', async () => {
  const outside = await mkdtemp(path.join(tmpdir(), 'berth-own-out-'));
  try {
    await writeFile(path.join(outside, 'secret'), 'x', { mode: 0o600 });
    await symlink(path.join(outside, 'secret'), path.join(dir, 'link'));
    await setVolumeOwnership(dir, { fsGroup: GROUP });
    const target = await lstat(path.join(outside, 'secret'));
    assert.equal(target.gid, 0);
    assert.equal(target.mode & 0o777, 0o600);
    assert.equal((await lstat(path.join(dir, 'link'))).gid, GROUP);
  } finally {
    await rm(outside, { recursive: true, force: true });
  }
});

test('OnRootMismatch skips the walk when the root already matches', async () => {
  await setVolumeOwnership(dir, { fsGroup: GROUP });
  await writeFile(path.join(dir, 'later'), 'x', { mode: 0o600 });
  // The setgid root gives new files its group: take it away to see whether a walk runs.
  await chown(path.join(dir, 'later'), -1, 0);
  assert.equal(await setVolumeOwnership(dir, { fsGroup: GROUP, policy: 'OnRootMismatch' }), false);
  assert.equal((await lstat(path.join(dir, 'later'))).gid, 0);
  // Always walks again.
  assert.equal(await setVolumeOwnership(dir, { fsGroup: GROUP, policy: 'Always' }), true);
  assert.equal((await lstat(path.join(dir, 'later'))).gid, GROUP);
});

test('an aborted signal stops the walk', async () => {
  await mkdir(path.join(dir, 'a'));
  const c = new AbortController();
  c.abort();
  await assert.rejects(setVolumeOwnership(dir, { fsGroup: GROUP, signal: c.signal }), {
    name: 'AbortError',
  });
});
