/**
 * The prober manager with the fake CRI runtime and a fake clock: thresholds, initial
 * delay, startup gating, results reset on restart, worker clean-up.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, test } from 'node:test';
import { spec, testPod } from '../container/testing.ts';
import type { ProbeMetricsSample } from './manager.ts';
import { execProbe, harness, IMAGE, settle, stopProbers } from './testing.ts';

afterEach(async () => {
  await stopProbers();
});

describe('prober manager', () => {
  test('readiness is false until the probe passes successThreshold times', async () => {
    let ok = false;
    const h = await harness(() => (ok ? 0 : 1));
    const main = spec('main', { readinessProbe: execProbe('ready', { successThreshold: 2 }) });
    const pod = testPod({ containers: [main] });
    const id = await h.run();
    const state = h.state({ name: 'main', id, from: main });
    h.prober.syncPod(pod, state);
    await settle();
    assert.equal(h.prober.readiness(pod, state)('main'), false);
    ok = true;
    await h.clock.advance(1000);
    await settle();
    assert.equal(h.prober.readiness(pod, state)('main'), false, 'one success of two');
    await h.clock.advance(1000);
    await settle();
    assert.equal(h.prober.readiness(pod, state)('main'), true);
    assert.deepEqual(h.changes, ['uid-1']);
    const unhealthy = h.recorder.events.filter((e) => e.reason === 'Unhealthy');
    assert.equal(unhealthy.length, 1);
    assert.equal(unhealthy[0]?.type, 'Warning');
    assert.equal(unhealthy[0]?.message, 'Readiness probe failed: ready failed');
  });

  test('liveness fails only after failureThreshold consecutive failures, then stops', async () => {
    const h = await harness(() => 1);
    const main = spec('main', { livenessProbe: execProbe('alive', { failureThreshold: 3 }) });
    const pod = testPod({ containers: [main] });
    const id = await h.run();
    h.prober.syncPod(pod, h.state({ name: 'main', id, from: main }));
    await settle();
    assert.equal(h.prober.get('liveness', id), undefined);
    await h.clock.advance(1000);
    await settle();
    assert.equal(h.prober.get('liveness', id), undefined, 'two failures of three');
    await h.clock.advance(1000);
    await settle();
    assert.equal(h.prober.get('liveness', id), 'failure');
    assert.deepEqual(h.changes, ['uid-1']);
    await h.clock.advance(5000);
    await settle();
    assert.equal(h.execs.length, 3, 'no probing once the container is condemned');
    assert.ok(h.recorder.events.every((e) => e.message === 'Liveness probe failed: alive failed'));
  });

  test('initialDelaySeconds delays the first probe', async () => {
    const h = await harness();
    const main = spec('main', {
      livenessProbe: execProbe('alive', { initialDelaySeconds: 5, periodSeconds: 10 }),
    });
    const pod = testPod({ containers: [main] });
    const id = await h.run();
    const start = h.clock.now();
    h.prober.syncPod(pod, h.state({ name: 'main', id, from: main }));
    await settle();
    await h.clock.advance(4999);
    await settle();
    assert.equal(h.execs.length, 0);
    await h.clock.advance(1);
    await settle();
    assert.deepEqual(
      h.execs.map((e) => e.at - start),
      [5000],
    );
    await h.clock.advance(10_000);
    await settle();
    assert.deepEqual(
      h.execs.map((e) => e.at - start),
      [5000, 15_000],
    );
  });

  test('liveness and readiness wait for the startup probe', async () => {
    let started = false;
    const h = await harness((cmd) => (cmd === 'start' && !started ? 1 : 0));
    const main = spec('main', {
      startupProbe: execProbe('start', { failureThreshold: 30 }),
      livenessProbe: execProbe('alive'),
      readinessProbe: execProbe('ready'),
    });
    const pod = testPod({ containers: [main] });
    const id = await h.run();
    const state = h.state({ name: 'main', id, from: main });
    h.prober.syncPod(pod, state);
    await settle();
    await h.clock.advance(2000);
    await settle();
    assert.deepEqual(new Set(h.execs.map((e) => e.cmd)), new Set(['start']));
    assert.equal(h.prober.started(pod, state)('main'), false);
    assert.equal(h.prober.readiness(pod, state)('main'), false);
    started = true;
    await h.clock.advance(1000);
    await settle();
    await h.clock.advance(1000);
    await settle();
    assert.equal(h.prober.get('startup', id), 'success');
    assert.equal(h.prober.started(pod, state)('main'), true);
    assert.equal(h.prober.readiness(pod, state)('main'), true);
    assert.equal(h.prober.get('liveness', id), 'success');
    const startsAfter = h.execs.filter((e) => e.cmd === 'start').length;
    await h.clock.advance(3000);
    await settle();
    assert.equal(
      h.execs.filter((e) => e.cmd === 'start').length,
      startsAfter,
      'a passed startup probe is not run again',
    );
  });

  test('readiness is probed as soon as the startup probe passes, not a period later', async () => {
    let started = false;
    const h = await harness((cmd) => (cmd === 'start' && !started ? 1 : 0));
    const main = spec('main', {
      startupProbe: execProbe('start', { failureThreshold: 120, periodSeconds: 5 }),
      readinessProbe: execProbe('ready', { periodSeconds: 30 }),
    });
    const pod = testPod({ containers: [main] });
    const id = await h.run();
    const state = h.state({ name: 'main', id, from: main });
    h.prober.syncPod(pod, state);
    await settle();
    await h.clock.advance(10_000);
    await settle();
    assert.equal(h.prober.readiness(pod, state)('main'), false);
    started = true;
    // The next startup tick is within 5 s; readiness' next tick would be up to 30 s away.
    await h.clock.advance(5000);
    await settle();
    assert.equal(h.prober.get('startup', id), 'success');
    const ready = h.execs.find((e) => e.cmd === 'ready');
    assert.ok(ready !== undefined, 'readiness was probed');
    assert.equal(h.prober.readiness(pod, state)('main'), true);
    // It then keeps its own 30 s schedule: no second probe right away.
    await h.clock.advance(5000);
    await settle();
    assert.equal(h.execs.filter((e) => e.cmd === 'ready').length, 1);
  });

  test('a restarted container starts with fresh results; the old worker stops', async () => {
    const h = await harness(() => 1);
    const main = spec('main', { livenessProbe: execProbe('alive', { failureThreshold: 1 }) });
    const pod = testPod({ containers: [main] });
    const first = await h.run();
    h.prober.syncPod(pod, h.state({ name: 'main', id: first, from: main }));
    await settle();
    assert.equal(h.prober.get('liveness', first), 'failure');
    const second = await h.run();
    h.prober.syncPod(pod, h.state({ name: 'main', id: second, attempt: 1, from: main }));
    assert.equal(h.prober.get('liveness', first), undefined);
    assert.equal(h.prober.get('liveness', second), undefined, 'no inherited failure');
    assert.equal(h.prober.workerCount, 1);
    await settle();
    assert.equal(h.prober.get('liveness', second), 'failure');
  });

  test('an exec probe past its timeout fails with a clear message', async () => {
    const h = await harness();
    h.fake.onExec(() => ({ exitCode: 0, durationMs: 5000 }));
    const main = spec('main', {
      readinessProbe: execProbe('slow', { timeoutSeconds: 1, failureThreshold: 1 }),
    });
    const pod = testPod({ containers: [main] });
    const id = await h.run();
    h.prober.syncPod(pod, h.state({ name: 'main', id, from: main }));
    await settle();
    assert.equal(h.prober.get('readiness', id), 'failure');
    assert.match(h.recorder.events[0]?.message ?? '', /^Readiness probe failed: command timed out/);
  });

  test('workers stop when the container or the pod goes away', async () => {
    const h = await harness();
    const main = spec('main', { readinessProbe: execProbe('ready') });
    const side = spec('side', { livenessProbe: execProbe('alive') });
    const pod = testPod({ containers: [main, side] });
    const a = await h.run('main');
    const b = await h.run('side');
    h.prober.syncPod(
      pod,
      h.state({ name: 'main', id: a, from: main }, { name: 'side', id: b, from: side }),
    );
    assert.equal(h.prober.workerCount, 2);
    h.prober.syncPod(pod, h.state({ name: 'main', id: a, from: main }));
    assert.equal(h.prober.workerCount, 1);
    h.prober.removePod('uid-1');
    assert.equal(h.prober.workerCount, 0);
    await settle();
    const before = h.execs.length;
    await h.clock.advance(5000);
    await settle();
    assert.equal(h.execs.length, before);
    assert.equal(h.clock.pending, 0, 'no timer chain left behind');
  });

  test('probes of containers adopted after a restart are spread over one period', async () => {
    const h = await harness(() => 0, 0.25);
    const main = spec('main', { readinessProbe: execProbe('ready', { periodSeconds: 8 }) });
    const pod = testPod({ containers: [main] });
    const id = await h.run();
    const start = h.clock.now();
    const adopted = h.state({ name: 'main', id, from: main });
    const old = {
      ...adopted,
      containers: adopted.containers.map((c) => ({ ...c, startedAt: start - 60_000 })),
    };
    h.prober.syncPod(pod, old);
    await settle();
    assert.equal(h.execs.length, 0);
    await h.clock.advance(8000);
    await settle();
    assert.deepEqual(
      h.execs.map((e) => e.at - start),
      [2000],
    );
  });

  test('workers started with the manager begin at a random point of their period', async () => {
    const h = await harness(() => 0, 0.5);
    const main = spec('main', { readinessProbe: execProbe('ready', { periodSeconds: 10 }) });
    const pod = testPod({ containers: [main] });
    const id = await h.run();
    const start = h.clock.now();
    h.prober.syncPod(pod, h.state({ name: 'main', id, from: main }));
    await settle();
    await h.clock.advance(20_000);
    await settle();
    assert.deepEqual(
      h.execs.map((e) => e.at - start),
      [5000, 15_000],
    );
  });

  test('a fresh container is probed at once, then at a random phase that probe time does not shift', async () => {
    const h = await harness(() => 0, 0.5);
    await h.clock.advance(60_000); // the manager has been running for a minute
    // Each exec takes 300 ms of fake time.
    h.fake.onExec(async (_c, cmd) => {
      h.execs.push({ cmd: cmd.join(' '), at: h.clock.now() });
      await h.clock.sleep(300);
      return { exitCode: 0 };
    });
    const main = spec('main', { livenessProbe: execProbe('alive', { periodSeconds: 1 }) });
    const pod = testPod({ containers: [main] });
    const id = await h.run();
    const start = h.clock.now();
    h.prober.syncPod(pod, h.state({ name: 'main', id, from: main }));
    await settle();
    for (let i = 0; i < 6; i++) {
      await h.clock.advance(500);
      await settle();
    }
    // random() = 0.5: after the immediate probe the ticks fall half a period later.
    assert.deepEqual(
      h.execs.map((e) => e.at - start),
      [0, 500, 1500, 2500],
    );
    assert.equal(h.clock.pending, 1, 'one timer per worker');
  });

  test('every probe run is counted with its labels; a removed pod is forgotten', async () => {
    const samples: ProbeMetricsSample[] = [];
    const forgotten: string[] = [];
    let code = 0;
    const h = await harness(() => code, 0, {
      record: (o) => samples.push(o),
      forgetPod: (uid) => forgotten.push(uid),
    });
    const main = spec('main', { readinessProbe: execProbe('ready', { failureThreshold: 1 }) });
    const pod = testPod({ containers: [main] });
    const id = await h.run();
    h.prober.syncPod(pod, h.state({ name: 'main', id, from: main }));
    await settle();
    code = 1;
    await h.clock.advance(1000);
    await settle();
    assert.deepEqual(samples, [
      {
        probeType: 'Readiness',
        result: 'successful',
        namespace: 'default',
        pod: 'web',
        podUID: 'uid-1',
        container: 'main',
        durationSeconds: 0,
      },
      {
        probeType: 'Readiness',
        result: 'failed',
        namespace: 'default',
        pod: 'web',
        podUID: 'uid-1',
        container: 'main',
        durationSeconds: 0,
      },
    ]);
    assert.deepEqual(forgotten, []);
    h.prober.removePod('uid-1');
    assert.deepEqual(forgotten, ['uid-1'], 'its metric series go with it');
  });

  test('a probe that errors counts as unknown, is reported, and the worker goes on', async () => {
    const samples: ProbeMetricsSample[] = [];
    const h = await harness(() => 0, 0, {
      record: (o) => samples.push(o),
      forgetPod: () => undefined,
    });
    // A host that is no valid URL host makes the request itself impossible.
    const main = spec('main', {
      livenessProbe: { httpGet: { host: 'bad host', port: 80 }, periodSeconds: 1 },
    });
    const pod = testPod({ containers: [main] });
    const id = await h.run();
    h.prober.syncPod(pod, h.state({ name: 'main', id, from: main }));
    await settle();
    await h.clock.advance(1000);
    await settle();
    assert.deepEqual(
      samples.map((s) => s.result),
      ['unknown', 'unknown'],
    );
    assert.equal(h.prober.get('liveness', id), undefined, 'an error counts toward no threshold');
    assert.match(
      h.recorder.events[0]?.message ?? '',
      /^Liveness probe errored and resulted in unknown state: /,
    );
  });

  test('a redirect to another host passes with a ProbeWarning event', async () => {
    const server = http.createServer((_req, res) => {
      res.writeHead(302, { location: 'http://elsewhere.invalid/' });
      res.end('moved');
    });
    await new Promise<void>((r) => {
      server.listen(0, '127.0.0.1', r);
    });
    try {
      const port = (server.address() as AddressInfo).port;
      const h = await harness();
      const main = spec('main', {
        readinessProbe: { httpGet: { host: '127.0.0.1', port }, periodSeconds: 1 },
      });
      const pod = testPod({ containers: [main] });
      const id = await h.run();
      const state = h.state({ name: 'main', id, from: main });
      h.prober.syncPod(pod, state);
      // Real loopback I/O: wait for it, bounded.
      for (let i = 0; i < 200 && h.prober.get('readiness', id) === undefined; i++)
        await new Promise<void>((r) => setTimeout(r, 5));
      assert.equal(h.prober.get('readiness', id), 'success');
      assert.deepEqual(
        h.recorder.events.map((e) => [e.reason, e.message]),
        [
          [
            'ProbeWarning',
            'Readiness probe warning: Probe terminated redirects, Response body: moved',
          ],
        ],
      );
    } finally {
      await new Promise<void>((r) =>
        server.close(() => {
          r();
        }),
      );
    }
  });
  test('after a berth restart, an adopted container keeps its API readiness until probed', async () => {
    const h = await harness((cmd) => (cmd === 'ready' ? 1 : 0), 0.5);
    const main = spec('main', {
      startupProbe: execProbe('start'),
      readinessProbe: execProbe('ready', { failureThreshold: 2 }),
    });
    const id = await h.run();
    const base = testPod({ containers: [main] });
    const apiStatus = (ready: 'True' | 'False') => ({
      conditions: [{ type: 'Ready', status: ready }],
      containerStatuses: [
        {
          name: 'main',
          containerID: `containerd://${id}`,
          started: true,
          ready: ready === 'True',
          image: IMAGE,
          imageID: '',
          restartCount: 0,
        },
      ],
    });
    const pod = { ...base, status: apiStatus('True') };
    // Started a minute before this manager (berth) came up.
    const fresh = h.state({ name: 'main', id, from: main });
    const state = {
      ...fresh,
      containers: fresh.containers.map((c) => ({ ...c, startedAt: h.clock.now() - 60_000 })),
    };
    h.prober.syncPod(pod, state);
    await settle();
    assert.equal(h.prober.started(pod, state)('main'), true, 'started as the API said');
    assert.equal(h.prober.readiness(pod, state)('main'), true, 'ready as the API said');
    assert.equal(
      h.prober.readiness({ ...base, status: apiStatus('False') }, state)('main'),
      false,
      'a pod that was not Ready stays not ready',
    );
    await h.clock.advance(500);
    await settle();
    assert.equal(h.prober.readiness(pod, state)('main'), true, 'one failure of two');
    await h.clock.advance(1000);
    await settle();
    assert.equal(h.prober.readiness(pod, state)('main'), false, 'the probe now decides');
    assert.ok(
      h.execs.every((e) => e.cmd !== 'start'),
      'the startup probe that passed before is not run again',
    );
    // Another instance of the same name is not the one the API reported started.
    const other = await h.run();
    const replaced = {
      ...state,
      containers: state.containers.map((c) => ({ ...c, id: other })),
    };
    assert.equal(h.prober.started(pod, replaced)('main'), false);
  });

  test('a container started after berth is not ready before its first probe passes', async () => {
    const h = await harness(() => 1);
    const main = spec('main', { readinessProbe: execProbe('ready') });
    const id = await h.run();
    const base = testPod({ containers: [main] });
    const pod = { ...base, status: { conditions: [{ type: 'Ready', status: 'True' }] } };
    const state = h.state({ name: 'main', id, from: main });
    assert.equal(h.prober.readiness(pod, state)('main'), false);
  });
});
