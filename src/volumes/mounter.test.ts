import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { mounterContract } from './mounter-contract.ts';
import { FakeMounter, SystemMounter, parseMountinfo } from './mounter.ts';
import { VolumeError } from './types.ts';

mounterContract('SystemMounter', () => new SystemMounter());
mounterContract('FakeMounter', () => new FakeMounter());

describe('parseMountinfo', () => {
  it('reads the mount point, type and source and decodes octal escapes', () => {
    const text =
      '36 35 98:0 /mnt1 /mnt/a\\040b rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n' +
      '45 27 0:40 / /tmp/x rw,relatime shared:2 - tmpfs tmpfs rw,size=1024k\n';
    assert.deepEqual(parseMountinfo(text), [
      { mountPoint: '/mnt/a b', fsType: 'ext3', source: '/dev/root' },
      { mountPoint: '/tmp/x', fsType: 'tmpfs', source: 'tmpfs' },
    ]);
  });
});

describe('SystemMounter', () => {
  it('makes a read-only bind read-only and passes the size to tmpfs', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'berth-mounter-ro-'));
    const m = new SystemMounter();
    const src = path.join(dir, 'src');
    const t = path.join(dir, 't');
    const tm = path.join(dir, 'tm');
    try {
      await mkdir(src);
      await mkdir(t);
      await mkdir(tm);
      await writeFile(path.join(src, 'f'), 'hello');
      await m.bindMount(src, t, { readOnly: true });
      assert.equal(await readFile(path.join(t, 'f'), 'utf8'), 'hello');
      await assert.rejects(writeFile(path.join(t, 'g'), 'x'), { code: 'EROFS' });
      await m.mountTmpfs(tm, 2 * 1024 * 1024);
      const info = await readFile('/proc/self/mountinfo', 'utf8');
      const line = info.split('\n').find((l) => l.includes(` ${tm} `));
      assert.match(line ?? '', /size=2048k/);
    } finally {
      for (const e of await m.listMountsUnder(dir)) await m.unmount(e.mountPoint);
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('reports a failing mount as BERTH_VOLUME_MOUNT_FAILED with the target', async () => {
    const m = new SystemMounter();
    await assert.rejects(
      m.bindMount('/nonexistent-berth-src', '/nonexistent-berth-t', { readOnly: false }),
      (err: unknown) => {
        assert.ok(err instanceof VolumeError);
        assert.equal(err.code, 'BERTH_VOLUME_MOUNT_FAILED');
        assert.match(err.message, /nonexistent-berth-t/);
        return true;
      },
    );
  });
});

describe('FakeMounter', () => {
  it('fails the next call when told to, then works again', async () => {
    const m = new FakeMounter();
    m.failNext(new VolumeError('BERTH_VOLUME_MOUNT_FAILED', 'boom'));
    await assert.rejects(m.mountTmpfs('/x'), /boom/);
    await m.mountTmpfs('/x', 5);
    assert.deepEqual(m.mounts, [
      { kind: 'tmpfs', target: '/x', source: 'tmpfs', readOnly: false, sizeBytes: 5 },
    ]);
  });
});
