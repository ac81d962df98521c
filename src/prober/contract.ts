/**
 * The ProbeManager contract: what the pod sync relies on. ProberManager (exec probes
 * over the fake CRI, on the fake clock) and FakeProberManager pass it; both run it from
 * contract.test.ts. Thresholds, timing, the probe handlers and events are the real
 * manager's own (manager.test.ts, probe.test.ts): every probe here decides in one run.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Pod, Probe } from 'kubernetes-types/core/v1.js';
import type { RuntimePodStatus } from '../container/pod-status.ts';
import { instance, runtimeStatus, sandbox, spec, testPod } from '../container/testing.ts';
import type { FakeClock } from '../util/clock.ts';
import type { ProbeKind, ProbeManager, ProbeResult } from './types.ts';

export interface ProberContractSubject {
  readonly prober: ProbeManager;
  readonly clock: FakeClock;
  /** Pod UIDs the manager's onChange was called with, in order. */
  readonly changes: readonly string[];
  /** Starts an instance of container `name` in the runtime; returns its container ID. */
  start(name: string): Promise<string>;
  /**
   * Every run of the `kind` probe of container `name` answers `result` from now on;
   * resolves once a running worker had the time to probe (one period).
   */
  answer(name: string, kind: ProbeKind, result: ProbeResult): Promise<void>;
  /** Lets workers finish what is due now. */
  settle(): Promise<void>;
}

/** The exec probe the contract's containers use: `[container, kind]`, one run decides. */
export function contractProbe(container: string, kind: ProbeKind): Probe {
  return {
    exec: { command: [container, kind] },
    periodSeconds: 1,
    successThreshold: 1,
    failureThreshold: 1,
  };
}

function probed(name: string, ...kinds: ProbeKind[]): Container {
  const field = { liveness: 'livenessProbe', readiness: 'readinessProbe', startup: 'startupProbe' };
  return spec(name, Object.fromEntries(kinds.map((k) => [field[k], contractProbe(name, k)])));
}

/** The pod's runtime status with these running instances (started now). */
function running(
  clock: FakeClock,
  ...ids: (readonly [name: string, id: string])[]
): RuntimePodStatus {
  return runtimeStatus(
    [sandbox()],
    // instance() starts a container 10 ms after its creation: started now.
    ids.map(([name, id]) => instance(name, 'running', { id, createdAt: clock.now() - 10 })),
  );
}

