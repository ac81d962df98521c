import assert from 'node:assert/strict';
import {
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { SystemMounter } from './mounter.ts';
import { relativeComponents, safeOpen, safeRemoveAll } from './safe-path.ts';
import { VolumeError } from './types.ts';

function code(c: string): (err: unknown) => boolean {
  return (err: unknown) => {
    assert.ok(err instanceof VolumeError, String(err));
    assert.equal(err.code, c);
    return true;
  };
}

describe('safe-path', () => {
  let base = '';
  let root = '';
  let outside = '';
  beforeEach(async () => {
    base = await mkdtemp(path.join(tmpdir(), 'berth-safepath-'));
    root = path.join(base, 'root');
    outside = path.join(base, 'outside');
    await mkdir(path.join(root, 'a', 'b'), { recursive: true });
    await writeFile(path.join(root, 'a', 'b', 'f'), 'inside');
    await mkdir(outside);
    await writeFile(path.join(outside, 'canary'), 'canary');
  });
  afterEach(async () => {
    await rm(base, { recursive: true, force: true });
  });

  describe('relativeComponents', () => {
    it('drops empty and dot elements and refuses .. and absolute paths', () => {
      assert.deepEqual(relativeComponents('a//./b/', 'p'), ['a', 'b']);
      assert.throws(() => relativeComponents('a/../b', 'p'), code('BERTH_VOLUME_PATH_ESCAPE'));
      assert.throws(() => relativeComponents('/etc', 'p'), code('BERTH_VOLUME_PATH_ESCAPE'));
      // `..x` is a legal file name, not a backstep.
      assert.deepEqual(relativeComponents('..x/y', 'p'), ['..x', 'y']);
    });
  });

  describe('safeOpen', () => {
    it('opens a nested path and its /proc path reaches the same inode', async () => {
      const p = await safeOpen(root, 'a/b');
      try {
        assert.equal(p.isDirectory, true);
        assert.match(p.procPath, new RegExp(`^/proc/${process.pid}/fd/\\d+$`));
        assert.deepEqual(await readdir(p.procPath), ['f']);
        assert.equal((await stat(p.procPath)).ino, (await stat(path.join(root, 'a', 'b'))).ino);
      } finally {
        await p.close();
      }
    });

    it('follows a relative symlink that stays inside the root', async () => {
      await symlink('a/b/f', path.join(root, 'link'));
      await symlink('../a/b', path.join(root, 'a', 'up'));
      const p = await safeOpen(root, 'link');
      const q = await safeOpen(root, 'a/up/f');
      try {
        assert.equal(p.isDirectory, false);
        assert.equal((await stat(p.procPath)).ino, (await stat(path.join(root, 'a/b/f'))).ino);
        assert.equal((await stat(q.procPath)).ino, (await stat(path.join(root, 'a/b/f'))).ino);
      } finally {
        await p.close();
        await q.close();
      }
    });

    it('refuses symlinks leading outside the root, absolute ones and loops', async () => {
      await symlink('../outside', path.join(root, 'rel-out'));
      await symlink('../../outside', path.join(root, 'a', 'deep-out'));
      await symlink(outside, path.join(root, 'abs-out'));
      await symlink('loop2', path.join(root, 'loop1'));
      await symlink('loop1', path.join(root, 'loop2'));
      for (const rel of ['rel-out', 'rel-out/canary', 'a/deep-out', 'abs-out/canary', 'loop1']) {
        await assert.rejects(safeOpen(root, rel), code('BERTH_VOLUME_PATH_ESCAPE'), rel);
      }
    });

    it('refuses a root that is itself a symlink', async () => {
      const link = path.join(base, 'rootlink');
      await symlink(outside, link);
      await assert.rejects(safeOpen(link, 'canary'), code('BERTH_VOLUME_PATH_ESCAPE'));
    });

    it('reports a missing component and a file used as a directory as invalid', async () => {
      await assert.rejects(safeOpen(root, 'a/nope'), code('BERTH_VOLUME_INVALID'));
      await assert.rejects(safeOpen(root, 'a/b/f/g'), code('BERTH_VOLUME_INVALID'));
    });

    it('keeps pointing at the checked inode when a symlink is swapped in afterwards', async () => {
      const p = await safeOpen(root, 'a/b');
      try {
        await rename(path.join(root, 'a', 'b'), path.join(root, 'a', 'moved'));
        await symlink(outside, path.join(root, 'a', 'b'));
        assert.deepEqual(await readdir(p.procPath), ['f']);
      } finally {
        await p.close();
      }
    });
  });

  describe('safeRemoveAll', () => {
    it('removes the tree but only unlinks symlinks to outside', async () => {
      await symlink(path.join(outside, 'canary'), path.join(root, 'a', 'file-link'));
      await symlink(outside, path.join(root, 'dir-link'));
      await safeRemoveAll(root);
      await assert.rejects(lstat(root), { code: 'ENOENT' });
      assert.equal(await readFile(path.join(outside, 'canary'), 'utf8'), 'canary');
    });

    it('is a no-op for a missing root and unlinks a root that is a symlink', async () => {
      await safeRemoveAll(path.join(base, 'missing'));
      const link = path.join(base, 'link');
      await symlink(outside, link);
      await safeRemoveAll(link);
      await assert.rejects(lstat(link), { code: 'ENOENT' });
      assert.deepEqual(await readdir(outside), ['canary']);
    });

    it('refuses to remove through a mount point below the root', async () => {
      const m = new SystemMounter();
      const mp = path.join(root, 'a', 'mnt');
      await mkdir(mp);
      await m.bindMount(outside, mp, { readOnly: false });
      try {
        await assert.rejects(safeRemoveAll(root), code('BERTH_VOLUME_MOUNT_FAILED'));
        assert.equal(await readFile(path.join(outside, 'canary'), 'utf8'), 'canary');
      } finally {
        await m.unmount(mp);
      }
      await safeRemoveAll(root);
      assert.deepEqual(await readdir(outside), ['canary']);
    });

    it('refuses to cross into another device even when the mount table is not told', async () => {
      const m = new SystemMounter();
      const mp = path.join(root, 'a', 'tmp');
      await mkdir(mp);
      await m.mountTmpfs(mp);
      try {
        await writeFile(path.join(mp, 'keep'), 'x');
        await assert.rejects(
          safeRemoveAll(root, { listMounts: () => Promise.resolve([]) }),
          code('BERTH_VOLUME_MOUNT_FAILED'),
        );
        assert.equal(await readFile(path.join(mp, 'keep'), 'utf8'), 'x');
      } finally {
        await m.unmount(mp);
      }
    });
  });
});
