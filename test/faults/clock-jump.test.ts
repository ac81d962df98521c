/**
 * Clock jumps (issue #32, item 6), at the unit level: the kernel clock of this machine
 * cannot be stepped without moving every other process's, and berth reads time only
 * through its injected Clock, so the wall clock is jumped an hour forward and back on a
 * FakeClock (`jump`: Date.now() moves, pending sleeps keep the time they had left, as
 * monotonic timers do) under the real components, and their calls are counted:
 * - the node Lease keeps its 10 s cadence through both jumps (no burst of renewals,
 *   no hour-long silence), its renewTime follows the wall clock;
 * - CrashLoopBackOff / image pull back-off: forward, a waiting key may retry at once
 *   (once), backward, it waits its back-off, not the back-off plus the hour;
 * - the reflector's watch loop is not disturbed (no relist, no extra watch);
 * - probes keep their period (no burst, no hour-long gap), and a worker started after
 *   the clock went back waits at most its initial delay;
 * - certificate rotation happens once when a forward jump passes its deadline, never
 *   in a storm, and its retries keep their back-off through a backward jump;
 * - the PLEG's health (the node's Ready condition) measures elapsed time, not wall time.
 * What a real stepped kernel clock would add is in RELIABILITY.md.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ConfigMap, Probe } from 'kubernetes-types/core/v1.js';
import type { Lease } from 'kubernetes-types/coordination/v1.js';
import { clientTemplate, createCsr, generateKey } from '../../src/certificate/csr.ts';
import { CertificateManager } from '../../src/certificate/manager.ts';
import { CertificateStore } from '../../src/certificate/store.ts';
import { FakeApprover, TestCa } from '../../src/certificate/test-ca.ts';
import { spec, testPod } from '../../src/container/testing.ts';
import { cri } from '../../src/cri/index.ts';
import { FakeCriClient } from '../../src/cri/fake/index.ts';
import { RelistPleg } from '../../src/pleg/generic.ts';
import { MemoryEventRecorder } from '../../src/events/types.ts';
import { FakeKubeClient } from '../../src/kube/fake-client.ts';
import { Reflector } from '../../src/kube/reflector.ts';
import { CONFIGMAPS, inNamespace, LEASES } from '../../src/kube/types.ts';
import { LeaseController } from '../../src/nodelease/controller.ts';
import type { ProbeKind, ProbeResult } from '../../src/prober/types.ts';
import { ProbeWorker } from '../../src/prober/worker.ts';
import { Backoff } from '../../src/util/backoff.ts';
import { FakeClock } from '../../src/util/clock.ts';
import { MemoryLogger } from '../../src/util/logger.ts';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const HOUR = 3_600_000;

/** Advances the fake clock in 1 s steps (so woken loops run between steps). */
async function run(clock: FakeClock, ms: number): Promise<void> {
  for (let t = 0; t < ms; t += 1000) await clock.advance(1000);
}

