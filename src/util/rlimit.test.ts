import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { setOpenFilesLimit } from './rlimit.ts';

function openFilesLimits(status: string): [string, string] {
  const line = status.split('\n').find((l) => l.startsWith('Max open files')) ?? '';
  const [soft = '', hard = ''] = line.replace('Max open files', '').trim().split(/\s+/);
  return [soft, hard];
}

test('prlimit sets the soft and hard open files limit of a running process', async (t) => {
  const child = spawn('sleep', ['30']);
  t.after(() => child.kill());
  const pid = child.pid ?? 0;
  await setOpenFilesLimit(4096, AbortSignal.timeout(10_000), { pid });
  assert.deepEqual(openFilesLimits(await readFile(`/proc/${String(pid)}/limits`, 'utf8')), [
    '4096',
    '4096',
  ]);
});

test('a limit the kernel refuses is an error naming the command', async () => {
  // Above fs.nr_open (at most 2^30 on any kernel): prlimit fails.
  await assert.rejects(
    setOpenFilesLimit(2 ** 31, AbortSignal.timeout(10_000), { pid: process.pid }),
    /^Error: prlimit --pid \d+ --nofile=2147483648:2147483648: /,
  );
});
