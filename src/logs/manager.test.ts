import assert from 'node:assert/strict';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { cri } from '../cri/index.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { allLogFiles, rotationTimestamp, splitRotated } from './files.ts';
import { CriContainerLogManager, logRotatePolicy } from './manager.ts';

const IMAGE = 'registry.test/app:1';
const START = Date.UTC(2026, 0, 1, 15, 4, 5);
let root = '';

before(async () => {
  root = await mkdtemp(join(tmpdir(), 'berth-logrot-'));
});
after(async () => {
  await rm(root, { recursive: true, force: true });
});

interface Setup {
  readonly fake: FakeCriClient;
  readonly clock: FakeClock;
  readonly logger: MemoryLogger;
  readonly manager: CriContainerLogManager;
  readonly podLogs: string;
  run(logDirectory: string, name?: string): Promise<{ id: string; log: string }>;
}

async function setup(maxFiles = 3, maxSize = '50'): Promise<Setup> {
  const clock = new FakeClock(START);
  const fake = new FakeCriClient({ clock });
  fake.addImage(IMAGE, { preloaded: true });
  const podLogs = await mkdtemp(join(root, 'pods-'));
  const logger = new MemoryLogger();
  const manager = new CriContainerLogManager(
    logRotatePolicy({
      containerLogMaxSize: maxSize,
      containerLogMaxFiles: maxFiles,
      containerLogMaxWorkers: 2,
      containerLogMonitorIntervalMs: 10_000,
    }),
    { cri: fake, clock, logger, podLogsDir: podLogs },
  );
  const run = async (logDirectory: string, name = 'app'): Promise<{ id: string; log: string }> => {
    const config = cri.PodSandboxConfig.fromPartial({
      metadata: { name: 'p', uid: `u-${name}`, namespace: 'ns' },
      logDirectory,
    });
    const { podSandboxId } = await fake.runtime.runPodSandbox({ config });
    const { containerId } = await fake.runtime.createContainer({
      podSandboxId,
      sandboxConfig: config,
      config: { metadata: { name }, image: { image: IMAGE }, logPath: `${name}/0.log` },
    });
    await fake.runtime.startContainer({ containerId });
    await mkdir(join(logDirectory, name), { recursive: true });
    return { id: containerId, log: join(logDirectory, name, '0.log') };
  };
  return { fake, clock, logger, manager, podLogs, run };
}

const big = (tag: string): string => `${tag}\n`.repeat(40);

describe('rotated file names', () => {
  test('the stamp is upstream layout 20060102-150405', () => {
    assert.equal(rotationTimestamp(Date.UTC(2006, 9, 8, 15, 4, 5)), '20061008-150405');
  });

  test('leftovers of an interrupted rotation are told apart and order is by stamp', () => {
    const { inUse, unused } = splitRotated('/d/0.log', [
      '0.log',
      '0.log.20260101-000002',
      '0.log.20260101-000001.gz',
      '0.log.20260101-000000',
      '0.log.20260101-000000.gz',
      '0.log.20260101-000003.gz.tmp',
      '1.log.20250101-000000',
    ]);
    assert.deepEqual(inUse, [
      '/d/0.log.20260101-000000.gz',
      '/d/0.log.20260101-000001.gz',
      '/d/0.log.20260101-000002',
    ]);
    assert.deepEqual(unused, ['/d/0.log.20260101-000000', '/d/0.log.20260101-000003.gz.tmp']);
  });
});

