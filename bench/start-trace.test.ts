import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { lineTime, sandboxTimes, traceStarts } from './start-trace.ts';

const now = new Date('2026-12-07T10:00:00Z');

test('reads the time of a berth line and of a klog line', () => {
  assert.equal(
    lineTime('D 2026-12-07T05:12:24.475Z Creating PodSandbox for pod pod="a/b"', now),
    Date.parse('2026-12-07T05:12:24.475Z'),
  );
  // klog writes local time without a year.
  const klog = lineTime(
    'I1207 05:12:24.475123   4242 kuberuntime_manager.go:1684] "Creating PodSandbox for pod" pod="a/b"',
    now,
  );
  assert.equal(klog, new Date(2026, 11, 7, 5, 12, 24, 475.123).getTime());
  assert.equal(lineTime('not a log line', now), undefined);
});

test('takes the first Creating and Created line of each pod of the namespace', () => {
  const log = [
    'D 2026-12-07T05:00:00.100Z Creating PodSandbox for pod component="kuberuntime" pod="ns/p1" podUID="u"',
    'D 2026-12-07T05:00:00.300Z Created PodSandbox for pod component="kuberuntime" pod="ns/p1" podSandboxID="s"',
    'D 2026-12-07T05:00:09.000Z Creating PodSandbox for pod component="kuberuntime" pod="ns/p1" podUID="u"',
    'D 2026-12-07T05:00:00.200Z Creating PodSandbox for pod component="kuberuntime" pod="other/p1"',
  ].join('\n');
  const times = sandboxTimes(log, 'ns', now);
  assert.deepEqual([...times.keys()], ['p1']);
  assert.deepEqual(times.get('p1'), {
    creating: Date.parse('2026-12-07T05:00:00.100Z'),
    created: Date.parse('2026-12-07T05:00:00.300Z'),
  });
});

test('splits each start into phases, slowest first, and counts pods the log lacks', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'start-trace-'));
  try {
    const file = join(dir, 'agent.log');
    const t = (s: string): number => Date.parse(`2026-12-07T05:00:${s}Z`);
    await writeFile(
      file,
      [
        'I 2026-12-07T05:00:00.050Z Creating PodSandbox for pod pod="ns/fast"',
        'I 2026-12-07T05:00:00.150Z Created PodSandbox for pod pod="ns/fast"',
        'I 2026-12-07T05:00:01.050Z Creating PodSandbox for pod pod="ns/slow"',
        'I 2026-12-07T05:00:02.000Z Created PodSandbox for pod pod="ns/slow"',
      ].join('\n'),
    );
    const trace = await traceStarts(file, 'ns', [
      { name: 'fast', createdAtMs: t('00.000'), runningAtMs: t('00.200') },
      { name: 'slow', createdAtMs: t('01.000'), runningAtMs: t('02.100') },
      { name: 'absent', createdAtMs: t('03.000'), runningAtMs: t('03.200') },
    ]);
    assert.equal(trace.missing, 1);
    assert.deepEqual(trace.slowest[0], {
      name: 'slow',
      totalMs: 1100,
      toSandboxMs: 50,
      sandboxMs: 950,
      containersMs: 100,
    });
    assert.equal(trace.slowest[1]?.name, 'fast');
    assert.equal(trace.p50.toSandboxMs, 50);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
