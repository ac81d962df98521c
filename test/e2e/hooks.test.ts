/**
 * Lifecycle hooks and gRPC probes on a berth node with containerd 2.x (issue #6):
 * postStart output inside the container, preStop before SIGTERM (order written by the
 * container to a host directory), a preStop sleep cut at the grace deadline, a failing
 * postStart killing and restarting the container, and grpc.health.v1 probes against
 * the project's health server image.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  getPod,
  isRunningAndReady,
  podEvents,
  waitForPod,
} from '../harness/kube-helpers.ts';

describe('lifecycle hooks and gRPC probes on berth (containerd 2.x)', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let node: string;
  let shared: string;

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    berth = await startBerth(cluster);
    node = berth.nodeName;
    shared = await mkdtemp(join(tmpdir(), 'berth-hooks-'));
  });

  after(async () => {
    await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
    await rm(shared, { recursive: true, force: true });
  });

  const kubectl = (args: string[]): Promise<string> => cluster.kubectl(['-n', 'default', ...args]);

  function pod(name: string, main: Partial<Container>, spec: Partial<Pod['spec']> = {}): Pod {
    const base = busyboxPod(cluster, name, node);
    const [c] = base.spec?.containers ?? [];
    return {
      ...base,
      spec: {
        ...base.spec,
        containers: [{ ...c, ...main, name: 'main' }],
        ...spec,
      },
    };
  }

  test('postStart output is visible in the container', async () => {
    await applyJson(
      cluster,
      pod('post-start', {
        lifecycle: {
          postStart: { exec: { command: ['sh', '-c', 'echo started-by-hook > /tmp/ps'] } },
        },
      }),
    );
    await waitForPod(cluster, 'default', 'post-start', 'Running', isRunningAndReady);
    assert.equal(
      await kubectl(['exec', 'post-start', '--', 'cat', '/tmp/ps']),
      'started-by-hook\n',
    );
  });

  test('preStop runs before SIGTERM', async () => {
    const dir = join(shared, 'order');
    await applyJson(
      cluster,
      pod(
        'pre-stop',
        {
          command: [
            'sh',
            '-c',
            'trap "echo term >> /out/order; exit 0" TERM; while true; do sleep 0.2; done',
          ],
          lifecycle: { preStop: { exec: { command: ['sh', '-c', 'echo prestop >> /out/order'] } } },
          volumeMounts: [{ name: 'out', mountPath: '/out' }],
        },
        {
          terminationGracePeriodSeconds: 10,
          volumes: [{ name: 'out', hostPath: { path: dir, type: 'DirectoryOrCreate' } }],
        },
      ),
    );
    await waitForPod(cluster, 'default', 'pre-stop', 'Running', isRunningAndReady);
    await kubectl(['delete', 'pod', 'pre-stop', '--wait=true', '--timeout=60s']);
    assert.equal(await readFile(join(dir, 'order'), 'utf8'), 'prestop\nterm\n');
  });

  test('a preStop hook running longer than the grace period is cut at the deadline', async () => {
    await applyJson(
      cluster,
      pod(
        'slow-stop',
        {
          command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 0.2; done'],
          // The API refuses a sleep action longer than the grace period; an exec hook can run long.
          lifecycle: { preStop: { exec: { command: ['sleep', '120'] } } },
        },
        { terminationGracePeriodSeconds: 3 },
      ),
    );
    await waitForPod(cluster, 'default', 'slow-stop', 'Running', isRunningAndReady);
    const started = Date.now();
    await kubectl(['delete', 'pod', 'slow-stop', '--wait=true', '--timeout=90s']);
    // Well below the hook's 120 s: the hook was cut and the container stopped.
    assert.ok(Date.now() - started < 60_000, `deletion took ${Date.now() - started} ms`);
  });

  test('a failing postStart kills the container with FailedPostStartHook and it restarts', async () => {
    await applyJson(
      cluster,
      pod('bad-post-start', {
        lifecycle: { postStart: { exec: { command: ['sh', '-c', 'exit 3'] } } },
      }),
    );
    await eventually(
      'a restart after FailedPostStartHook',
      async () => {
        const p = await getPod(cluster, 'default', 'bad-post-start');
        return (p?.status?.containerStatuses?.[0]?.restartCount ?? 0) >= 1 ? p : undefined;
      },
      90_000,
      500,
    );
    const events = await podEvents(cluster, 'default', 'bad-post-start');
    assert.ok(events.some((e) => e.reason === 'FailedPostStartHook' && e.type === 'Warning'));
    assert.ok(events.some((e) => e.reason === 'Killing' && e.message === 'FailedPostStartHook'));
  });

  test('gRPC readiness against grpc.health.v1: SERVING is Ready, NOT_SERVING is not', async () => {
    const grpcPod = (name: string, service?: string): Pod =>
      pod(name, {
        image: cluster.images.grpcHealthLocal,
        command: ['/grpc-health', '-port', '5000', '-not-serving', 'broken'],
        readinessProbe: {
          grpc: { port: 5000, ...(service !== undefined && { service }) },
          periodSeconds: 1,
          failureThreshold: 1,
        },
      });
    await applyJson(cluster, grpcPod('grpc-ok'));
    await applyJson(cluster, grpcPod('grpc-broken', 'broken'));
    await waitForPod(cluster, 'default', 'grpc-ok', 'Ready', isRunningAndReady);
    // The first probes may find the server not yet listening (connection refused): wait
    // for the event of the answer itself.
    const broken = await eventually('an Unhealthy NOT_SERVING event for grpc-broken', async () => {
      const events = await podEvents(cluster, 'default', 'grpc-broken');
      return events.find((e) => e.reason === 'Unhealthy' && /NOT_SERVING/.test(e.message));
    });
    assert.match(broken.message, /Readiness probe failed: .*NOT_SERVING/);
    const p = await getPod(cluster, 'default', 'grpc-broken');
    assert.equal(p?.status?.phase, 'Running');
    assert.equal(p.status.containerStatuses?.[0]?.ready, false);
  });
});