describe('CriContainerLogManager', () => {
  test('rotates past maxSize, reopens, gzips older files and keeps maxFiles', async () => {
    const s = await setup(3);
    const { id, log } = await s.run(join(s.podLogs, 'ns_p_u1'));
    const signal = new AbortController().signal;
    await writeFile(log, 'small\n');
    await s.manager.rotateLogs(signal);
    assert.equal(s.fake.callsTo('RuntimeService/ReopenContainerLog').length, 0, 'under maxSize');

    const rounds = ['a', 'b', 'c', 'd'];
    for (const tag of rounds) {
      await writeFile(log, big(tag));
      await s.manager.rotateLogs(signal);
      await s.clock.advance(10_000);
    }
    const reopened = s.fake.callsTo('RuntimeService/ReopenContainerLog') as {
      containerId: string;
    }[];
    assert.deepEqual(
      reopened.map((r) => r.containerId),
      [id, id, id, id],
    );
    // The runtime would create the live file on reopen; the fake does not.
    await writeFile(log, 'live\n');
    const files = (await readdir(join(s.podLogs, 'ns_p_u1', 'app'))).sort();
    const stamp = (i: number): string => rotationTimestamp(START + i * 10_000);
    assert.deepEqual(files, ['0.log', `0.log.${stamp(2)}.gz`, `0.log.${stamp(3)}`]);
    const all = await allLogFiles(log);
    assert.equal(all.length, 3);
    assert.equal(gunzipSync(await readFile(all[0] ?? '')).toString(), big('c'));
    assert.equal(await readFile(all[1] ?? '', 'utf8'), big('d'));
  });

  test('a failed reopen renames the file back', async () => {
    const s = await setup();
    const { log } = await s.run(join(s.podLogs, 'ns_p_u1'));
    await writeFile(log, big('x'));
    s.fake.failNext('RuntimeService/ReopenContainerLog', { grpcCode: GrpcStatus.UNAVAILABLE });
    await s.manager.rotateLogs(new AbortController().signal);
    assert.deepEqual(await readdir(join(s.podLogs, 'ns_p_u1', 'app')), ['0.log']);
    assert.ok(s.logger.records.some((r) => r.msg === 'Failed to rotate container log'));
  });

  test('a symlinked log, a symlinked directory or a path outside the root are skipped', async () => {
    const s = await setup();
    const outside = await mkdtemp(join(root, 'outside-'));
    await writeFile(join(outside, 'victim'), big('v'));
    // The live file itself is a planted link to a host file.
    const a = await s.run(join(s.podLogs, 'ns_a_u'), 'a');
    await symlink(join(outside, 'victim'), a.log);
    // The container directory is a link out of the root.
    const bDir = join(s.podLogs, 'ns_b_u');
    await mkdir(bDir, { recursive: true });
    await symlink(outside, join(bDir, 'b'));
    await s.run(bDir, 'b');
    // The runtime reports a log outside podLogsDir altogether.
    const c = await s.run(join(outside, 'pods'), 'c');
    await writeFile(c.log, big('c'));
    await s.manager.rotateLogs(new AbortController().signal);
    assert.equal(s.fake.callsTo('RuntimeService/ReopenContainerLog').length, 0);
    assert.deepEqual((await readdir(outside)).sort(), ['pods', 'victim']);
    assert.deepEqual(await readdir(join(outside, 'pods', 'c')), ['0.log']);
    const skipped = s.logger.records.filter((r) => r.msg.startsWith('Skipping container log'));
    assert.equal(skipped.length, 3, JSON.stringify(s.logger.records));
  });

  test('run() ticks every monitor interval and stops on abort', async () => {
    const s = await setup();
    const { log } = await s.run(join(s.podLogs, 'ns_p_u1'));
    await writeFile(log, big('x'));
    const abort = new AbortController();
    const running = s.manager.run(abort.signal);
    await s.clock.advance(9_999);
    assert.equal(s.fake.callsTo('RuntimeService/ReopenContainerLog').length, 0);
    await s.clock.advance(1);
    // The pass does real file I/O (stat, rename): give it real time, up to 10 s under load.
    for (
      let i = 0;
      i < 1000 && s.fake.callsTo('RuntimeService/ReopenContainerLog').length === 0;
      i++
    )
      await new Promise((r) => setTimeout(r, 10));
    assert.equal(s.fake.callsTo('RuntimeService/ReopenContainerLog').length, 1);
    abort.abort();
    await running;
  });

  test('clean removes the live and rotated files of a container', async () => {
    const s = await setup();
    const { id, log } = await s.run(join(s.podLogs, 'ns_p_u1'));
    await writeFile(log, big('x'));
    await writeFile(`${log}.20250101-000000.gz`, 'old');
    await writeFile(join(s.podLogs, 'ns_p_u1', 'app', '1.log'), 'other');
    await s.manager.clean(id, new AbortController().signal);
    assert.deepEqual(await readdir(join(s.podLogs, 'ns_p_u1', 'app')), ['1.log']);
    // A container the runtime no longer knows has nothing left to clean.
    await s.manager.clean('gone', new AbortController().signal);
  });

  test('the policy rejects what upstream rejects', () => {
    const base = {
      containerLogMaxSize: '10Mi',
      containerLogMaxFiles: 5,
      containerLogMaxWorkers: 1,
      containerLogMonitorIntervalMs: 10_000,
    };
    assert.equal(logRotatePolicy(base).maxSizeBytes, 10 * 1024 * 1024);
    assert.throws(() => logRotatePolicy({ ...base, containerLogMaxFiles: 1 }), /must be > 1/);
    assert.throws(() => logRotatePolicy({ ...base, containerLogMaxSize: '1.5' }), /whole number/);
  });
});
