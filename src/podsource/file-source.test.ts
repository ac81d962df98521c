import assert from 'node:assert/strict';
import { mkdtemp, mkdir, rm, symlink, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FileSource } from './file-source.ts';

const pod = (name: string, cmd = 'sleep'): string =>
  `apiVersion: v1\nkind: Pod\nmetadata: {name: ${name}}\nspec: {containers: [{name: c, image: busybox, command: [${cmd}]}]}\n`;

describe('FileSource', () => {
  let dir: string;
  let root: string;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'berth-file-source-'));
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  function source(path: string) {
    const updates: Pod[][] = [];
    const problems: [string, string][] = [];
    const clock = new FakeClock();
    const s = new FileSource({
      path,
      nodeName: 'n1',
      clock,
      logger: new MemoryLogger(),
      periodMs: 20_000,
      onUpdate: (pods) => updates.push(pods),
      onProblem: (where, message) => problems.push([where, message]),
    });
    return { s, updates, problems, clock };
  }

  test('reads every manifest but hidden files and directories, in name order', async () => {
    dir = await mkdtemp(join(root, 'm-'));
    await writeFile(join(dir, 'b.yaml'), pod('b'));
    await writeFile(
      join(dir, 'a.json'),
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'a' },
        spec: { containers: [{ name: 'c', image: 'i' }] },
      }),
    );
    await writeFile(join(dir, '.hidden.yaml'), pod('hidden'));
    await mkdir(join(dir, 'sub'));
    await writeFile(join(dir, 'sub', 'c.yaml'), pod('c'));
    const { s, updates, problems } = source(dir);
    await s.list();
    assert.deepEqual(
      updates.at(-1)?.map((p) => p.metadata?.name),
      ['a-n1', 'b-n1'],
    );
    assert.deepEqual(problems, []);
    assert.equal(
      updates.at(-1)?.[1]?.metadata?.annotations?.['kubernetes.io/config.hash'],
      updates.at(-1)?.[1]?.metadata?.uid,
    );
  });

  test('a missing path is an empty set (the source still counts as seen)', async () => {
    const { s, updates } = source(join(root, 'nothing-here'));
    await s.list();
    assert.deepEqual(updates, [[]]);
  });

  test('one file as staticPodPath', async () => {
    const file = join(root, 'single.yaml');
    await writeFile(file, pod('single'));
    const { s, updates } = source(file);
    await s.list();
    assert.deepEqual(
      updates.at(-1)?.map((p) => p.metadata?.name),
      ['single-n1'],
    );
  });

  test('bad manifests are reported once each and left out; the others stay', async () => {
    dir = await mkdtemp(join(root, 'bad-'));
    await writeFile(join(dir, 'good.yaml'), pod('good'));
    await writeFile(join(dir, 'broken.yaml'), 'kind: Pod\nmetadata: {name: [x\n');
    await writeFile(join(dir, 'dup1.yaml'), pod('dup', 'one'));
    await writeFile(join(dir, 'dup2.yaml'), pod('dup', 'two'));
    await writeFile(join(dir, 'huge.yaml'), '');
    await truncate(join(dir, 'huge.yaml'), 50 * 1024 * 1024);
    await writeFile(join(root, 'outside.yaml'), pod('outside'));
    await symlink(join(root, 'outside.yaml'), join(dir, 'link.yaml'));
    await writeFile(join(dir, '.target'), pod('inside'));
    await symlink(join(dir, '.target'), join(dir, 'inner-link.yaml'));
    const { s, updates, problems } = source(dir);
    await s.list();
    await s.list();
    const names = updates
      .at(-1)
      ?.map((p) => p.metadata?.name)
      .sort();
    assert.deepEqual(names, ['dup-n1', 'good-n1', 'inside-n1']);
    const dup = updates.at(-1)?.find((p) => p.metadata?.name === 'dup-n1');
    assert.deepEqual(dup?.spec?.containers[0]?.command, ['two']);
    const byFile = new Map(problems.map(([w, m]) => [w.slice(dir.length + 1), m]));
    assert.equal(problems.length, 4, 'each problem once, not once per read');
    assert.match(byFile.get('broken.yaml') ?? '', /error converting YAML/);
    assert.match(
      byFile.get('dup1.yaml') ?? '',
      /duplicate pod name "dup-n1": also defined in .*dup2.yaml/,
    );
    assert.match(byFile.get('huge.yaml') ?? '', /read limit is reached/);
    assert.match(byFile.get('link.yaml') ?? '', /symlink leads outside the manifest directory/);
    // Fixed, then broken again: reported again.
    await writeFile(join(dir, 'broken.yaml'), pod('broken'));
    await s.list();
    await writeFile(join(dir, 'broken.yaml'), 'nope: [');
    await s.list();
    assert.equal(problems.filter(([w]) => w.endsWith('broken.yaml')).length, 2);
  });

  test('a new manifest wakes the loop at once (inotify), not at the next period', async () => {
    dir = await mkdtemp(join(root, 'watch-'));
    const { s, updates, clock } = source(dir);
    const stop = new AbortController();
    const running = s.run(stop.signal);
    let advanced = 0;
    const until = async (ok: () => boolean): Promise<void> => {
      // The fake clock never reaches the 20 s period: only the watch can wake the loop.
      for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setImmediate(r));
      const deadline = Date.now() + 5000;
      while (!ok() && Date.now() < deadline) {
        // Past the short settling wait after a watch event, never near the 20 s period.
        if (advanced < 2000) {
          advanced += 100;
          await clock.advance(100);
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    await until(() => updates.length === 1);
    await writeFile(join(dir, 'new.yaml'), pod('new'));
    await until(() => updates.some((u) => u.length === 1));
    stop.abort();
    await running;
    assert.deepEqual(
      updates.at(-1)?.map((p) => p.metadata?.name),
      ['new-n1'],
    );
  });
});
