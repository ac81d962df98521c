import assert from 'node:assert/strict';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { checkHostPathType } from './hostpath.ts';
import { VolumeError } from './types.ts';

function typeError(message: string): (err: unknown) => boolean {
  return (err: unknown) => {
    assert.ok(err instanceof VolumeError);
    assert.equal(err.code, 'BERTH_VOLUME_HOSTPATH_TYPE');
    assert.equal(err.message, message);
    return true;
  };
}

describe('checkHostPathType', () => {
  let dir = '';
  let file = '';
  let sock = '';
  let server: Server;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'berth-hostpath-'));
    file = path.join(dir, 'file');
    sock = path.join(dir, 'sock');
    await writeFile(file, 'x');
    server = createServer();
    await new Promise<void>((resolve) => server.listen(sock, resolve));
  });
  after(async () => {
    await new Promise<void>((resolve) =>
      server.close(() => {
        resolve();
      }),
    );
    await rm(dir, { recursive: true, force: true });
  });

  it('DirectoryOrCreate creates the directory and its parents with 0755', async () => {
    const p = path.join(dir, 'new', 'deep');
    const old = process.umask(0);
    try {
      await checkHostPathType(p, 'DirectoryOrCreate');
    } finally {
      process.umask(old);
    }
    const st = await stat(p);
    assert.ok(st.isDirectory());
    assert.equal(st.mode & 0o777, 0o755);
    await checkHostPathType(p, 'DirectoryOrCreate');
    await assert.rejects(
      checkHostPathType(file, 'DirectoryOrCreate'),
      typeError(`hostPath type check failed: ${file} is not a directory`),
    );
  });

  it('Directory requires an existing directory', async () => {
    await checkHostPathType(dir, 'Directory');
    await assert.rejects(
      checkHostPathType(file, 'Directory'),
      typeError(`hostPath type check failed: ${file} is not a directory`),
    );
    const missing = path.join(dir, 'missing');
    await assert.rejects(
      checkHostPathType(missing, 'Directory'),
      typeError(`hostPath type check failed: ${missing} is not a directory`),
    );
  });

  it('FileOrCreate creates an empty 0644 file when the parent exists', async () => {
    const p = path.join(dir, 'created');
    const old = process.umask(0);
    try {
      await checkHostPathType(p, 'FileOrCreate');
    } finally {
      process.umask(old);
    }
    const st = await stat(p);
    assert.ok(st.isFile());
    assert.equal(st.size, 0);
    assert.equal(st.mode & 0o777, 0o644);
    await checkHostPathType(file, 'FileOrCreate');
    assert.equal((await stat(file)).size, 1, 'an existing file is not truncated');
    await assert.rejects(
      checkHostPathType(dir, 'FileOrCreate'),
      typeError(`hostPath type check failed: ${dir} is not a file`),
    );
    await assert.rejects(checkHostPathType(path.join(dir, 'nodir', 'f'), 'FileOrCreate'), {
      code: 'BERTH_VOLUME_HOSTPATH_TYPE',
    });
  });

  it('File, Socket, CharDevice and BlockDevice check the kind', async () => {
    await checkHostPathType(file, 'File');
    await assert.rejects(
      checkHostPathType(dir, 'File'),
      typeError(`hostPath type check failed: ${dir} is not a file`),
    );
    await checkHostPathType(sock, 'Socket');
    await assert.rejects(
      checkHostPathType(file, 'Socket'),
      typeError(`hostPath type check failed: ${file} is not a socket file`),
    );
    await checkHostPathType('/dev/null', 'CharDevice');
    await assert.rejects(
      checkHostPathType(file, 'CharDevice'),
      typeError(`hostPath type check failed: ${file} is not a character device`),
    );
    await assert.rejects(
      checkHostPathType('/dev/null', 'BlockDevice'),
      typeError('hostPath type check failed: /dev/null is not a block device'),
    );
  });

  it('BlockDevice accepts a block device when the host has one', async (t) => {
    let dev: string | undefined;
    for (const d of ['/dev/vda', '/dev/sda', '/dev/nvme0n1', '/dev/loop0']) {
      const st = await stat(d).catch(() => undefined);
      if (st?.isBlockDevice() === true) dev ??= d;
    }
    if (dev === undefined) {
      t.skip('no block device on this host');
      return;
    }
    await checkHostPathType(dev, 'BlockDevice');
  });

  it('unset type checks nothing; unknown types and relative or .. paths are invalid', async () => {
    await checkHostPathType(path.join(dir, 'does-not-exist'), undefined);
    await checkHostPathType(path.join(dir, 'does-not-exist'), '');
    await assert.rejects(checkHostPathType(dir, 'Dir'), { code: 'BERTH_VOLUME_INVALID' });
    await assert.rejects(checkHostPathType('relative', ''), { code: 'BERTH_VOLUME_INVALID' });
    await assert.rejects(checkHostPathType('/a/../etc', ''), { code: 'BERTH_VOLUME_INVALID' });
  });
});
