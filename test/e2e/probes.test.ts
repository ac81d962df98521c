/**
 * Probes on a berth node with containerd 2.x (issue #6, core subset): exec readiness
 * gating the Ready condition, a failing exec liveness probe restarting the container,
 * httpGet readiness on a named port and tcpSocket liveness against busybox httpd, a
 * startup probe protecting a slow starter from its liveness probe, and the failure
 * threshold and period of exec, httpGet and tcpSocket liveness probes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  getPod,
  probedPod,
  podEvents,
  waitForPod,
} from '../harness/kube-helpers.ts';

const condition = (pod: Pod, type: string): string | undefined =>
  pod.status?.conditions?.find((c) => c.type === type)?.status;

// Ends at once on SIGTERM (a bare sleep as PID 1 ignores it), so a liveness kill is quick.
const SLEEPER = ['sh', '-c', 'trap "exit 0" TERM; sleep 3600 & wait'];
// Each probe that reaches the container appends the time (whole seconds) to its
// termination log, so the killed instance's termination message lists every probe it got.
const STAMP = 'date +%s >> /dev/termination-log';
// busybox httpd whose /cgi-bin/sick stamps and answers 500.
const SICK_HTTPD = [
  'sh',
  '-c',
  [
    'mkdir -p /www/cgi-bin',
    `printf '%s\\n' '#!/bin/sh' '${STAMP}' 'printf "Status: 500 Internal Server Error\\r\\nContent-Type: text/plain\\r\\n\\r\\nsick\\n"' > /www/cgi-bin/sick`,
    'chmod +x /www/cgi-bin/sick',
    'exec httpd -f -p 8080 -h /www',
  ].join(' && '),
];

// busybox httpd whose /cgi-bin/ready stamps every probe into /tmp/probed and answers 200.
const READY_HTTPD = [
  'sh',
  '-c',
  [
    'mkdir -p /www/cgi-bin',
    `printf '%s\\n' '#!/bin/sh' 'date +%s >> /tmp/probed' 'printf "Content-Type: text/plain\\r\\n\\r\\nok\\n"' > /www/cgi-bin/ready`,
    'chmod +x /www/cgi-bin/ready',
    'exec httpd -f -p 8080 -h /www',
  ].join(' && '),
];

describe('probes on berth with containerd2', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let node: string;

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    berth = await startBerth(cluster);
    node = berth.nodeName;
  });

  after(async () => {
    await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  test('exec readiness: not Ready until the probe passes, Ready, then not Ready again', async () => {
    await applyJson(
      cluster,
      probedPod(
        cluster,
        'ready-exec',
        node,
        ['sh', '-c', 'sleep 5; touch /tmp/ready; sleep 6; rm /tmp/ready; sleep 3600'],
        {
          readinessProbe: { exec: { command: ['cat', '/tmp/ready'] }, periodSeconds: 1 },
        },
      ),
    );
    const running = await waitForPod(
      cluster,
      'default',
      'ready-exec',
      'Running',
      (p) => p.status?.containerStatuses?.[0]?.state?.running !== undefined,
    );
    assert.equal(running.status?.containerStatuses?.[0]?.ready, false);
    assert.equal(condition(running, 'Ready'), 'False');
    assert.equal(condition(running, 'ContainersReady'), 'False');
    const ready = await waitForPod(
      cluster,
      'default',
      'ready-exec',
      'Ready',
      (p) => condition(p, 'Ready') === 'True',
    );
    assert.equal(condition(ready, 'ContainersReady'), 'True');
    assert.equal(ready.status?.containerStatuses?.[0]?.ready, true);
    assert.equal(ready.status?.containerStatuses?.[0]?.restartCount, 0);
    const unready = await waitForPod(
      cluster,
      'default',
      'ready-exec',
      'not Ready after the file is gone',
      (p) => condition(p, 'Ready') === 'False',
    );
    assert.equal(condition(unready, 'ContainersReady'), 'False');
    assert.equal(unready.status?.containerStatuses?.[0]?.restartCount, 0);
    const events = await podEvents(cluster, 'default', 'ready-exec');
    assert.ok(
      events.some(
        (e) => e.reason === 'Unhealthy' && e.message.startsWith('Readiness probe failed'),
      ),
      JSON.stringify(events),
    );
  });

  test('a failing exec liveness probe restarts the container', async () => {
    await applyJson(
      cluster,
      probedPod(cluster, 'live-exec', node, ['sleep', '3600'], {
        livenessProbe: {
          exec: { command: ['sh', '-c', 'echo sick; exit 1'] },
          periodSeconds: 1,
          failureThreshold: 2,
          // sleep ignores SIGTERM as PID 1: keep the kill short.
          terminationGracePeriodSeconds: 1,
        },
      }),
    );
    const restarted = await waitForPod(
      cluster,
      'default',
      'live-exec',
      'restarted by its liveness probe',
      (p) => (p.status?.containerStatuses?.[0]?.restartCount ?? 0) >= 1,
      90_000,
    );
    assert.ok(restarted.status?.containerStatuses?.[0]?.lastState?.terminated !== undefined);
    const events = await eventually('Unhealthy and Killing events', async () => {
      const all = await podEvents(cluster, 'default', 'live-exec');
      const unhealthy = all.find(
        (e) => e.reason === 'Unhealthy' && e.message === 'Liveness probe failed: sick',
      );
      const killing = all.find(
        (e) =>
          e.reason === 'Killing' &&
          e.message === 'Container main failed liveness probe, will be restarted',
      );
      return unhealthy !== undefined && killing !== undefined ? all : undefined;
    });
    assert.ok(events.some((e) => e.type === 'Warning' && e.reason === 'Unhealthy'));
  });

  test('httpGet readiness on a named port and tcpSocket liveness against httpd', async () => {
    await applyJson(
      cluster,
      probedPod(cluster, 'ready-http', node, READY_HTTPD, {
        ports: [{ name: 'http', containerPort: 8080 }],
        readinessProbe: {
          httpGet: {
            path: '/cgi-bin/ready',
            port: 'http',
            httpHeaders: [{ name: 'X-Probe', value: '1' }],
          },
          periodSeconds: 1,
        },
        livenessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 1, failureThreshold: 1 },
      }),
    );
    const ready = await waitForPod(
      cluster,
      'default',
      'ready-http',
      'Ready',
      (p) => condition(p, 'Ready') === 'True',
    );
    assert.equal(ready.status?.containerStatuses?.[0]?.ready, true);
    // Three more readiness probes (as many liveness periods) later, the container is
    // still the first one: counted in the container, not slept.
    const probes = async (): Promise<number> =>
      Number(
        await cluster.kubectl(['exec', 'ready-http', '--', 'sh', '-c', 'wc -l < /tmp/probed']),
      );
    const seen = await probes();
    await eventually('three more readiness probes', async () =>
      (await probes()) >= seen + 3 ? true : undefined,
    );
    const later = await getPod(cluster, 'default', 'ready-http');
    assert.equal(later?.status?.containerStatuses?.[0]?.restartCount, 0);
    assert.equal(condition(later ?? {}, 'Ready'), 'True');
  });

  test('a startup probe keeps liveness from killing a slow starter', async () => {
    await applyJson(
      cluster,
      probedPod(
        cluster,
        'slow-start',
        node,
        ['sh', '-c', 'sleep 6; touch /tmp/started; sleep 3600'],
        {
          startupProbe: {
            exec: { command: ['cat', '/tmp/started'] },
            periodSeconds: 1,
            failureThreshold: 30,
          },
          // Alone, this would kill the container on its first probe.
          livenessProbe: {
            exec: { command: ['cat', '/tmp/started'] },
            periodSeconds: 1,
            failureThreshold: 1,
          },
        },
      ),
    );
    const running = await waitForPod(
      cluster,
      'default',
      'slow-start',
      'Running',
      (p) => p.status?.containerStatuses?.[0]?.state?.running !== undefined,
    );
    assert.equal(running.status?.containerStatuses?.[0]?.started, false);
    const started = await waitForPod(
      cluster,
      'default',
      'slow-start',
      'started and Ready',
      (p) => p.status?.containerStatuses?.[0]?.started === true && condition(p, 'Ready') === 'True',
    );
    assert.equal(started.status?.containerStatuses?.[0]?.restartCount, 0);
    const events = await podEvents(cluster, 'default', 'slow-start');
    assert.ok(
      events.some((e) => e.reason === 'Unhealthy' && e.message.startsWith('Startup probe failed')),
      JSON.stringify(events),
    );
    assert.ok(!events.some((e) => e.reason === 'Killing'), JSON.stringify(events));
  });

  test('liveness failing 3 times at period 1 s restarts after the third probe: exec, httpGet, tcpSocket', async () => {
    const pod = busyboxPod(cluster, 'live-threshold', node, {
      grace: 2,
      containers: [
        { name: 'exec', command: SLEEPER },
        { name: 'http', command: SICK_HTTPD },
        { name: 'tcp', command: SLEEPER },
      ],
    });
    const liveness = {
      exec: { exec: { command: ['sh', '-c', `${STAMP}; exit 1`] } },
      http: { httpGet: { path: '/cgi-bin/sick', port: 8080 } },
      // Nothing listens on 9999 in the pod's network namespace.
      tcp: { tcpSocket: { port: 9999 } },
    } as const;
    const containers = (pod.spec?.containers ?? []).map((c) => ({
      ...c,
      livenessProbe: {
        ...liveness[c.name as keyof typeof liveness],
        // httpd must be listening before the first probe, or a refused connection
        // would count as a failure the container never saw.
        initialDelaySeconds: 1,
        periodSeconds: 1,
        failureThreshold: 3,
      },
    }));
    await applyJson(cluster, { ...pod, spec: { ...pod.spec, containers } });
    const restarted = await waitForPod(
      cluster,
      'default',
      'live-threshold',
      'every container restarted by its liveness probe',
      (p) =>
        (p.status?.containerStatuses ?? []).length === 3 &&
        (p.status?.containerStatuses ?? []).every((c) => c.restartCount >= 1),
      120_000,
    );
    const statuses = restarted.status?.containerStatuses ?? [];
    for (const name of ['exec', 'http'] as const) {
      const status = statuses.find((c) => c.name === name);
      const message = status?.lastState?.terminated?.message ?? '';
      const stamps = message
        .split('\n')
        .filter((l) => l !== '')
        .map(Number);
      // Three failures kill it, not one and not ten: exactly three probes reached it.
      assert.equal(stamps.length, 3, `${name}: ${JSON.stringify(status)}`);
      // At period 1 s the three probes span one to two seconds (the first comes at once,
      // the rest on a random phase), never the ten-second default period.
      const span = (stamps[2] ?? 0) - (stamps[0] ?? 0);
      assert.ok(span >= 1 && span <= 4, `${name}: probes at ${stamps.join(', ')}`);
    }
    const events = await eventually('Unhealthy and Killing events of every container', async () => {
      const all = await podEvents(cluster, 'default', 'live-threshold');
      const has = (reason: string, match: (m: string) => boolean): boolean =>
        all.some((e) => e.reason === reason && match(e.message));
      const ok =
        has(
          'Unhealthy',
          (m) => m === 'Liveness probe failed: HTTP probe failed with statuscode: 500',
        ) &&
        has(
          'Unhealthy',
          (m) =>
            m.startsWith('Liveness probe failed: dial tcp ') &&
            m.endsWith(':9999: connect: connection refused'),
        ) &&
        ['exec', 'http', 'tcp'].every((c) =>
          has('Killing', (m) => m === `Container ${c} failed liveness probe, will be restarted`),
        );
      if (!ok)
        throw new Error(`events so far: ${JSON.stringify(all.map((e) => [e.reason, e.message]))}`);
      return all;
    });
    assert.ok(events.some((e) => e.type === 'Warning' && e.reason === 'Unhealthy'));
  });
});
