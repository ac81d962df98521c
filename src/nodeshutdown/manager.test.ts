import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { nodeShutdownAdmitHandler } from '../admission/node-shutdown.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FakeLogind } from './fake.ts';
import { LogindShutdownManager, STATUS_SETTLE_MS } from './manager.ts';
import { ShutdownStateStorage } from './storage.ts';
import type { ShutdownGracePeriodByPodPriority } from './types.ts';

function pod(name: string, priority: number): Pod {
  return {
    metadata: { name, namespace: 'default', uid: `uid-${name}` },
    spec: { containers: [{ name: 'c', image: 'x' }], priority },
  };
}

const PERIODS: ShutdownGracePeriodByPodPriority[] = [
  { priority: 0, shutdownGracePeriodSeconds: 4 },
  { priority: 1000, shutdownGracePeriodSeconds: 2 },
];

async function settle(clock: FakeClock, ms = 0): Promise<void> {
  for (let i = 0; i < 5; i++) {
    await clock.advance(ms / 5);
    await new Promise<void>((r) => setImmediate(r));
  }
}

function setup(periods = PERIODS, statusesSent?: () => Promise<void>) {
  const clock = new FakeClock();
  const logind = new FakeLogind();
  const logger = new MemoryLogger();
  const recorder = new MemoryEventRecorder();
  const killed: string[] = [];
  let nodeSyncs = 0;
  const manager = new LogindShutdownManager({
    periods,
    connect: () => logind.connect(),
    activePods: () => [pod('web', 0), pod('db', 1000)],
    killPod: async (p) => {
      killed.push(p.metadata?.name ?? '');
      return Promise.resolve();
    },
    syncNodeStatus: async () => {
      nodeSyncs++;
      return Promise.resolve();
    },
    recorder,
    node: { kind: 'Node', name: 'n1', uid: 'n1' },
    clock,
    logger,
    ...(statusesSent !== undefined && { statusesSent }),
  });
  const controller = new AbortController();
  const running = manager.run(controller.signal);
  return {
    clock,
    logind,
    logger,
    recorder,
    killed,
    manager,
    nodeSyncs: () => nodeSyncs,
    stop: async () => {
      controller.abort();
      await running;
    },
    running,
  };
}

