import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readlink, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { MemoryLogger } from '../util/logger.ts';
import { containerIdOfLink, LogSymlinks } from './log-symlinks.ts';

const pod = { namespace: 'shop', name: 'web' };
const ID = 'abcdef0123456789';

describe('LogSymlinks', () => {
  let root: string;
  let links: LogSymlinks;
  let logger: MemoryLogger;
  let logFile: string;
  beforeEach(async () => {
    logger = new MemoryLogger();
    root = await mkdtemp(path.join(tmpdir(), 'berth-log-links-'));
    links = new LogSymlinks({ dir: path.join(root, 'containers'), logger });
    await links.ensureDir();
    logFile = path.join(root, 'pods', 'shop_web_uid', 'main', '0.log');
    await mkdir(path.dirname(logFile), { recursive: true });
    await writeFile(logFile, '');
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  test("links the log under upstream's name, and only when the log exists", async () => {
    await links.link(pod, 'main', ID, logFile);
    const name = `web_shop_main-${ID}.log`;
    assert.deepEqual(await readdir(links.dir), [name]);
    assert.equal(await readlink(path.join(links.dir, name)), logFile);
    await links.link(pod, 'side', `${ID}9`, path.join(root, 'missing.log'));
    assert.deepEqual(await readdir(links.dir), [name]);
    // A second link of the same container is logged, not thrown.
    await links.link(pod, 'main', ID, logFile);
    assert.deepEqual(
      logger.records.map((r) => [r.level, r.msg]),
      [['error', 'Failed to create legacy symbolic link']],
    );
  });

  test('unlinks with the container; an absent link is fine', async () => {
    await links.link(pod, 'main', ID, logFile);
    await links.unlink(pod, 'main', ID);
    assert.deepEqual(await readdir(links.dir), []);
    await links.unlink(pod, 'main', ID);
  });

  test('removes dead links unless their container has not exited', async () => {
    await links.link(pod, 'main', ID, logFile);
    const otherLog = path.join(root, 'other.log');
    await writeFile(otherLog, '');
    await links.link(pod, 'rotating', 'fedcba9876543210', otherLog);
    await links.link(pod, 'gone', '0123456789abcdef', otherLog);
    await writeFile(path.join(links.dir, 'notes.log'), 'not a link');
    await rm(otherLog);
    const asked: string[] = [];
    const removed = await links.removeDead((id) => {
      asked.push(id);
      return Promise.resolve(id === 'fedcba9876543210');
    });
    assert.equal(removed, 1);
    assert.deepEqual(asked.sort(), ['0123456789abcdef', 'fedcba9876543210']);
    assert.deepEqual((await readdir(links.dir)).sort(), [
      'notes.log',
      `web_shop_main-${ID}.log`,
      'web_shop_rotating-fedcba9876543210.log',
    ]);
  });
});

test('the container ID is what follows the last dash, at least 6 characters', () => {
  assert.equal(containerIdOfLink(`a-b_ns_c-${ID}.log`), ID);
  assert.equal(containerIdOfLink('a_ns_c-12345.log'), undefined);
  assert.equal(containerIdOfLink(`a_ns_c-${ID}.txt`), undefined);
});
