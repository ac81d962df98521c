import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { SystemLoopDevices } from './loop.ts';

const signal = new AbortController().signal;

describe('SystemLoopDevices over a fake sysfs and losetup', () => {
  let dir = '';
  let sys = '';
  let loops: SystemLoopDevices;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'berth-loop-'));
    sys = path.join(dir, 'sys');
    await mkdir(sys);
    // A losetup that records its arguments and, for -f, makes loop7 backed by the file.
    const script = path.join(dir, 'losetup');
    await writeFile(
      script,
      `#!/bin/sh\necho "$@" >> ${dir}/calls\n` +
        `if [ "$1" = -f ]; then mkdir -p ${sys}/loop7/loop && printf '%s\\n' "$2" > ${sys}/loop7/loop/backing_file; fi\n` +
        `if [ "$1" = -d ]; then rm -rf ${sys}/loop7; fi\n`,
    );
    await chmod(script, 0o755);
    loops = new SystemLoopDevices({ losetup: script, sysBlock: sys });
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('attaches once, finds it again by its backing file, and detaches it', async () => {
    const file = path.join(dir, 'dev-u1');
    await writeFile(file, '');
    assert.equal(await loops.find(file), undefined);
    assert.equal(await loops.attach(file, signal), '/dev/loop7');
    assert.equal(await loops.attach(file, signal), '/dev/loop7');
    assert.equal(await loops.find(file), '/dev/loop7');
    await loops.detach(file, signal);
    assert.equal(await loops.find(file), undefined);
    await loops.detach(file, signal);
    assert.deepEqual((await readFile(path.join(dir, 'calls'), 'utf8')).trim().split('\n'), [
      `-f ${file}`,
      '-d /dev/loop7',
    ]);
  });

  it('finds a loop device whose backing file sysfs reports as deleted', async () => {
    await mkdir(path.join(sys, 'loop2/loop'), { recursive: true });
    await writeFile(path.join(sys, 'loop2/loop/backing_file'), '/var/x/dev/u9 (deleted)\n');
    assert.equal(await loops.find('/var/x/dev/u9'), '/dev/loop2');
    assert.deepEqual(await readdir(sys), ['loop2']);
  });
});
