/**
 * stopContainerWithHooks and runPostStart with the fake CRI runtime and a fake clock:
 * Killing event, preStop before StopContainer, a preStop cut at the grace period, the
 * 2 s minimum, failures as events, postStart failure killing the container.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { status as GrpcStatus } from '@grpc/grpc-js';
import type { Container, LifecycleHandler, Pod } from 'kubernetes-types/core/v1.js';
import { testPod } from '../container/testing.ts';
import { runPostStart, stopContainerWithHooks, type StopDeps } from './stop.ts';
import { lifecycleHarness, settle, type LifecycleHarness } from './testing.ts';

const never = new AbortController().signal;

function withHooks(hooks: { preStop?: LifecycleHandler; postStart?: LifecycleHandler }): {
  pod: Pod;
  container: Container;
} {
  const container: Container = { name: 'main', image: 'registry.test/main:1', lifecycle: hooks };
  return { pod: testPod({ containers: [container] }), container };
}

function deps(h: LifecycleHarness): StopDeps {
  return { cri: h.fake, runner: h.runner, recorder: h.recorder, clock: h.clock, logger: h.logger };
}

/** StopContainer timeouts, in call order. */
function stops(h: LifecycleHarness): bigint[] {
  return (h.fake.callsTo('RuntimeService/StopContainer') as { timeout: bigint }[]).map(
    (r) => r.timeout,
  );
}

describe('stopContainerWithHooks', () => {
  test('without preStop: Killing event, then StopContainer with the grace period', async () => {
    const h = await lifecycleHarness();
    const { pod, container } = withHooks({});
    const r = await stopContainerWithHooks(
      deps(h),
      { pod, container, containerId: h.containerId, gracePeriodSeconds: 30, message: '' },
      never,
    );
    assert.deepEqual(r, { preStop: 'none', stopGraceSeconds: 30 });
    assert.deepEqual(stops(h), [30n]);
    assert.deepEqual(
      h.recorder.events.map((e) => [e.type, e.reason, e.message, e.target.fieldPath]),
      [['Normal', 'Killing', 'Stopping container main', 'spec.containers{main}']],
    );
  });

  test('preStop exec runs before StopContainer, which gets the rest of the grace', async () => {
    const h = await lifecycleHarness();
    const order: string[] = [];
    h.fake.onExec(async () => {
      order.push('preStop');
      await h.clock.sleep(3500); // the hook takes 3.5 s of fake time
      return { exitCode: 0 };
    });
    const { pod, container } = withHooks({ preStop: { exec: { command: ['drain'] } } });
    const stopping = stopContainerWithHooks(
      deps(h),
      { pod, container, containerId: h.containerId, gracePeriodSeconds: 10, message: 'bye' },
      never,
    ).then((r) => {
      order.push('stopped');
      return r;
    });
    await settle();
    assert.deepEqual(stops(h), [], 'not stopped while preStop runs');
    await h.clock.advance(3500);
    // 3.5 s spent counts as 3 whole seconds, as upstream truncates.
    assert.deepEqual(await stopping, { preStop: 'completed', stopGraceSeconds: 7 });
    assert.deepEqual(order, ['preStop', 'stopped']);
    assert.deepEqual(stops(h), [7n]);
    assert.equal(h.recorder.events[0]?.message, 'bye');
  });

  test('the grace left after preStop is elapsed time: a wall-clock step during the hook changes nothing', async () => {
    for (const step of [-3_600_000, 3_600_000]) {
      const h = await lifecycleHarness();
      h.fake.onExec(async () => {
        h.clock.jump(step);
        await h.clock.sleep(3500);
        return { exitCode: 0 };
      });
      const { pod, container } = withHooks({ preStop: { exec: { command: ['drain'] } } });
      const stopping = stopContainerWithHooks(
        deps(h),
        { pod, container, containerId: h.containerId, gracePeriodSeconds: 10, message: '' },
        never,
      );
      await settle();
      await h.clock.advance(3500);
      // Not 10 + 3600 - 3 s after a step back, nor the 2 s minimum after one forward.
      assert.deepEqual(await stopping, { preStop: 'completed', stopGraceSeconds: 7 }, String(step));
    }
  });

  test('a preStop sleep longer than the grace period is cut at the deadline', async () => {
    const h = await lifecycleHarness();
    const { pod, container } = withHooks({ preStop: { sleep: { seconds: 600 } } });
    let result: unknown;
    const stopping = stopContainerWithHooks(
      deps(h),
      { pod, container, containerId: h.containerId, gracePeriodSeconds: 5, message: '' },
      never,
    ).then((r) => (result = r));
    await settle();
    await h.clock.advance(4999);
    await settle();
    assert.equal(result, undefined, 'still inside the grace period');
    assert.deepEqual(stops(h), []);
    await h.clock.advance(1);
    await settle();
    assert.deepEqual(result, { preStop: 'cut', stopGraceSeconds: 2 });
    await stopping;
    assert.deepEqual(stops(h), [2n], 'the 2 s minimum still goes to StopContainer');
    assert.equal(h.clock.pending, 0, 'the cut sleep left no timer');
    assert.ok(!h.recorder.reasons().includes('FailedPreStopHook'), 'a cut hook did not fail');
  });

  test('a failing preStop is a FailedPreStopHook event without its output; the stop goes on', async () => {
    const h = await lifecycleHarness();
    h.fake.onExec(() => ({ exitCode: 1, stdout: 'token=secret' }));
    const { pod, container } = withHooks({ preStop: { exec: { command: ['drain'] } } });
    const r = await stopContainerWithHooks(
      deps(h),
      { pod, container, containerId: h.containerId, gracePeriodSeconds: 30, message: '' },
      never,
    );
    assert.deepEqual(r, { preStop: 'failed', stopGraceSeconds: 30 });
    assert.deepEqual(
      h.recorder.events.map((e) => [e.reason, e.message]),
      [
        ['Killing', 'Stopping container main'],
        ['FailedPreStopHook', 'PreStopHook failed'],
      ],
    );
    assert.deepEqual(stops(h), [30n]);
  });

  test('grace 0 skips preStop and still gives the 2 s minimum', async () => {
    const h = await lifecycleHarness();
    let ran = false;
    h.fake.onExec(() => {
      ran = true;
      return {};
    });
    const { pod, container } = withHooks({ preStop: { exec: { command: ['drain'] } } });
    const r = await stopContainerWithHooks(
      deps(h),
      { pod, container, containerId: h.containerId, gracePeriodSeconds: 0, message: '' },
      never,
    );
    assert.deepEqual(r, { preStop: 'none', stopGraceSeconds: 2 });
    assert.equal(ran, false);
  });

  test('the caller aborting during preStop rejects without stopping', async () => {
    const h = await lifecycleHarness();
    const { pod, container } = withHooks({ preStop: { sleep: { seconds: 20 } } });
    const ac = new AbortController();
    const stopping = stopContainerWithHooks(
      deps(h),
      { pod, container, containerId: h.containerId, gracePeriodSeconds: 30, message: '' },
      ac.signal,
    );
    await settle();
    ac.abort(new Error('sync cancelled'));
    await assert.rejects(stopping, /sync cancelled/);
    assert.deepEqual(stops(h), []);
    assert.equal(h.clock.pending, 0);
  });

  test('a container that is already gone is stopped', async () => {
    const h = await lifecycleHarness();
    h.fake.failNext('RuntimeService/StopContainer', { grpcCode: GrpcStatus.NOT_FOUND });
    const { pod, container } = withHooks({});
    const r = await stopContainerWithHooks(
      deps(h),
      { pod, container, containerId: h.containerId, gracePeriodSeconds: 30, message: '' },
      never,
    );
    assert.equal(r.stopGraceSeconds, 30);
  });
});

