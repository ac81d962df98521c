/**
 * The OOM watcher on kernel log fixtures: a global OOM is a SystemOOM Warning on the Node
 * with upstream's text, a container's own limit is not, legacy kernels' wording, record
 * parsing errors with kmsgparser's texts, a malformed record skipped.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MemoryEventRecorder } from '../events/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FakeKmsgSource } from './fake.ts';
import { isSystemOom, OomParser, parseKmsgRecord, systemOomMessage } from './parser.ts';
import {
  containerOom,
  legacyContainerOom,
  legacySystemOom,
  noise,
  systemOom,
} from './testdata/fixtures.ts';
import { OomError, type OomInstance } from './types.ts';
import { OomWatcher } from './watcher.ts';

const BOOT = 1_700_000_000_000;

function parseAll(records: readonly string[]): OomInstance[] {
  const errors: OomError[] = [];
  const parser = new OomParser((e) => errors.push(e));
  const out: OomInstance[] = [];
  for (const r of records) {
    const oom = parser.feed(parseKmsgRecord(r, BOOT));
    if (oom !== undefined) out.push(oom);
  }
  assert.deepEqual(errors, []);
  return out;
}

describe('parseKmsgRecord', () => {
  test('reads priority, sequence, time since boot and the first line of text', () => {
    assert.deepEqual(parseKmsgRecord('6,42,1500000,-;hello; world\n SUBSYSTEM=x', BOOT), {
      priority: 6,
      sequence: 42,
      timestampMs: BOOT + 1500,
      message: 'hello; world',
    });
  });

  test("kmsgparser's errors for malformed records", () => {
    assert.throws(() => parseKmsgRecord('no separator', BOOT), /invalid kmsg; must contain a ';'/);
    assert.throws(
      () => parseKmsgRecord('6,1;text', BOOT),
      /must contain at least 3 ',' separated pieces/,
    );
    assert.throws(() => parseKmsgRecord('x,1,2,-;t', BOOT), /could not parse "x" as priority/);
    assert.throws(
      () => parseKmsgRecord('6,1,later,-;t', BOOT),
      (e: unknown) => e instanceof OomError && e.code === 'BERTH_OOM_KMSG_MALFORMED',
    );
  });
});

describe('OomParser', () => {
  test('a global OOM: victim cgroup "/", pid and name from "Killed process"', () => {
    const [oom, ...rest] = parseAll([...noise(), ...systemOom()]);
    assert.equal(rest.length, 0);
    assert.ok(oom !== undefined);
    assert.equal(oom.victimContainerName, '/');
    assert.equal(oom.containerName, '/');
    assert.equal(oom.pid, 4243);
    assert.equal(oom.processName, 'stress');
    assert.equal(oom.timeOfDeathMs, BOOT + 5000.04);
    assert.ok(isSystemOom(oom));
    assert.equal(
      systemOomMessage(oom),
      'System OOM encountered, victim process: stress, pid: 4243',
    );
  });

  test("a container over its own limit: the oom-kill summary's cgroups, not a system OOM", () => {
    const [oom] = parseAll(containerOom());
    assert.ok(oom !== undefined);
    assert.equal(oom.victimContainerName, '/kubepods/burstable/pod1234/0123abcd');
    assert.equal(oom.containerName, '/kubepods/burstable/pod1234/0123abcd');
    assert.equal(oom.constraint, 'CONSTRAINT_MEMCG');
    assert.equal(oom.pid, 5555);
    assert.equal(oom.processName, 'python3');
    assert.equal(isSystemOom(oom), false);
  });

  test('legacy kernels: "Task in" names the cgroups; without it the OOM is system-wide', () => {
    const [container, system] = parseAll([...legacyContainerOom(), ...legacySystemOom()]);
    assert.equal(container?.victimContainerName, '/kubepods/pod77');
    assert.equal(container?.containerName, '/kubepods/pod77/abc');
    assert.equal(container?.pid, 77);
    assert.equal(system?.victimContainerName, '/');
    assert.equal(system?.processName, 'java');
    assert.equal(system?.pid, 88);
  });

  test('without a process the message is the short one', () => {
    const oom: OomInstance = {
      pid: 0,
      processName: '',
      timeOfDeathMs: 0,
      containerName: '/',
      victimContainerName: '/',
      constraint: '',
    };
    assert.equal(systemOomMessage(oom), 'System OOM encountered');
  });
});

describe('OomWatcher', () => {
  function setup() {
    const source = new FakeKmsgSource();
    const recorder = new MemoryEventRecorder();
    const clock = new FakeClock();
    const logger = new MemoryLogger();
    const seen: OomInstance[] = [];
    const watcher = new OomWatcher({
      source,
      recorder,
      clock,
      logger,
      nodeName: 'node-a',
      bootTimeMs: () => Promise.resolve(BOOT),
      onOom: (o) => seen.push(o),
    });
    return { source, recorder, clock, logger, seen, watcher };
  }

  async function until(check: () => boolean, clock: FakeClock): Promise<void> {
    for (let i = 0; i < 200 && !check(); i++) {
      await new Promise((r) => setImmediate(r));
      await clock.advance(1000);
    }
    assert.ok(check(), 'condition reached');
  }

  test('SystemOOM on the Node for a global kill only; a bad record is skipped', async () => {
    const { source, recorder, clock, logger, seen, watcher } = setup();
    source.push(...containerOom(), 'garbage without separator', ...systemOom());
    const stop = new AbortController();
    const done = watcher.run(stop.signal);
    await until(() => seen.length === 2, clock);
    assert.deepEqual(recorder.events, [
      {
        target: { kind: 'Node', name: 'node-a', uid: 'node-a' },
        type: 'Warning',
        reason: 'SystemOOM',
        message: 'System OOM encountered, victim process: stress, pid: 4243',
      },
    ]);
    assert.ok(logger.records.some((e) => /malformed kmsg record/.test(e.msg)));
    // Records arriving later are read on the next poll.
    source.push(...legacySystemOom());
    await until(() => recorder.events.length === 2, clock);
    assert.equal(
      recorder.events[1]?.message,
      'System OOM encountered, victim process: java, pid: 88',
    );
    stop.abort();
    await done;
    assert.ok(source.closed);
  });

  test('a log that cannot be read is logged once and the watcher ends', async () => {
    const { recorder, clock, logger } = setup();
    const watcher = new OomWatcher({
      source: {
        read: () =>
          Promise.reject(
            new OomError(
              'BERTH_OOM_KMSG_OPEN',
              'Cannot watch for OOM kills as /dev/kmsg cannot be opened: EACCES',
            ),
          ),
        close: () => Promise.resolve(),
      },
      recorder,
      clock,
      logger,
      nodeName: 'node-a',
      bootTimeMs: () => Promise.resolve(BOOT),
    });
    await watcher.run(new AbortController().signal);
    assert.equal(recorder.events.length, 0);
    const errors = logger.records.filter((e) => e.level === 'error');
    assert.equal(errors.length, 1);
    assert.match(String(errors[0]?.fields['error']), /EACCES/);
  });
});
