import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setUpEmptyDir } from './emptydir.ts';
import { FakeMounter } from './mounter.ts';
import { bindSubPath } from './subpath.ts';

describe('bindSubPath', () => {
  let base = '';
  before(async () => {
    base = await mkdtemp(path.join(tmpdir(), 'berth-subpath-'));
  });
  after(async () => {
    await rm(base, { recursive: true, force: true });
  });

  it("creates a missing subPath with the volume root's mode, setgid included (fsGroup)", async () => {
    const volume = path.join(base, 'grp', 'vol');
    const mounter = new FakeMounter();
    await setUpEmptyDir(volume, {}, { mounter, fsGroup: 123 });
    const old = process.umask(0o022);
    let target: string;
    try {
      target = await bindSubPath({
        volumePath: volume,
        subPath: 'test-sub/deeper',
        target: path.join(base, 'grp', 'subpaths', '0'),
        create: true,
        mounter,
      });
    } finally {
      process.umask(old);
    }
    // Upstream's e2e: perms -rwxrwxrwx, owner 0, group the fsGroup (inherited through
    // setgid), mode with setgid; every created level alike.
    for (const dir of ['test-sub', 'test-sub/deeper']) {
      const st = await stat(path.join(volume, dir));
      assert.equal(st.mode & 0o7777, 0o2777, dir);
      assert.equal(st.uid, 0, dir);
      assert.equal(st.gid, 123, dir);
    }
    assert.equal(target, path.join(base, 'grp', 'subpaths', '0'));
    assert.deepEqual(
      mounter.mounts.map((m) => m.target),
      [target],
    );
  });

  it('a plain volume gives 0777; an existing directory keeps its mode', async () => {
    const volume = path.join(base, 'plain', 'vol');
    const mounter = new FakeMounter();
    await setUpEmptyDir(volume, {}, { mounter });
    await mkdir(path.join(volume, 'kept'), { mode: 0o700 });
    for (const [i, subPath] of ['new', 'kept'].entries()) {
      await bindSubPath({
        volumePath: volume,
        subPath,
        target: path.join(base, 'plain', 'subpaths', String(i)),
        create: true,
        mounter,
      });
    }
    assert.equal((await stat(path.join(volume, 'new'))).mode & 0o7777, 0o777);
    assert.equal((await stat(path.join(volume, 'kept'))).mode & 0o7777, 0o700);
  });
});
