/**
 * The contract every Mounter passes: SystemMounter as root against real temp dirs,
 * FakeMounter in memory. Both run it from mounter.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Mounter } from './mounter.ts';
import { VolumeError } from './types.ts';

export function mounterContract(name: string, make: () => Mounter): void {
  describe(`Mounter contract: ${name}`, () => {
    let dir = '';
    let m: Mounter;
    before(async () => {
      dir = await mkdtemp(path.join(tmpdir(), 'berth-mounter-'));
      m = make();
    });
    after(async () => {
      // Never leave a mount behind, whatever failed above.
      for (const e of await m.listMountsUnder(dir))
        await m.unmount(e.mountPoint).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    });

    it('mounts a tmpfs and reports it as a mount point until unmounted', async () => {
      const t = path.join(dir, 'tmpfs');
      await mkdir(t);
      assert.equal(await m.isMountPoint(t), false);
      await m.mountTmpfs(t, 1024 * 1024);
      assert.equal(await m.isMountPoint(t), true);
      const listed = await m.listMountsUnder(dir);
      assert.deepEqual(
        listed.map((e) => [e.mountPoint, e.fsType]),
        [[t, 'tmpfs']],
      );
      await m.unmount(t);
      assert.equal(await m.isMountPoint(t), false);
      assert.deepEqual(await m.listMountsUnder(dir), []);
    });

    it('bind-mounts a directory and lists nested mounts deepest first', async () => {
      const src = path.join(dir, 'src');
      const t = path.join(dir, 'bind');
      await mkdir(src);
      await writeFile(path.join(src, 'f'), 'x');
      await mkdir(t);
      await m.bindMount(src, t, { readOnly: false });
      assert.equal(await m.isMountPoint(t), true);
      const inner = path.join(t, 'inner');
      await mkdir(inner, { recursive: true });
      await m.mountTmpfs(inner);
      assert.deepEqual(
        (await m.listMountsUnder(dir)).map((e) => e.mountPoint),
        [inner, t],
      );
      await m.unmount(inner);
      await m.unmount(t);
      assert.deepEqual(await m.listMountsUnder(dir), []);
    });

    it('fails with BERTH_VOLUME_MOUNT_FAILED to unmount what is not mounted', async () => {
      const t = path.join(dir, 'plain');
      await mkdir(t);
      await assert.rejects(m.unmount(t), (err: unknown) => {
        assert.ok(err instanceof VolumeError);
        assert.equal(err.code, 'BERTH_VOLUME_MOUNT_FAILED');
        return true;
      });
    });

    it('does not list a sibling whose name shares the prefix', async () => {
      const a = path.join(dir, 'pre');
      const b = path.join(dir, 'prefix');
      await mkdir(a);
      await mkdir(b);
      await m.mountTmpfs(b);
      try {
        assert.deepEqual(await m.listMountsUnder(a), []);
        assert.equal((await m.listMountsUnder(b)).length, 1);
      } finally {
        await m.unmount(b);
      }
    });

    it('rejects with the abort reason when the signal is already aborted', async () => {
      const t = path.join(dir, 'aborted');
      await mkdir(t);
      const ac = new AbortController();
      ac.abort(new Error('stop'));
      await assert.rejects(m.mountTmpfs(t, undefined, ac.signal));
      assert.equal(await m.isMountPoint(t), false);
    });
  });
}
