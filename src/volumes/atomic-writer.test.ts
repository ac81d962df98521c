import assert from 'node:assert/strict';
import {
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { FakeClock } from '../util/clock.ts';
import { AtomicWriter, validatePayloadPath } from './atomic-writer.ts';
import { VolumeError, type Payload } from './types.ts';

function payload(entries: Record<string, [string, number]>): Payload {
  return new Map(
    Object.entries(entries).map(([k, [d, mode]]) => [k, { data: Buffer.from(d), mode }]),
  );
}

describe('validatePayloadPath', () => {
  it('refuses empty, absolute, .. elements and a leading ..', () => {
    for (const p of ['', '/etc/passwd', 'a/../../x', '..', '../x', '..data', '..x/y']) {
      assert.throws(
        () => {
          validatePayloadPath(p);
        },
        (err: unknown) => err instanceof VolumeError && err.code === 'BERTH_VOLUME_PATH_ESCAPE',
        p,
      );
    }
    validatePayloadPath('a/b..c');
    validatePayloadPath('x..');
  });
});

describe('AtomicWriter', () => {
  let base = '';
  let dir = '';
  const clock = new FakeClock(Date.UTC(2026, 0, 2, 15, 4, 5));
  beforeEach(async () => {
    base = await mkdtemp(path.join(tmpdir(), 'berth-aw-'));
    dir = path.join(base, 'vol');
    await mkdir(dir);
  });
  afterEach(async () => {
    await rm(base, { recursive: true, force: true });
  });

  it('writes a timestamped dir, the ..data link and per-entry links', async () => {
    const w = new AtomicWriter(dir, { clock });
    assert.equal(await w.write(payload({ a: ['A', 0o644], 'sub/b': ['B', 0o400] })), true);
    const ts = await readlink(path.join(dir, '..data'));
    assert.match(ts, /^\.\.2026_01_02_15_04_05\.\d+$/);
    assert.deepEqual((await readdir(dir)).sort(), ['..data', ts, 'a', 'sub'].sort());
    assert.equal(await readlink(path.join(dir, 'a')), '..data/a');
    assert.equal(await readlink(path.join(dir, 'sub')), '..data/sub');
    assert.equal(await readFile(path.join(dir, 'sub/b'), 'utf8'), 'B');
    assert.equal((await stat(path.join(dir, ts))).mode & 0o7777, 0o755);
  });

  it('applies modes exactly whatever the umask', async () => {
    const old = process.umask(0o077);
    try {
      await new AtomicWriter(dir, { clock }).write(
        payload({ a: ['A', 0o644], b: ['B', 0o777], 'd/c': ['C', 0o600] }),
      );
    } finally {
      process.umask(old);
    }
    assert.equal((await stat(path.join(dir, 'a'))).mode & 0o7777, 0o644);
    assert.equal((await stat(path.join(dir, 'b'))).mode & 0o7777, 0o777);
    assert.equal((await stat(path.join(dir, 'd'))).mode & 0o7777, 0o755);
    assert.equal((await stat(path.join(dir, 'd/c'))).mode & 0o7777, 0o600);
  });

  it('does nothing for an identical payload and swaps for a changed one', async () => {
    const w = new AtomicWriter(dir, { clock });
    await w.write(payload({ a: ['A', 0o644], b: ['B', 0o644] }));
    const first = await readlink(path.join(dir, '..data'));
    assert.equal(await w.write(payload({ a: ['A', 0o644], b: ['B', 0o644] })), false);
    assert.equal(await readlink(path.join(dir, '..data')), first);
    // A mode change alone is a change.
    assert.equal(await w.write(payload({ a: ['A', 0o600], b: ['B', 0o644] })), true);
    const second = await readlink(path.join(dir, '..data'));
    assert.notEqual(second, first);
    // The old timestamped dir is gone.
    await assert.rejects(lstat(path.join(dir, first)), { code: 'ENOENT' });
    // Dropping an entry removes its link; content updates are visible through the link.
    assert.equal(await w.write(payload({ a: ['A2', 0o600] })), true);
    assert.deepEqual(
      (await readdir(dir)).filter((n) => !n.startsWith('..')),
      ['a'],
    );
    assert.equal(await readFile(path.join(dir, 'a'), 'utf8'), 'A2');
  });

  it('refuses an escaping path before writing anything', async () => {
    const w = new AtomicWriter(dir, { clock });
    await assert.rejects(
      w.write(payload({ ok: ['x', 0o644], '../../etc/x': ['evil', 0o644] })),
      (err: unknown) => err instanceof VolumeError && err.code === 'BERTH_VOLUME_PATH_ESCAPE',
    );
    assert.deepEqual(await readdir(dir), []);
    assert.deepEqual((await readdir(base)).sort(), ['vol']);
  });

  it('refuses a payload where one path is a file and a directory', async () => {
    await assert.rejects(
      new AtomicWriter(dir, { clock }).write(payload({ a: ['x', 0o644], 'a/b': ['y', 0o644] })),
      (err: unknown) => err instanceof VolumeError && err.code === 'BERTH_VOLUME_INVALID',
    );
  });

  it('refuses to replace a top-level entry that is not its link', async () => {
    await writeFile(path.join(dir, 'a'), 'planted');
    await assert.rejects(
      new AtomicWriter(dir, { clock }).write(payload({ a: ['x', 0o644] })),
      /not the link/,
    );
    assert.equal(await readFile(path.join(dir, 'a'), 'utf8'), 'planted');
  });

  it('with fsGroup sets the group, g+r on files and setgid on dirs', async () => {
    const w = new AtomicWriter(dir, { clock });
    await w.write(payload({ a: ['A', 0o600], 'd/c': ['C', 0o400] }), { fsGroup: 1234 });
    const a = await stat(path.join(dir, 'a'));
    assert.equal(a.gid, 1234);
    assert.equal(a.mode & 0o7777, 0o640);
    assert.equal((await stat(path.join(dir, 'd/c'))).mode & 0o7777, 0o440);
    const d = await stat(path.join(dir, 'd'));
    assert.equal(d.gid, 1234);
    assert.equal(d.mode & 0o7777, 0o2755);
    assert.equal(
      await w.write(payload({ a: ['A', 0o600], 'd/c': ['C', 0o400] }), { fsGroup: 1234 }),
      false,
    );
    // Another group is a change.
    assert.equal(
      await w.write(payload({ a: ['A', 0o600], 'd/c': ['C', 0o400] }), { fsGroup: 99 }),
      true,
    );
    assert.equal((await stat(path.join(dir, 'a'))).gid, 99);
  });
});
