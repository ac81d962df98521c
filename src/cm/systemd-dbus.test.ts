/**
 * DbusSystemd on the wire: a private dbus-daemon and a stand-in for systemd1 that
 * answers the manager's methods as systemd does (job paths, JobRemoved, D-Bus
 * errors), so the signatures, variants and job tracking are checked for real. The
 * real systemd answers the same calls in the VM tests (test/vm/cgroup-v2*.test.ts).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Message, MessageType, sessionBus, Variant, type MessageBus } from '@jellybrick/dbus-next';
import { systemClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { DbusSystemd, type JobResult } from './systemd-dbus.ts';

const MANAGER = 'org.freedesktop.systemd1.Manager';
const haveDaemon = await new Promise<boolean>((resolve) => {
  const p = spawn('dbus-daemon', ['--version'], { stdio: 'ignore' });
  p.once('error', () => {
    resolve(false);
  });
  p.once('exit', (code) => {
    resolve(code === 0);
  });
});

interface Received {
  readonly member: string;
  readonly signature: string;
  readonly body: unknown[];
}

describe('DbusSystemd against a scripted systemd1 on a private bus', { skip: !haveDaemon }, () => {
  let dir = '';
  let daemon: ChildProcess | undefined;
  let address = '';
  let server: MessageBus | undefined;
  const received: Received[] = [];
  /** What the next StartTransientUnit/StopUnit job ends with, or a D-Bus error to answer. */
  const script: { result?: string; error?: string; signalFirst?: boolean } = {};
  let jobs = 0;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-dbus-'));
    const d = spawn(
      'dbus-daemon',
      ['--session', '--nofork', '--print-address', `--address=unix:path=${join(dir, 'bus')}`],
      // stderr: it complains it cannot raise its fd limit unprivileged; harmless here.
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    daemon = d;
    address = await new Promise<string>((resolve, reject) => {
      let out = '';
      d.stdout?.setEncoding('utf8').on('data', (s: string) => {
        out += s;
        if (out.includes('\n')) resolve(out.trim());
      });
      d.once('exit', (code) => {
        reject(new Error(`dbus-daemon exited with ${String(code)}`));
      });
    });
    const bus = sessionBus({ busAddress: address });
    server = bus;
    await bus.requestName('org.freedesktop.systemd1', 0);
    bus.addMethodHandler((msg: Message) => {
      if (msg.type !== MessageType.METHOD_CALL) return false;
      received.push({ member: msg.member ?? '', signature: msg.signature, body: msg.body });
      if (script.error !== undefined) {
        const name = script.error;
        delete script.error;
        bus.send(Message.newError(msg, name, 'scripted'));
        return true;
      }
      if (msg.member === 'StartTransientUnit' || msg.member === 'StopUnit') {
        const job = `/org/freedesktop/systemd1/job/${String(++jobs)}`;
        const removed = Message.newSignal(
          '/org/freedesktop/systemd1',
          MANAGER,
          'JobRemoved',
          'uoss',
          [jobs, job, msg.body[0], script.result ?? 'done'],
        );
        delete script.result;
        // systemd may announce the end before the caller reads the reply.
        if (script.signalFirst === true) bus.send(removed);
        bus.send(Message.newMethodReturn(msg, 'o', [job]));
        if (script.signalFirst !== true)
          setImmediate(() => {
            bus.send(removed);
          });
        return true;
      }
      if (msg.member === 'Get') {
        bus.send(Message.newMethodReturn(msg, 'v', [new Variant('s', '252.39-1~deb12u1')]));
        return true;
      }
      bus.send(Message.newMethodReturn(msg, '', []));
      return true;
    });
  });

  after(async () => {
    server?.disconnect();
    daemon?.kill();
    await rm(dir, { recursive: true, force: true });
  });

  function client(): DbusSystemd {
    return new DbusSystemd({
      clock: systemClock,
      logger: new MemoryLogger(),
      connect: () => sessionBus({ busAddress: address }),
    });
  }

  test('StartTransientUnit carries the properties as a(sv) and waits for JobRemoved', async () => {
    const sd = client();
    try {
      const result = await sd.startTransientUnit(
        'kubepods.slice',
        'replace',
        [
          { name: 'Wants', type: 'as', value: ['-.slice'] },
          { name: 'TasksMax', type: 't', value: 2n ** 64n - 1n },
          { name: 'CPUAccounting', type: 'b', value: true },
        ],
        AbortSignal.timeout(20_000),
      );
      assert.equal(result, 'done');
      const call = received.findLast((r) => r.member === 'StartTransientUnit');
      assert.equal(call?.signature, 'ssa(sv)a(sa(sv))');
      assert.equal(call?.body[0], 'kubepods.slice');
      assert.equal(call?.body[1], 'replace');
      const props = call?.body[2] as [string, { signature: string; value: unknown }][];
      assert.deepEqual(
        props.map(([n, v]) => [n, v.signature, v.value]),
        [
          ['Wants', 'as', ['-.slice']],
          ['TasksMax', 't', 2n ** 64n - 1n],
          ['CPUAccounting', 'b', true],
        ],
      );
      assert.ok(received.some((r) => r.member === 'Subscribe'));
    } finally {
      sd.close();
    }
  });

  test('job results, signals before replies, UnitExists and NoSuchUnit', async () => {
    const sd = client();
    const signal = AbortSignal.timeout(20_000);
    try {
      script.result = 'failed';
      assert.equal(await sd.startTransientUnit('a.slice', 'replace', [], signal), 'failed');
      script.signalFirst = true;
      const early: JobResult = await sd.stopUnit('a.slice', 'replace', signal);
      script.signalFirst = false;
      assert.equal(early, 'done');
      script.error = 'org.freedesktop.systemd1.UnitExists';
      assert.equal(await sd.startTransientUnit('a.slice', 'replace', [], signal), 'exists');
      script.error = 'org.freedesktop.systemd1.NoSuchUnit';
      assert.equal(await sd.stopUnit('a.slice', 'replace', signal), 'missing');
      assert.equal(await sd.version(signal), 252);
    } finally {
      sd.close();
    }
  });

  test('other D-Bus errors are typed with the D-Bus name; the next call works', async () => {
    const sd = client();
    const signal = AbortSignal.timeout(20_000);
    try {
      script.error = 'org.freedesktop.DBus.Error.AccessDenied';
      await assert.rejects(
        sd.setUnitProperties(
          'a.slice',
          true,
          [{ name: 'CPUWeight', type: 't', value: 10n }],
          signal,
        ),
        { code: 'BERTH_CGROUP_SYSTEMD_BUS', dbusError: 'org.freedesktop.DBus.Error.AccessDenied' },
      );
      await sd.setUnitProperties(
        'a.slice',
        true,
        [{ name: 'CPUWeight', type: 't', value: 10n }],
        signal,
      );
      const call = received.findLast((r) => r.member === 'SetUnitProperties');
      assert.equal(call?.signature, 'sba(sv)');
      assert.deepEqual(call?.body.slice(0, 2), ['a.slice', true]);
    } finally {
      sd.close();
    }
  });

  test('without a bus the error is typed, and a closed client refuses calls', async () => {
    const sd = new DbusSystemd({
      clock: systemClock,
      logger: new MemoryLogger(),
      connect: () => sessionBus({ busAddress: `unix:path=${join(dir, 'nothing-here')}` }),
    });
    await assert.rejects(sd.resetFailedUnit('a.slice', AbortSignal.timeout(20_000)), {
      code: 'BERTH_CGROUP_SYSTEMD_BUS',
    });
    sd.close();
    await assert.rejects(sd.resetFailedUnit('a.slice', AbortSignal.timeout(20_000)), {
      code: 'BERTH_CGROUP_SYSTEMD_BUS',
    });
  });
});
