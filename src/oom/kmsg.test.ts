/** The KmsgSource contract, run by the fake and, where it can be opened, /dev/kmsg. */
import assert from 'node:assert/strict';
import { access, constants, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FakeKmsgSource } from './fake.ts';
import { kmsgSourceContract } from './contract.ts';
import { bootTimeMs, DevKmsgSource } from './kmsg.ts';
import { OomError } from './types.ts';

let seq = 0;
kmsgSourceContract('FakeKmsgSource', () => {
  const source = new FakeKmsgSource();
  return Promise.resolve({
    source,
    produce: () => {
      seq++;
      source.push(`6,${seq},${seq * 1000},-;fake record ${seq}`);
    },
  });
});

const readable = await access('/dev/kmsg', constants.R_OK).then(
  () => true,
  () => false,
);
if (readable) {
  // The live ring buffer always holds records (boot messages at least).
  kmsgSourceContract('DevKmsgSource', () =>
    Promise.resolve({ source: new DevKmsgSource(), produce: () => undefined }),
  );
}

test('an unopenable log is BERTH_OOM_KMSG_OPEN naming the path', async () => {
  const source = new DevKmsgSource('/nonexistent/kmsg');
  await assert.rejects(
    source.read(new AbortController().signal),
    (e: unknown) =>
      e instanceof OomError &&
      e.code === 'BERTH_OOM_KMSG_OPEN' &&
      /\/nonexistent\/kmsg cannot be opened: ENOENT/.test(e.message),
  );
  await source.close();
});

test('bootTimeMs is now minus /proc/uptime', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-uptime-'));
  try {
    await writeFile(join(dir, 'uptime'), '12.50 40.00\n');
    assert.equal(await bootTimeMs(100_000, join(dir, 'uptime')), 87_500);
    await writeFile(join(dir, 'uptime'), 'garbage\n');
    await assert.rejects(bootTimeMs(100_000, join(dir, 'uptime')), /Cannot read the boot time/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