describe('runPostStart', () => {
  test('no hook or a passing hook: nothing else happens', async () => {
    const h = await lifecycleHarness();
    const plain = withHooks({});
    assert.deepEqual(await runPostStart(deps(h), { ...plain, containerId: h.containerId }, never), {
      ok: true,
    });
    const hooked = withHooks({ postStart: { exec: { command: ['init'] } } });
    assert.deepEqual(
      await runPostStart(deps(h), { ...hooked, containerId: h.containerId }, never),
      { ok: true },
    );
    assert.deepEqual(stops(h), []);
    assert.deepEqual(h.recorder.events, []);
  });

  test('a failing hook records FailedPostStartHook and kills the container', async () => {
    const h = await lifecycleHarness();
    h.fake.onExec((_c, cmd) => (cmd[0] === 'init' ? { exitCode: 2, stderr: 'no' } : {}));
    const { pod, container } = withHooks({
      postStart: { exec: { command: ['init'] } },
      preStop: { exec: { command: ['drain'] } },
    });
    const r = await runPostStart(
      deps(h),
      {
        pod: {
          ...pod,
          spec: { ...pod.spec, containers: [container], terminationGracePeriodSeconds: 12 },
        },
        container,
        containerId: h.containerId,
      },
      never,
    );
    assert.equal(r.ok, false);
    assert.equal(r.ok ? '' : r.reason, 'PostStartHookError');
    assert.match(r.ok ? '' : r.message, /^Exec lifecycle hook \(\[init\]\) for Container "main"/);
    assert.deepEqual(
      h.recorder.events.map((e) => [e.type, e.reason, e.message]),
      [
        ['Warning', 'FailedPostStartHook', 'PostStartHook failed'],
        ['Normal', 'Killing', 'FailedPostStartHook'],
      ],
    );
    assert.deepEqual(stops(h), [12n], "the pod's grace period");
    const execs = (h.fake.callsTo('RuntimeService/ExecSync') as { cmd: string[] }[]).map(
      (c) => c.cmd[0],
    );
    assert.deepEqual(execs, ['init', 'drain'], 'preStop runs on this kill too, as upstream');
  });
});
