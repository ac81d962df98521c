import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { emptyDirSizeBytes, setUpEmptyDir } from './emptydir.ts';
import { FakeMounter, SystemMounter } from './mounter.ts';

describe('emptyDir', () => {
  let base = '';
  before(async () => {
    base = await mkdtemp(path.join(tmpdir(), 'berth-emptydir-'));
  });
  after(async () => {
    await rm(base, { recursive: true, force: true });
  });

  it('parses sizeLimit; zero or unset means no size', () => {
    assert.equal(emptyDirSizeBytes({ sizeLimit: '64Mi' }), 64 * 1024 * 1024);
    assert.equal(emptyDirSizeBytes({ sizeLimit: '1G' }), 1e9);
    assert.equal(emptyDirSizeBytes({ sizeLimit: '0' }), undefined);
    assert.equal(emptyDirSizeBytes({}), undefined);
    assert.throws(() => emptyDirSizeBytes({ sizeLimit: 'lots' }), { code: 'BERTH_VOLUME_INVALID' });
  });

  it('creates a world-writable disk directory whatever the umask, idempotently', async () => {
    const m = new FakeMounter();
    const dir = path.join(base, 'disk', 'vol');
    const old = process.umask(0o077);
    try {
      await setUpEmptyDir(dir, {}, { mounter: m });
      await setUpEmptyDir(dir, {}, { mounter: m });
    } finally {
      process.umask(old);
    }
    assert.equal((await stat(dir)).mode & 0o7777, 0o777);
    assert.deepEqual(m.calls, []);
  });

  it('mounts a tmpfs with the size limit for medium Memory, once', async () => {
    const m = new SystemMounter();
    const dir = path.join(base, 'mem');
    try {
      await setUpEmptyDir(dir, { medium: 'Memory', sizeLimit: '3Mi' }, { mounter: m });
      await setUpEmptyDir(dir, { medium: 'Memory', sizeLimit: '3Mi' }, { mounter: m });
      const mounts = await m.listMountsUnder(dir);
      assert.equal(mounts.length, 1, 'the second setUp must not stack a tmpfs');
      assert.equal(mounts[0]?.fsType, 'tmpfs');
      const info = await readFile('/proc/self/mountinfo', 'utf8');
      assert.match(info.split('\n').find((l) => l.includes(` ${dir} `)) ?? '', /size=3072k/);
      // The tmpfs keeps its sticky 1777, as upstream's (only permission bits are checked).
      assert.equal((await stat(dir)).mode & 0o7777, 0o1777);
    } finally {
      for (const e of await m.listMountsUnder(dir)) await m.unmount(e.mountPoint);
    }
  });

  it('gives the volume root to fsGroup with setgid', async () => {
    const dir = path.join(base, 'grp');
    await setUpEmptyDir(dir, {}, { mounter: new FakeMounter(), fsGroup: 4321 });
    const st = await stat(dir);
    assert.equal(st.gid, 4321);
    assert.equal(st.mode & 0o7777, 0o2777);
  });

  it('an fsGroup tmpfs is 03777: setgid on top of the sticky 1777, as upstream', async () => {
    const m = new SystemMounter();
    const dir = path.join(base, 'mem-grp');
    try {
      await setUpEmptyDir(dir, { medium: 'Memory' }, { mounter: m, fsGroup: 123 });
      await setUpEmptyDir(dir, { medium: 'Memory' }, { mounter: m, fsGroup: 123 });
      const st = await stat(dir);
      assert.equal(st.gid, 123);
      assert.equal(st.mode & 0o7777, 0o3777);
    } finally {
      for (const e of await m.listMountsUnder(dir)) await m.unmount(e.mountPoint);
    }
  });

  it('refuses unsupported media', async () => {
    await assert.rejects(
      setUpEmptyDir(
        path.join(base, 'huge'),
        { medium: 'HugePages' },
        { mounter: new FakeMounter() },
      ),
      {
        code: 'BERTH_VOLUME_INVALID',
      },
    );
  });
});
