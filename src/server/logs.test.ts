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
    // --tail counts records: the last 12 are 19's two fragments (one per file) and 20-29.
    assert.equal(await read(log, { tailLines: 12 }), expected(19, 30));
    assert.equal(await read(log, { tailLines: 11 }), 'ne19\n' + expected(20, 30));
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
    // --tail counts records: 2501 back from the end starts at 2500's second fragment.
    assert.equal(
      await read(log, { tailLines: 2501 }),
      `bc${body}\n` + want.split('\n').slice(2501).join('\n'),
    );
    assert.equal(await read(log, { tailLines: 2502 }), want.split('\n').slice(2500).join('\n'));
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

describe('partial (P) records, as upstream renders them', () => {
  const at = (s: number): string => `2026-01-01T00:00:0${s}.000000000Z`;
  async function file(name: string, content: string): Promise<string> {
    const d = await mkdtemp(join(dir, name));
    const log = join(d, '0.log');
    await writeFile(log, content);
    return log;
  }

  test('a log ending in a P record (echo -n) shows it, with no newline added', async () => {
    const log = await file('echo-n-', `${at(1)} stdout P DONE\n`);
    assert.equal(await read(log, {}), 'DONE');
    assert.equal(await read(log, { timestamps: true }), `${at(1)} DONE`);
    assert.equal(await read(log, { tailLines: 1 }), 'DONE');
    const two = await file('echo-n2-', `${at(1)} stdout F start\n${at(2)} stdout P DONE\n`);
    assert.equal(await read(two, {}), 'start\nDONE');
  });

  test('a P record is joined with the records after it; one timestamp per output line', async () => {
    const log = await file(
      'joined-',
      `${at(1)} stdout P abc\n${at(2)} stderr P def\n${at(3)} stdout F ghi\n${at(4)} stdout F jkl\n`,
    );
    assert.equal(await read(log, {}), 'abcdefghi\njkl\n');
    assert.equal(await read(log, { timestamps: true }), `${at(1)} abcdefghi\n${at(4)} jkl\n`);
    // The first tag decides; an unknown later tag does not make a record partial.
    const tags = await file('tags-', `${at(1)} stdout P:x ab\n${at(2)} stdout F:P cd\n`);
    assert.equal(await read(tags, {}), 'abcd\n');
  });

  test('--tail counts records, --limit-bytes counts no newline after a P record', async () => {
    const log = await file(
      'tail-',
      `${at(1)} stdout F one\n${at(2)} stdout P tw\n${at(3)} stdout F o\n${at(4)} stdout P DONE\n`,
    );
    assert.equal(await read(log, { tailLines: 1 }), 'DONE');
    assert.equal(await read(log, { tailLines: 2 }), 'o\nDONE');
    assert.equal(await read(log, { tailLines: 3 }), 'two\nDONE');
    assert.equal(await read(log, { tailLines: 2, timestamps: true }), `${at(3)} o\n${at(4)} DONE`);
    assert.equal(await read(log, { limitBytes: 6 }), 'one\ntw');
    assert.equal(await read(log, { limitBytes: 7 }), 'one\ntwo');
    assert.equal(await read(log, { limitBytes: 100 }), 'one\ntwo\nDONE');
    assert.equal(await read(log, { limitBytes: 10, tailLines: 1 }), 'DONE');
  });

  test('--since skips records one by one; a skipped P record still joins the next', async () => {
    const log = await file('since-', `${at(1)} stdout P abc\n${at(3)} stdout F def\n`);
    const since = Date.parse('2026-01-01T00:00:02Z');
    assert.equal(await read(log, { sinceMs: since }), 'def\n');
    // No timestamp: upstream prefixes only a record that starts an output line.
    assert.equal(await read(log, { sinceMs: since, timestamps: true }), 'def\n');
  });

  test('a last line the runtime has not finished is shown, unless --tail stopped before it', async () => {
    const log = await file('incomplete-', `${at(1)} stdout F one\n${at(2)} stdout F tw`);
    assert.equal(await read(log, {}), 'one\ntw');
    assert.equal(await read(log, { tailLines: 1 }), 'one\n');
    assert.equal(await read(log, { tailLines: 2 }), 'one\ntw');
  });

  test('timestamps are printed with nine fraction digits, as RFC3339NanoFixed', async () => {
    const log = await file(
      'stamps-',
      '2026-01-01T00:00:01.5Z stdout F a\n2026-01-01T00:00:02Z stdout F b\n' +
        '2026-01-01T01:00:03.123+01:00 stdout F c\n2026-01-01T00:00:04.000000001Z stdout F d\n',
    );
    assert.equal(
      await read(log, { timestamps: true }),
      '2026-01-01T00:00:01.500000000Z a\n2026-01-01T00:00:02.000000000Z b\n' +
        '2026-01-01T01:00:03.123000000+01:00 c\n2026-01-01T00:00:04.000000001Z d\n',
    );
  });

  test('follow writes a P record at once and joins what follows it', async () => {
    const log = await file('follow-p-', `${at(1)} stdout P abc\n`);
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 12));
    const files = await ContainerLogFiles.open(log, clock.now());
    const c = collect();
    let running = true;
    let finished = false;
    const done = streamLogFiles(files, c.out, {
      follow: true,
      timestamps: true,
      clock,
      signal: new AbortController().signal,
      isRunning: () => Promise.resolve(running),
    }).finally(() => {
      finished = true;
    });
    const waitFor = async (text: string): Promise<void> => {
      for (let i = 0; i < 500 && c.text() !== text && !finished; i++) {
        await new Promise((r) => setTimeout(r, 2));
        if (clock.pending > 0) await clock.advance(250);
      }
      assert.equal(c.text(), text);
    };
    await waitFor(`${at(1)} abc`);
    // Half a record: following waits for its newline.
    await appendFile(log, `${at(2)} stdout F de`);
    await waitFor(`${at(1)} abc`);
    await appendFile(log, `f\n${at(3)} stdout P DONE\n`);
    await waitFor(`${at(1)} abcdef\n${at(3)} DONE`);
    running = false;
    while (!finished) {
      await new Promise((r) => setTimeout(r, 2));
      if (clock.pending > 0) await clock.advance(250);
    }
    await done;
    await files.close();
    assert.equal(c.text(), `${at(1)} abcdef\n${at(3)} DONE`);
  });
});
