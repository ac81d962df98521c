import assert from 'node:assert/strict';
import { lstat, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fillDisk } from '../util/test-full-disk.ts';
import { createTerminationLogFile, podDir, writeEtcHosts } from './pod-dirs.ts';

const root = await mkdtemp(join(tmpdir(), 'berth-pod-dirs-'));
after(() => rm(root, { recursive: true, force: true }));

test('termination-message files are new, empty and writable by any container user', async () => {
  const a = await createTerminationLogFile(root, 'uid-1', 'main');
  const b = await createTerminationLogFile(root, 'uid-1', 'main');
  assert.notEqual(a, b, 'each container instance gets its own file');
  assert.ok(a.startsWith(join(root, 'pods', 'uid-1', 'containers', 'main') + '/'));
  const st = await stat(a);
  assert.equal(st.size, 0);
  assert.equal(st.mode & 0o777, 0o666);
});

test('UIDs and names that could leave the root are refused', async () => {
  for (const bad of ['..', '../x', 'a/b', '', '.hidden', 'a\0b']) {
    assert.throws(() => podDir(root, bad), { code: 'BERTH_POD_DIR_INVALID' });
    await assert.rejects(createTerminationLogFile(root, 'uid-1', bad), {
      code: 'BERTH_POD_DIR_INVALID',
    });
  }
});

test('the hosts file is replaced atomically with mode 0644', async () => {
  const p = await writeEtcHosts(root, 'uid-2', 'one\n');
  await writeEtcHosts(root, 'uid-2', 'two\n');
  assert.equal(await readFile(p, 'utf8'), 'two\n');
  const st = await lstat(p);
  assert.ok(st.isFile());
  assert.equal(st.mode & 0o777, 0o644);
});

test('on a full disk the hosts file keeps its content and no temporary file is left', async () => {
  const p = await writeEtcHosts(root, 'uid-3', 'one\n');
  const disk = fillDisk(root);
  try {
    await assert.rejects(writeEtcHosts(root, 'uid-3', 'two two two\n'), { code: 'ENOSPC' });
  } finally {
    disk.restore();
  }
  assert.equal(await readFile(p, 'utf8'), 'one\n');
  assert.deepEqual(await readdir(podDir(root, 'uid-3')), ['etc-hosts']);
  await writeEtcHosts(root, 'uid-3', 'two\n');
  assert.equal(await readFile(p, 'utf8'), 'two\n');
});
