import assert from 'node:assert/strict';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { cri } from '../cri/index.ts';
import { logTail, terminationMessage } from './termination-message.ts';

const dir = await mkdtemp(join(tmpdir(), 'berth-term-'));
after(() => rm(dir, { recursive: true, force: true }));

function status(o: {
  hostFile?: string;
  policy?: string;
  exitCode?: number;
  reason?: string;
  logPath?: string;
}): cri.ContainerStatus {
  return cri.ContainerStatus.fromPartial({
    id: 'c1',
    exitCode: o.exitCode ?? 1,
    reason: o.reason ?? 'Error',
    logPath: o.logPath ?? '',
    annotations: {
      'io.kubernetes.container.terminationMessagePath': '/dev/termination-log',
      'io.kubernetes.container.terminationMessagePolicy': o.policy ?? 'File',
    },
    mounts:
      o.hostFile === undefined
        ? []
        : [{ containerPath: '/dev/termination-log', hostPath: o.hostFile }],
  });
}

test('the message file is read, at most 4 KiB of it', async () => {
  const f = join(dir, 'msg');
  await writeFile(f, 'x'.repeat(10_000));
  assert.equal((await terminationMessage(status({ hostFile: f }))).length, 4096);
  await writeFile(f, 'done: 42 widgets');
  assert.equal(await terminationMessage(status({ hostFile: f })), 'done: 42 widgets');
});

test('a symlink in place of the message file is not followed', async () => {
  const secret = join(dir, 'host-secret');
  await writeFile(secret, 'host data');
  const link = join(dir, 'link');
  await symlink(secret, link);
  assert.equal(await terminationMessage(status({ hostFile: link })), '');
});

test('FallbackToLogsOnError: the log tail of a failed, silent container', async () => {
  const f = join(dir, 'empty');
  await writeFile(f, '');
  const log = join(dir, 'log');
  const lines = Array.from(
    { length: 100 },
    (_, i) => `2026-12-02T10:00:00.000000000Z stdout F line ${i}`,
  );
  await writeFile(log, `${lines.join('\n')}\n`);
  const msg = await terminationMessage(
    status({ hostFile: f, policy: 'FallbackToLogsOnError', logPath: log }),
  );
  assert.ok(msg.startsWith('line 20\n'), 'the last 80 lines');
  assert.ok(msg.endsWith('line 99\n'));
  // Not for a container that succeeded, nor with the File policy.
  assert.equal(
    await terminationMessage(
      status({ hostFile: f, policy: 'FallbackToLogsOnError', logPath: log, exitCode: 0 }),
    ),
    '',
  );
  assert.equal(await terminationMessage(status({ hostFile: f, logPath: log })), '');
});

test('logTail keeps at most the byte limit and joins partial lines', async () => {
  const log = join(dir, 'log2');
  await writeFile(
    log,
    '2026-12-02T10:00:00Z stdout P abc\n2026-12-02T10:00:00Z stdout F def\n' +
      `2026-12-02T10:00:01Z stderr F ${'y'.repeat(5000)}\n`,
  );
  const tail = await logTail(log, 80, 2048);
  assert.equal(tail.length, 2048);
  // 80 counts records, as upstream's tail does: the last two start with the F fragment.
  assert.equal(await logTail(log, 3, 100_000).then((t) => t.startsWith('abcdef\n')), true);
  assert.equal(await logTail(log, 2, 100_000).then((t) => t.startsWith('def\n')), true);
});

test('a message file over 4 KiB keeps its end, as upstream reads it', async () => {
  const f = join(dir, 'long-msg');
  await writeFile(f, `${'x'.repeat(10_000)}the end`);
  const msg = await terminationMessage(status({ hostFile: f }));
  assert.equal(msg.length, 4096);
  assert.ok(msg.endsWith('xthe end'));
});

test('FallbackToLogsOnError: output without a final newline (echo -n DONE) is the message', async () => {
  const f = join(dir, 'empty-echo');
  await writeFile(f, '');
  const log = join(dir, 'log-echo-n');
  await writeFile(log, '2026-12-02T10:00:00.000000000Z stdout P DONE\n');
  const s = status({ hostFile: f, policy: 'FallbackToLogsOnError', logPath: log });
  assert.equal(await terminationMessage(s), 'DONE');
  // Fragments join; the last one, with no record after it, gets no newline.
  await writeFile(
    log,
    '2026-12-02T10:00:00Z stdout F first\n2026-12-02T10:00:01Z stdout P DO\n' +
      '2026-12-02T10:00:02Z stderr P NE\n',
  );
  assert.equal(await terminationMessage(s), 'first\nDONE');
  assert.equal(await logTail(log, 2, 2048), 'DONE');
  assert.equal(await logTail(log, 1, 2048), 'NE');
});

test('FallbackToLogsOnError: not for a container that could not even start', async () => {
  const log = join(dir, 'log-cannot-run');
  await writeFile(log, '2026-12-02T10:00:00.000000000Z stderr F exec failed\n');
  const base = { policy: 'FallbackToLogsOnError', logPath: log };
  assert.equal(await terminationMessage(status(base)), 'exec failed\n');
  assert.equal(await terminationMessage(status({ ...base, reason: 'ContainerCannotRun' })), '');
});