describe('clock jumps of an hour, forward and back', () => {
  test('the node Lease keeps renewing every 10 s and its renewTime follows the wall clock', async () => {
    const clock = new FakeClock();
    const client = new FakeKubeClient({ clock });
    const lease = new LeaseController({
      client,
      clock,
      logger: new MemoryLogger(),
      nodeName: 'n1',
      leaseDurationSeconds: 40,
      nodeUID: () => undefined,
    });
    const controller = new AbortController();
    const running = lease.run(controller.signal);
    const writes = (): number =>
      client.calls.filter((c) => c.verb === 'update' || c.verb === 'create').length;
    const renewTime = async (): Promise<number> => {
      const got = await client.get<Lease>(inNamespace(LEASES, 'kube-node-lease'), 'n1');
      return Date.parse(got.spec?.renewTime ?? '');
    };
    await run(clock, 60_000);
    const before = writes();
    clock.jump(HOUR);
    await run(clock, 60_000);
    const afterForward = writes() - before;
    assert.ok((await renewTime()) > clock.now() - 11_000, 'renewTime in the new wall time');
    clock.jump(-2 * HOUR);
    await run(clock, 60_000);
    const afterBack = writes() - before - afterForward;
    assert.ok((await renewTime()) > clock.now() - 11_000, 'renewTime back in the old wall time');
    controller.abort();
    await running;
    // 60 s at one renewal per 10 s: 6 each side of each jump, no storm, no silence.
    assert.ok(before >= 6 && before <= 7, `before: ${before}`);
    assert.equal(afterForward, 6);
    assert.equal(afterBack, 6);
  });

  test('a crash-looping container restarts on its back-off through both jumps', async () => {
    const clock = new FakeClock();
    const backoff = new Backoff(clock, {
      initialMs: 10_000,
      maxMs: 300_000,
      resetAfterMs: 600_000,
    });
    let restarts = 0;
    /** The pod worker's decision every second: restart when out of back-off. */
    const loop = async (ms: number): Promise<number> => {
      const start = restarts;
      for (let t = 0; t < ms; t += 1000) {
        if (!backoff.inBackoff('pod/c')) {
          restarts++;
          backoff.next('pod/c');
        }
        await clock.advance(1000);
      }
      return restarts - start;
    };
    // At 0, 10, 30, 70 and 150 s (delays 10, 20, 40, 80, 160 s), then waiting 160 s.
    assert.equal(await loop(155_000), 5);
    clock.jump(-HOUR);
    // Back: the wait is at most the 160 s back-off, not an hour more.
    assert.equal(backoff.remaining('pod/c'), 160_000);
    const afterBack = await loop(170_000);
    assert.equal(afterBack, 1, 'one restart once the back-off ran out');
    clock.jump(HOUR);
    // Forward: the last failure looks older than the 10-minute reset, so one restart at
    // once with the initial delay, then the delays double again: no storm.
    const afterForward = await loop(75_000);
    assert.equal(afterForward, 4, 'at 0, 10, 30 and 70 s');
  });

  test('the reflector neither relists nor rewatches when the wall clock jumps', async () => {
    const clock = new FakeClock();
    const client = new FakeKubeClient({ clock });
    const synced: number[] = [];
    const reflector = new Reflector<ConfigMap>({
      client,
      path: inNamespace(CONFIGMAPS, 'ns'),
      clock,
      logger: new MemoryLogger(),
      random: () => 0,
      handler: {
        onSync: (items) => {
          synced.push(items.length);
        },
        onEvent: () => undefined,
      },
    });
    const controller = new AbortController();
    const running = reflector.run(controller.signal);
    await run(clock, 5000);
    const calls = client.calls.length;
    clock.jump(HOUR);
    await run(clock, 60_000);
    clock.jump(-2 * HOUR);
    await run(clock, 60_000);
    assert.equal(client.calls.length, calls, 'no list or watch call');
    assert.deepEqual(synced, [0]);
    controller.abort();
    await running;
  });

  test("the reflector's stall watchdog measures elapsed time, not the wall clock", async () => {
    const clock = new FakeClock();
    const client = new FakeKubeClient({ clock });
    const reflector = new Reflector<ConfigMap>({
      client,
      path: inNamespace(CONFIGMAPS, 'ns'),
      clock,
      logger: new MemoryLogger(),
      random: () => 0,
      stallTimeoutMs: 180_000,
      handler: { onSync: () => undefined, onEvent: () => undefined },
    });
    const watches = (): number => client.calls.filter((c) => c.verb === 'watch').length;
    const controller = new AbortController();
    const running = reflector.run(controller.signal);
    await run(clock, 165_000);
    // An event 10 s before the watchdog's first look, then the wall clock an hour ahead:
    // the watch was active 15 s ago, so it is not stalled.
    await client.create<ConfigMap>(inNamespace(CONFIGMAPS, 'ns'), { metadata: { name: 'a' } });
    await run(clock, 5_000);
    clock.jump(HOUR);
    await run(clock, 30_000);
    assert.equal(watches(), 1, 'no restart: the watch had an event 35 s ago, not an hour');
    // Back an hour: a watch quiet for the stall timeout is still restarted on time.
    clock.jump(-HOUR);
    await run(clock, 200_000);
    assert.equal(watches(), 2, 'restarted once 180 s passed without an event');
    controller.abort();
    await running;
  });

  /** A probe worker on a fake runtime whose exec probe always passes; counts its execs. */
  function probeWorker(
    clock: FakeClock,
    probe: Probe,
    containerStartedAt: number,
  ): { worker: ProbeWorker; execs: number[] } {
    const execs: number[] = [];
    const results = new Map<string, ProbeResult>();
    const container = spec('main', { readinessProbe: probe });
    const worker = new ProbeWorker(
      'readiness',
      probe,
      { pod: testPod(), container, containerId: 'c1', startedAt: containerStartedAt },
      {
        runtime: {
          execSync: () => {
            execs.push(clock.now());
            return Promise.resolve(
              cri.ExecSyncResponse.fromPartial({ exitCode: 0, stdout: Buffer.alloc(0) }),
            );
          },
        },
        clock,
        recorder: new MemoryEventRecorder(),
        logger: new MemoryLogger(),
        results: {
          get: (kind: ProbeKind, id: string) => results.get(`${kind}/${id}`),
          set: (kind: ProbeKind, id: string, r: ProbeResult) => {
            const changed = results.get(`${kind}/${id}`) !== r;
            results.set(`${kind}/${id}`, r);
            return changed;
          },
        },
        onChange: () => undefined,
        podIP: () => '10.0.0.2',
        random: () => 0.5,
        startedAt: clock.now() - HOUR,
        metrics: undefined,
      },
    );
    return { worker, execs };
  }

  test('a probe keeps its 10 s period through both jumps', async () => {
    const clock = new FakeClock();
    const probe: Probe = { exec: { command: ['true'] }, periodSeconds: 10 };
    const { worker, execs } = probeWorker(clock, probe, clock.now());
    const controller = new AbortController();
    const running = worker.run(controller.signal);
    await run(clock, 60_000);
    const before = execs.length;
    // An hour and 3.7 s: off the probe's 10 s grid, so the schedule's phase moves too.
    clock.jump(HOUR + 3700);
    await run(clock, 60_000);
    const afterForward = execs.length - before;
    clock.jump(-2 * HOUR - 3700);
    await run(clock, 60_000);
    const afterBack = execs.length - before - afterForward;
    controller.abort();
    await running;
    assert.ok(before >= 6 && before <= 7, `before: ${before}`);
    // One period may be cut short when the grid moves: at most one probe more, none less.
    assert.ok(afterForward >= 6 && afterForward <= 7, `after +1 h: ${afterForward}`);
    assert.ok(afterBack >= 6 && afterBack <= 7, `after -1 h: ${afterBack}`);
    const gaps = execs.slice(1).map((t, i) => Math.abs(t - (execs[i] ?? 0)));
    const inWallTime = gaps.filter((g) => g < HOUR);
    assert.ok(
      inWallTime.every((g) => g <= 10_000),
      `no gap longer than the period: ${inWallTime.join(', ')}`,
    );
  });

  test('a probe worker started after the clock went back waits its initial delay, not the hour', async () => {
    const clock = new FakeClock();
    const startedAt = clock.now() - 5000;
    // The container started 5 s ago; then the wall clock is stepped an hour back and
    // only now is its worker started (berth restarted, or the pod resynced).
    clock.jump(-HOUR);
    const probe: Probe = {
      exec: { command: ['true'] },
      periodSeconds: 10,
      initialDelaySeconds: 30,
    };
    const { worker, execs } = probeWorker(clock, probe, startedAt);
    const controller = new AbortController();
    const running = worker.run(controller.signal);
    const t0 = clock.now();
    await run(clock, 45_000);
    controller.abort();
    await running;
    assert.ok(execs.length > 0, 'probed within 45 s of the step (not after an hour)');
    assert.ok((execs[0] ?? 0) - t0 <= 30_000, `first probe ${(execs[0] ?? 0) - t0} ms after start`);
  });

  test('certificate rotation: once when a jump passes its deadline, on its back-off when it fails', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-clock-cert-'));
    const clock = new FakeClock(Date.now());
    const client = new FakeKubeClient({ clock });
    const ca = new TestCa(clock);
    const LIFETIME = 10 * HOUR;
    let deny = false;
    const approver = new FakeApprover(client, ca, () =>
      deny ? { action: 'deny', message: 'not now' } : { action: 'approve', lifetimeMs: LIFETIME },
    );
    approver.start();
    const store = new CertificateStore({ dir, pairName: 'kubelet-client', clock });
    const { key, keyPem } = generateKey();
    await store.update(ca.sign(createCsr(key, clientTemplate('n1')), LIFETIME), keyPem);
    const manager = new CertificateManager({
      kind: 'client',
      store,
      client,
      clock,
      logger: new MemoryLogger(),
      random: () => 0, // the deadline at 70 % of the lifetime: 7 h
      template: () => clientTemplate('n1'),
    });
    let rotations = 0;
    manager.onRotate(() => {
      rotations++;
    });
    const csrs = (): number =>
      client.calls.filter((c) => c.verb === 'create' && c.resource === 'certificatesigningrequests')
        .length;
    const controller = new AbortController();
    try {
      await manager.start(controller.signal);
      const deadline = manager.rotationDeadline;
      await runMinutes(clock, 10);
      // Forward by an hour and back by two, far from the deadline: no CSR.
      clock.jump(HOUR);
      await runMinutes(clock, 10);
      clock.jump(-2 * HOUR);
      await runMinutes(clock, 10);
      assert.equal(csrs(), 0, 'no CSR before the deadline');
      assert.equal(manager.rotationDeadline, deadline, 'the deadline is wall time');
      // Jump past the deadline: one rotation at the next check (at most a minute), once.
      clock.jump(deadline - clock.now() + 60_000);
      await runMinutes(clock, 30);
      await until(() => rotations === 1, 'the rotation');
      assert.equal(csrs(), 1, 'one CSR for one passed deadline');
      // The next deadline is 7 h after the new certificate's start; an hour back must
      // not bring it closer, and a failing rotation retries on its back-off meanwhile.
      deny = true;
      const next = manager.rotationDeadline;
      clock.jump(next - clock.now() + 60_000);
      await runMinutes(clock, 2);
      const failing = csrs();
      assert.ok(failing >= 2, 'the rotation after the deadline was attempted');
      clock.jump(-HOUR);
      // Back before the deadline: no attempt for that hour (the certificate is valid
      // for hours of wall time yet), and no storm.
      await runMinutes(clock, 30);
      assert.ok(csrs() - failing <= 1, `${csrs() - failing} CSRs in 30 min after -1 h`);
      deny = false;
      await runMinutes(clock, 40);
      await until(() => rotations === 2, 'the second rotation');
    } finally {
      controller.abort();
      await manager.stopped();
      await approver.stop();
      ca.dispose();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('clock jumps and health thresholds', () => {
  test('the PLEG stays healthy when the clock jumps an hour forward, and turns unhealthy after 3 min without a relist', async () => {
    const clock = new FakeClock();
    const fake = new FakeCriClient({ clock });
    const pleg = new RelistPleg({
      runtime: fake.runtime,
      clock,
      logger: new MemoryLogger(),
      onEvents: () => undefined,
    });
    await pleg.relist();
    // Found by test/vm/clock-step.test.ts: the last relist looked an hour old, and with the
    // evented PLEG's 5-minute relists the node was NotReady for minutes.
    clock.jump(HOUR);
    assert.equal(pleg.healthProblem(), undefined, 'healthy right after +1 h');
    clock.jump(-2 * HOUR);
    assert.equal(pleg.healthProblem(), undefined, 'healthy right after -1 h');
    await clock.advance(181_000);
    assert.match(
      pleg.healthProblem() ?? '',
      /^PLEG is not healthy: pleg was last seen active 181s ago/,
    );
    await pleg.relist();
    assert.equal(pleg.healthProblem(), undefined);
  });
});

/** Advances the fake clock a minute at a time (the certificate manager's re-check). */
async function runMinutes(clock: FakeClock, minutes: number): Promise<void> {
  for (let i = 0; i < minutes; i++) {
    await clock.advance(60_000);
    for (let k = 0; k < 20; k++) await new Promise<void>((r) => setImmediate(r));
  }
}

/** Yields until `cond` holds (the store's file I/O runs on real time), or throws. */
async function until(cond: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 60_000;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`Timed out waiting for ${what}`);
    await new Promise<void>((r) => setTimeout(r, 5));
  }
}