export function proberContract(name: string, make: () => ProberContractSubject): void {
  describe(`ProbeManager contract: ${name}`, () => {
    const pod: Pod = testPod({
      containers: [probed('app', 'readiness', 'liveness'), probed('plain')],
    });
    const uid = pod.metadata?.uid ?? '';

    test('nothing is reported before a probe answers', async () => {
      const s = make();
      const app = await s.start('app');
      const plain = await s.start('plain');
      const rt = running(s.clock, ['app', app], ['plain', plain]);
      s.prober.addPod(pod);
      s.prober.syncPod(pod, rt);
      await s.settle();
      assert.equal(s.prober.get('readiness', app), undefined);
      assert.equal(s.prober.get('liveness', app), undefined);
      assert.equal(s.prober.readiness(pod, rt)('app'), false, 'a readiness probe: not ready yet');
      assert.equal(s.prober.readiness(pod, rt)('plain'), undefined, 'no probe decides');
      assert.equal(s.prober.started(pod, rt)('app'), undefined, 'no startup probe');
      assert.deepEqual(s.changes, []);
      await s.prober.stop();
    });

    test('a result is published for the instance, and each change reported once', async () => {
      const s = make();
      const app = await s.start('app');
      const rt = running(s.clock, ['app', app]);
      s.prober.addPod(pod);
      s.prober.syncPod(pod, rt);
      await s.answer('app', 'readiness', 'success');
      assert.equal(s.prober.get('readiness', app), 'success');
      assert.equal(s.prober.readiness(pod, rt)('app'), true);
      assert.deepEqual(s.changes, [uid]);
      await s.answer('app', 'readiness', 'success');
      assert.deepEqual(s.changes, [uid], 'the same result again is no change');
      await s.answer('app', 'readiness', 'failure');
      assert.equal(s.prober.readiness(pod, rt)('app'), false);
      assert.deepEqual(s.changes, [uid, uid]);
      await s.answer('app', 'liveness', 'failure');
      assert.equal(s.prober.get('liveness', app), 'failure');
      await s.answer('app', 'liveness', 'success');
      assert.equal(s.prober.get('liveness', app), 'failure', 'a failed liveness worker is done');
      await s.prober.stop();
    });

    test('liveness and readiness wait for the startup probe', async () => {
      const s = make();
      const slow = testPod({ containers: [probed('app', 'startup', 'readiness', 'liveness')] });
      const app = await s.start('app');
      const rt = running(s.clock, ['app', app]);
      s.prober.addPod(slow);
      s.prober.syncPod(slow, rt);
      await s.answer('app', 'readiness', 'success');
      await s.answer('app', 'liveness', 'success');
      assert.equal(s.prober.started(slow, rt)('app'), false);
      assert.equal(s.prober.readiness(slow, rt)('app'), false);
      assert.equal(s.prober.get('readiness', app), undefined, 'not probed before started');
      assert.equal(s.prober.get('liveness', app), undefined, 'not probed before started');
      assert.deepEqual(s.changes, []);
      await s.answer('app', 'startup', 'success');
      assert.equal(s.prober.started(slow, rt)('app'), true);
      assert.equal(s.prober.readiness(slow, rt)('app'), true);
      assert.equal(s.prober.get('liveness', app), 'success');
      await s.prober.stop();
    });

    test('a new instance starts without its predecessor’s results', async () => {
      const s = make();
      const first = await s.start('app');
      s.prober.addPod(pod);
      s.prober.syncPod(pod, running(s.clock, ['app', first]));
      await s.answer('app', 'liveness', 'failure');
      assert.equal(s.prober.get('liveness', first), 'failure');
      await s.answer('app', 'liveness', 'success');
      const second = await s.start('app');
      const rt = running(s.clock, ['app', second]);
      s.prober.syncPod(pod, rt);
      assert.equal(s.prober.get('liveness', first), undefined, 'dropped with its instance');
      await s.settle();
      assert.equal(s.prober.get('liveness', second), 'success', 'the new instance is probed');
      await s.prober.stop();
    });

    test('a container that is not running is not probed', async () => {
      const s = make();
      const app = await s.start('app');
      const rt = runtimeStatus(
        [sandbox()],
        [instance('app', 'exited', { id: app, createdAt: s.clock.now() })],
      );
      s.prober.addPod(pod);
      s.prober.syncPod(pod, rt);
      await s.answer('app', 'readiness', 'success');
      assert.equal(s.prober.get('readiness', app), undefined);
      assert.equal(s.prober.readiness(pod, rt)('app'), undefined, 'nothing runs');
      assert.deepEqual(s.changes, []);
      await s.prober.stop();
    });

    test('removePod stops the pod’s workers and forgets their results', async () => {
      const s = make();
      const app = await s.start('app');
      s.prober.addPod(pod);
      s.prober.syncPod(pod, running(s.clock, ['app', app]));
      await s.answer('app', 'readiness', 'success');
      s.prober.removePod(uid);
      assert.equal(s.prober.get('readiness', app), undefined);
      await s.answer('app', 'readiness', 'failure');
      assert.equal(s.prober.get('readiness', app), undefined, 'no worker probes it any more');
      assert.deepEqual(s.changes, [uid]);
      await s.prober.stop();
    });

    test('a pod not added gets no worker; one removed gets none again until added', async () => {
      const s = make();
      const app = await s.start('app');
      const rt = running(s.clock, ['app', app]);
      s.prober.syncPod(pod, rt);
      await s.answer('app', 'readiness', 'success');
      assert.equal(s.prober.get('readiness', app), undefined, 'never added: never probed');
      s.prober.addPod(pod);
      s.prober.syncPod(pod, rt);
      await s.answer('app', 'readiness', 'success');
      assert.equal(s.prober.get('readiness', app), 'success');
      s.prober.removePod(uid);
      s.prober.syncPod(pod, rt);
      await s.answer('app', 'readiness', 'failure');
      assert.equal(s.prober.get('readiness', app), undefined, 'removed: not probed again');
      assert.deepEqual(s.changes, [uid]);
      await s.prober.stop();
    });

    test('after stop no worker runs and syncPod starts none', async () => {
      const s = make();
      const app = await s.start('app');
      await s.prober.stop();
      s.prober.addPod(pod);
      s.prober.syncPod(pod, running(s.clock, ['app', app]));
      await s.answer('app', 'readiness', 'success');
      assert.equal(s.prober.get('readiness', app), undefined);
      assert.deepEqual(s.changes, []);
      await s.prober.stop();
    });
  });
}
