import assert from 'node:assert/strict';
import { appendFile, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { rotationTimestamp } from '../logs/files.ts';
import { compressLog } from '../logs/manager.ts';
import { FakeClock } from '../util/clock.ts';
import { COALESCE_MS } from './log-wakeup.ts';
import { ContainerLogFiles, streamLogFiles, type LogOptions } from './logs.ts';

let dir = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-rotlogs-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const rec = (n: number, tag = 'F'): string =>
  `2026-01-01T00:00:${String(n).padStart(2, '0')}.000000000Z stdout ${tag} line${n}\n`;
const recs = (from: number, to: number): string => {
  let s = '';
  for (let n = from; n < to; n++) s += rec(n);
  return s;
};
const expected = (from: number, to: number): string => {
  let s = '';
  for (let n = from; n < to; n++) s += `line${n}\n`;
  return s;
};

function collect(): { out: PassThrough; text: () => string } {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on('data', (c: Buffer) => chunks.push(c));
  return { out, text: () => Buffer.concat(chunks).toString() };
}

/** 0.log.<a>.gz (0-10), 0.log.<b> (10-20, ending in a partial), 0.log (rest of it, 20-30). */
async function rotatedLog(sub: string): Promise<string> {
  const d = await mkdtemp(join(dir, sub));
  const log = join(d, '0.log');
  await writeFile(`${log}.20260101-000010.gz`, gzipSync(recs(0, 10)));
  await writeFile(
    `${log}.20260101-000020`,
    recs(10, 19) + rec(19, 'P').replace('line19\n', 'li\n'),
  );
  await writeFile(log, '2026-01-01T00:00:19.500000000Z stdout F ne19\n' + recs(20, 30));
  // Leftovers that must not be read: a half-written archive and an unrelated log.
  await writeFile(`${log}.20260101-000030.gz.tmp`, 'garbage');
  await writeFile(join(d, '1.log'), rec(99));
  return log;
}

async function read(log: string, options: Partial<LogOptions>): Promise<string> {
  const files = await ContainerLogFiles.open(log, Date.UTC(2026, 0, 1));
  const c = collect();
  try {
    await streamLogFiles(files, c.out, {
      follow: false,
      timestamps: false,
      ...options,
      clock: new FakeClock(),
      signal: new AbortController().signal,
      isRunning: () => Promise.resolve(false),
    });
  } finally {
    await files.close();
  }
  return c.text();
}

describe('container logs across rotation', () => {
  test('rotated files are read oldest first, gunzipped, partial lines joined', async () => {
    const log = await rotatedLog('all-');
    assert.equal(await read(log, {}), expected(0, 30));
  });

  test('tail, since and limit apply across the files', async () => {
    const log = await rotatedLog('opts-');
    assert.equal(await read(log, { tailLines: 12 }), expected(18, 30));
    assert.equal(await read(log, { tailLines: 0 }), '');
    assert.equal(await read(log, { tailLines: 100 }), expected(0, 30));
    assert.equal(
      await read(log, { sinceMs: Date.parse('2026-01-01T00:00:25Z') }),
      expected(25, 30),
    );
    assert.equal(
      await read(log, { sinceMs: Date.parse('2026-01-01T00:00:05Z'), tailLines: 2 }),
      expected(28, 30),
    );
    assert.equal(await read(log, { limitBytes: 14 }), 'line0\nline1\nli');
  });

  test('a log larger than one write batch comes out whole, cut exactly at limitBytes', async () => {
    // 5000 lines of ~60 bytes cross the 64 KiB write batch several times; one is split
    // into three fragments.
    const d = await mkdtemp(join(dir, 'batch-'));
    const log = join(d, '0.log');
    const body = 'x'.repeat(50);
    let file = '';
    let want = '';
    let stamped = '';
    for (let n = 0; n < 5000; n++) {
      const ts = `2026-01-01T00:00:00.${String(n).padStart(9, '0')}Z`;
      if (n === 2500) {
        file += `${ts} stdout P ${n}a\n${ts} stderr P b\n${ts} stdout F c${body}\n`;
        want += `${n}abc${body}\n`;
        stamped += `${ts} ${n}abc${body}\n`;
        continue;
      }
      file += `${ts} stdout F ${n}${body}\n`;
      want += `${n}${body}\n`;
      stamped += `${ts} ${n}${body}\n`;
    }
    await writeFile(log, file);
    assert.equal(await read(log, {}), want);
    assert.equal(await read(log, { timestamps: true }), stamped);
    assert.equal(await read(log, { limitBytes: 100_001 }), want.slice(0, 100_001));
    assert.equal(
      await read(log, { timestamps: true, limitBytes: 200_003 }),
      stamped.slice(0, 200_003),
    );
    assert.equal(await read(log, { tailLines: 2501 }), want.split('\n').slice(2499).join('\n'));
  });

  test('a symlinked rotated file is not read', async () => {
    const d = await mkdtemp(join(dir, 'link-'));
    const log = join(d, '0.log');
    await writeFile(join(dir, 'secret'), rec(42));
    await symlink(join(dir, 'secret'), `${log}.20260101-000000`);
    await writeFile(log, rec(1));
    assert.equal(await read(log, {}), 'line1\n');
  });

  test('follow keeps going across rotations without a gap or a duplicate', async () => {
    const d = await mkdtemp(join(dir, 'follow-'));
    const log = join(d, '0.log');
    await writeFile(log, recs(0, 5));
    const t0 = Date.UTC(2026, 0, 1, 12);
    const clock = new FakeClock(t0);
    const files = await ContainerLogFiles.open(log, clock.now());
    const c = collect();
    let running = true;
    let finished = false;
    const done = streamLogFiles(files, c.out, {
      follow: true,
      timestamps: false,
      clock,
      signal: new AbortController().signal,
      isRunning: () => Promise.resolve(running),
    }).finally(() => {
      finished = true;
    });
    // The reader does real file I/O between its (fake) sleeps: wait for it to sleep again.
    const tick = async (): Promise<void> => {
      for (let i = 0; i < 500 && clock.pending === 0 && !finished; i++)
        await new Promise((r) => setTimeout(r, 1));
      await clock.advance(250);
    };
    /** What the manager and runtime do; the runtime writes to the old file until it reopens. */
    const rotate = async (atMs: number, late: [number, number], fresh: [number, number]) => {
      const rotated = `${log}.${rotationTimestamp(atMs)}`;
      await rename(log, rotated);
      await appendFile(rotated, recs(...late));
      await writeFile(log, recs(...fresh));
      return rotated;
    };
    await tick();
    await appendFile(log, recs(5, 10));
    await tick();
    // Two rotations while the reader sleeps; the second compresses the first, so the
    // file being read is found by its stamp rather than its inode.
    const first = await rotate(t0 + 3000, [10, 13], [13, 20]);
    await compressLog(first);
    await rotate(t0 + 6000, [20, 23], [23, 30]);
    for (let i = 0; i < 4; i++) await tick();
    await rotate(t0 + 9000, [30, 33], [33, 40]);
    for (let i = 0; i < 4; i++) await tick();
    await appendFile(log, recs(40, 43));
    running = false;
    while (!finished) await tick();
    await done;
    await files.close();
    assert.equal(c.text(), expected(0, 43));
  });

  test('follow shows a new line when it is written, not at the next poll', async () => {
    const d = await mkdtemp(join(dir, 'wake-'));
    const log = join(d, '0.log');
    await writeFile(log, recs(0, 2));
    // The clock moves only by the 10 ms coalescing steps, never to the 250 ms poll: only
    // the directory watch can wake the reader.
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 12));
    const files = await ContainerLogFiles.open(log, clock.now());
    const c = collect();
    const controller = new AbortController();
    const done = streamLogFiles(files, c.out, {
      follow: true,
      timestamps: false,
      clock,
      signal: controller.signal,
      isRunning: () => Promise.resolve(true),
    });
    const waitFor = async (text: string): Promise<void> => {
      let advanced = 0;
      for (let i = 0; i < 500 && c.text() !== text; i++) {
        await new Promise((r) => setTimeout(r, 2));
        if (clock.pending > 0 && advanced < 200) {
          await clock.advance(COALESCE_MS);
          advanced += COALESCE_MS;
        }
      }
      assert.equal(c.text(), text);
    };
    await waitFor(expected(0, 2));
    await appendFile(log, recs(2, 3));
    await waitFor(expected(0, 3));
    await appendFile(log, recs(3, 5));
    await waitFor(expected(0, 5));
    controller.abort();
    await done;
    await files.close();
    // The waits a write cut short left no sleeper behind.
    assert.equal(clock.pending, 0);
  });

  test('follow calls beforeWait before each wait, after the lines already there', async () => {
    const d = await mkdtemp(join(dir, 'before-wait-'));
    const events: string[] = [];
    const follow = async (name: string, content: string): Promise<void> => {
      const log = join(d, name);
      await writeFile(log, content);
      const clock = new FakeClock(Date.UTC(2026, 0, 1, 12));
      const files = await ContainerLogFiles.open(log, clock.now());
      const out = new PassThrough();
      out.on('data', () => events.push('write'));
      const controller = new AbortController();
      const done = streamLogFiles(files, out, {
        follow: true,
        timestamps: false,
        clock,
        signal: controller.signal,
        isRunning: () => Promise.resolve(true),
        beforeWait: () => {
          events.push('wait');
          controller.abort();
        },
      });
      await done;
      await files.close();
    };
    // Nothing to send: the caller hears of the wait first (and sends its headers then).
    await follow('empty.log', '');
    assert.deepEqual(events, ['wait']);
    events.length = 0;
    await follow('lines.log', recs(0, 2));
    assert.deepEqual(events, ['write', 'wait']);
  });
});