describe('LogindShutdownManager', () => {
  test("the lock is held until the pods' statuses are written, at most STATUS_SETTLE_MS", async () => {
    let writes = 0;
    let finish = (): void => undefined;
    const t = setup(PERIODS, () => {
      writes++;
      return new Promise<void>((resolve) => {
        finish = resolve;
      });
    });
    await settle(t.clock);
    t.logind.prepareForShutdown(true);
    await settle(t.clock);
    assert.deepEqual(t.killed, ['web', 'db']);
    assert.equal(writes, 1);
    assert.equal(t.logind.locksHeld, 1, 'held while statuses are still being written');
    finish();
    await settle(t.clock);
    assert.equal(t.logind.locksHeld, 0, 'released once they are written');
    await t.stop();

    // An API that never answers: the lock goes after STATUS_SETTLE_MS, with a warning.
    const hung = setup(PERIODS, () => new Promise<void>(() => undefined));
    await settle(hung.clock);
    hung.logind.prepareForShutdown(true);
    await settle(hung.clock);
    assert.equal(hung.logind.locksHeld, 1);
    await settle(hung.clock, STATUS_SETTLE_MS);
    assert.equal(hung.logind.locksHeld, 0);
    assert.ok(hung.logger.records.some((r) => r.msg.startsWith('Pod statuses not all written')));
    await hung.stop();
  });

  test('takes the lock, stops pods by group on PrepareForShutdown(true), releases, retakes on false', async () => {
    const t = setup();
    await settle(t.clock);
    assert.equal(t.logind.locksHeld, 1);
    assert.equal(t.manager.shutdownStatus(), undefined);
    const admit = nodeShutdownAdmitHandler(() => t.manager.shutdownStatus() !== undefined);
    assert.deepEqual(admit.admit(pod('new', 0)), { admit: true });

    t.logind.prepareForShutdown(true);
    await settle(t.clock);
    assert.equal(t.manager.shutdownStatus(), 'node is shutting down');
    assert.deepEqual(admit.admit(pod('new', 0)), {
      admit: false,
      reason: 'NodeShutdown',
      message: 'Pod was rejected as the node is shutting down.',
    });
    assert.deepEqual(t.killed, ['web', 'db']);
    assert.equal(t.nodeSyncs(), 1);
    assert.equal(t.logind.locksHeld, 0, 'the lock is released once the pods are stopped');
    assert.deepEqual(
      t.recorder.events.map((e) => e.message),
      ['Shutdown manager detected shutdown event'],
    );

    t.logind.prepareForShutdown(false);
    await settle(t.clock);
    assert.equal(t.manager.shutdownStatus(), undefined);
    assert.equal(t.logind.locksHeld, 1);
    assert.equal(t.logind.locksTaken, 2);
    assert.equal(t.recorder.events[1]?.message, 'Shutdown manager detected shutdown cancellation');
    await t.stop();
    assert.equal(t.logind.locksHeld, 0, 'a stopping kubelet lets go of its lock');
  });

  test('no system bus: logged once, the kubelet runs on without it', async () => {
    const t = setup();
    t.logind.unreachable = true;
    await settle(t.clock);
    await t.running;
    const errors = t.logger.records.filter((r) => r.level === 'error');
    assert.equal(errors.length, 1);
    assert.equal(errors[0]?.msg, 'Failed to start node shutdown manager');
    assert.match(String(errors[0]?.fields['err']), /no such file/);
    assert.equal(t.logind.locksHeld, 0);
  });

  test('a short InhibitDelayMaxSec is raised through the drop-in and a reload', async () => {
    const t = setup();
    t.logind.delayMs = 1000;
    await settle(t.clock);
    assert.ok(t.logind.calls.includes('OverrideInhibitDelay 6'));
    assert.ok(t.logind.calls.includes('ReloadLogindConf'));
    assert.equal(t.logind.delayMs, 6000);
    assert.equal(t.logind.locksHeld, 1);
    await t.stop();
  });

  test('a delay that cannot be raised fails the start, naming both values', async () => {
    const clock = new FakeClock();
    const logind = new FakeLogind();
    logind.delayMs = 1000;
    logind.canReload = true;
    // The reload "works" but logind never picks the drop-in up.
    logind.connect = function (this: FakeLogind) {
      const bus = FakeLogind.prototype.connect.call(this);
      bus.overrideInhibitDelay = async () => Promise.resolve();
      return bus;
    };
    const logger = new MemoryLogger();
    const manager = new LogindShutdownManager({
      periods: PERIODS,
      connect: () => logind.connect(),
      activePods: () => [],
      killPod: async () => Promise.resolve(),
      syncNodeStatus: async () => Promise.resolve(),
      recorder: new MemoryEventRecorder(),
      node: { kind: 'Node', name: 'n1', uid: 'n1' },
      clock,
      logger,
    });
    const running = manager.run(new AbortController().signal);
    await settle(clock, 5000);
    await running;
    const error = logger.records.find((r) => r.level === 'error');
    assert.equal(error?.msg, 'Failed to start node shutdown manager');
    assert.equal(
      error?.fields['err'],
      'NodeShutdownError: node shutdown manager was timed out after 5 attempts waiting for logind InhibitDelayMaxSec to update to 6s (ShutdownGracePeriod), current value is 1s',
    );
    assert.equal(logind.locksHeld, 0);
  });

  test('a lost connection is made again after a second, with a new lock', async () => {
    const t = setup();
    await settle(t.clock);
    t.logind.disconnectAll();
    await settle(t.clock, 2000);
    assert.equal(t.logind.buses.length, 2);
    assert.equal(t.logind.locksTaken, 2);
    assert.equal(t.logind.locksHeld, 1, 'the old lock is let go once the new one is held');
    await t.stop();
  });

  test('the last shutdown is kept on disk and set on the metrics, also after a restart', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-shutdown-'));
    try {
      const path = join(dir, 'graceful_node_shutdown_state');
      const run = (gauges: Record<string, number>) => {
        const clock = new FakeClock(Date.UTC(2026, 0, 1));
        const logind = new FakeLogind();
        const manager = new LogindShutdownManager({
          periods: PERIODS,
          connect: () => logind.connect(),
          activePods: () => [pod('web', 0)],
          killPod: async () => clock.sleep(1500),
          syncNodeStatus: async () => Promise.resolve(),
          recorder: new MemoryEventRecorder(),
          node: { kind: 'Node', name: 'n1', uid: 'n1' },
          clock,
          logger: new MemoryLogger(),
          state: new ShutdownStateStorage(path),
          metrics: {
            setStart: (v) => (gauges['start'] = v),
            setEnd: (v) => (gauges['end'] = v),
          },
        });
        const controller = new AbortController();
        const running = manager.run(controller.signal);
        return { clock, logind, stop: async () => (controller.abort(), running) };
      };
      const first: Record<string, number> = {};
      const a = run(first);
      await settle(a.clock);
      a.logind.prepareForShutdown(true);
      // The state file is written for real between the clock's steps.
      for (let i = 0; i < 100 && !((first['end'] ?? 0) > 0); i++) {
        await a.clock.advance(500);
        await new Promise<void>((r) => setTimeout(r, 10));
      }
      const start = Date.UTC(2026, 0, 1) / 1000;
      assert.equal(first['start'], start);
      assert.ok(
        first['end'] !== undefined && first['end'] >= start + 1,
        `end ${String(first['end'])}`,
      );
      const saved = JSON.parse(await readFile(path, 'utf8')) as Record<string, string>;
      assert.equal(Math.trunc(Date.parse(saved['startTime'] ?? '') / 1000), first['start']);
      assert.equal(Math.trunc(Date.parse(saved['endTime'] ?? '') / 1000), first['end']);
      await a.stop();

      const second: Record<string, number> = {};
      const b = run(second);
      await settle(b.clock);
      await new Promise<void>((r) => setTimeout(r, 50));
      assert.deepEqual(second, first);
      await b.stop();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
