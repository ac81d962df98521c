/**
 * Probe state on a berth node with containerd 2.x (issue #6): readiness flipping both
 * ways as `kubectl get pod -w` shows it, readiness gates set by another controller,
 * probe state across a berth restart (a ready container stays ready, a started one is
 * not probed for startup again), and probes that cannot work as written.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { run } from '../harness/exec.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  getJson,
  getPod,
  probedPod,
  waitForPod,
} from '../harness/kube-helpers.ts';
import { fetchLocal } from '../harness/net.ts';

/** An exec probe command that stamps each run into /tmp/probed, then runs `check`. */
const stamped = (check: string): string[] => ['sh', '-c', `date +%s >> /tmp/probed; ${check}`];

/** How many times the stamped probes of the pod's container have run. */
async function probeRuns(cluster: Cluster, pod: string): Promise<number> {
  const out = await cluster.kubectl([
    ...['exec', pod, '--', 'sh', '-c', 'cat /tmp/probed 2>/dev/null | wc -l'],
  ]);
  return Number(out);
}

const condition = (pod: Pod, type: string) => pod.status?.conditions?.find((c) => c.type === type);

/**
 * `kubectl get pods -w` over the default namespace in the background: every line it
 * printed, as columns. It watches the namespace rather than named pods because
 * `kubectl get pod NAME -w` exits with NotFound when NAME does not exist yet.
 */
function watchPods(cluster: Cluster) {
  const child = spawn(
    cluster.bin.kubectl,
    ['--kubeconfig', cluster.adminKubeconfig, 'get', 'pods', '-w', '--no-headers'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let text = '';
  child.stdout.on('data', (chunk: Buffer) => {
    text += chunk.toString();
  });
  return {
    /** The READY column ("0/1", "1/1") of each line printed for `name`, in order. */
    ready(name: string): string[] {
      return text
        .split('\n')
        .map((l) => l.trim().split(/\s+/))
        .filter((cols) => cols[0] === name)
        .map((cols) => cols[1] ?? '');
    },
    async stop(): Promise<void> {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** `seq` with consecutive repeats collapsed: the values it went through, in order. */
function runsOf(seq: readonly string[]): string[] {
  return seq.filter((v, i) => i === 0 || seq[i - 1] !== v);
}

interface CountedEvent {
  reason: string;
  message: string;
  count?: number;
}

async function eventsOf(cluster: Cluster, name: string): Promise<CountedEvent[]> {
  const list = await getJson<{ items: CountedEvent[] }>(cluster, [
    'get',
    'events',
    '--field-selector',
    `involvedObject.name=${name}`,
  ]);
  return list?.items ?? [];
}

describe('probe state on berth with containerd2', () => {
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

  test('kubectl get pod -w shows readiness flip both ways', async () => {
    const watch = watchPods(cluster);
    try {
      await applyJson(
        cluster,
        probedPod(
          cluster,
          'flip',
          node,
          [
            'sh',
            '-c',
            'sleep 4; touch /tmp/ready; sleep 6; rm /tmp/ready; sleep 6; touch /tmp/ready; sleep 3600',
          ],
          { readinessProbe: { exec: { command: ['cat', '/tmp/ready'] }, periodSeconds: 1 } },
        ),
      );
      await eventually(
        'kubectl get -w to print 0/1, 1/1, 0/1, 1/1',
        () => {
          const seen = runsOf(watch.ready('flip'));
          return Promise.resolve(seen.join(' ').includes('0/1 1/1 0/1 1/1') ? seen : undefined);
        },
        90_000,
      );
      const pod = await getPod(cluster, 'default', 'flip');
      assert.equal(pod?.status?.containerStatuses?.[0]?.restartCount, 0);
      assert.equal(pod !== undefined && condition(pod, 'Ready')?.status, 'True');
    } finally {
      await watch.stop();
    }
  });

  test('readiness gates: Ready waits for the gate condition another controller sets', async () => {
    const gate = 'example.com/load-balancer';
    await applyJson(
      cluster,
      probedPod(
        cluster,
        'gated',
        node,
        ['sh', '-c', 'touch /tmp/ready; sleep 3600'],
        { readinessProbe: { exec: { command: ['cat', '/tmp/ready'] }, periodSeconds: 1 } },
        { readinessGates: [{ conditionType: gate }] },
      ),
    );
    const waiting = await waitForPod(
      cluster,
      'default',
      'gated',
      'containers ready, gate missing',
      (p) => condition(p, 'ContainersReady')?.status === 'True',
    );
    assert.deepEqual(
      { ...condition(waiting, 'Ready'), lastTransitionTime: undefined, lastProbeTime: undefined },
      {
        type: 'Ready',
        status: 'False',
        reason: 'ReadinessGatesNotReady',
        message: `corresponding condition of pod readiness gate "${gate}" does not exist.`,
        // The kubelet's conditions carry the pod generation they reflect (GA in v1.35).
        observedGeneration: waiting.metadata?.generation,
        lastTransitionTime: undefined,
        lastProbeTime: undefined,
      },
    );
    const setGate = (status: string) =>
      cluster.kubectl([
        'patch',
        'pod',
        'gated',
        '--subresource=status',
        '--type=strategic',
        '-p',
        JSON.stringify({ status: { conditions: [{ type: gate, status }] } }),
      ]);
    await setGate('False');
    await waitForPod(
      cluster,
      'default',
      'gated',
      'gate False named',
      (p) =>
        condition(p, 'Ready')?.message ===
        `the status of pod readiness gate "${gate}" is not "True", but False`,
    );
    await setGate('True');
    await waitForPod(
      cluster,
      'default',
      'gated',
      'Ready with the gate True',
      (p) => condition(p, 'Ready')?.status === 'True',
    );
    // berth's own writes (readiness lost, then back) keep the gate's condition as set.
    await cluster.kubectl(['exec', 'gated', '--', 'rm', '/tmp/ready']);
    const unready = await waitForPod(
      cluster,
      'default',
      'gated',
      'containers not ready',
      (p) => condition(p, 'ContainersReady')?.status === 'False',
    );
    assert.equal(condition(unready, gate)?.status, 'True', JSON.stringify(unready.status));
    assert.equal(condition(unready, 'Ready')?.reason, 'ContainersNotReady');
    await cluster.kubectl(['exec', 'gated', '--', 'touch', '/tmp/ready']);
    const back = await waitForPod(
      cluster,
      'default',
      'gated',
      'Ready again',
      (p) => condition(p, 'Ready')?.status === 'True',
    );
    assert.equal(condition(back, gate)?.status, 'True');
  });

  test('a berth restart keeps ready containers ready and started ones started', async () => {
    // Long periods: after the restart the first probes come up to 10 s later, which is
    // the window where a kubelet that forgot its results would report NotReady.
    await applyJson(
      cluster,
      probedPod(cluster, 'steady', node, ['sh', '-c', 'touch /tmp/ready; sleep 3600'], {
        readinessProbe: { exec: { command: stamped('cat /tmp/ready') }, periodSeconds: 10 },
      }),
    );
    await applyJson(
      cluster,
      probedPod(cluster, 'started', node, ['sh', '-c', 'touch /tmp/up; sleep 3600'], {
        // Passes once; after that it would fail, so a second run would kill the container.
        startupProbe: {
          exec: { command: ['sh', '-c', 'test -e /tmp/up && rm /tmp/up && touch /tmp/once'] },
          periodSeconds: 1,
          failureThreshold: 2,
        },
        readinessProbe: { exec: { command: stamped('cat /tmp/once') }, periodSeconds: 10 },
      }),
    );
    for (const name of ['steady', 'started'])
      await waitForPod(
        cluster,
        'default',
        name,
        'Ready',
        (p) => condition(p, 'Ready')?.status === 'True',
      );
    // Upstream adopts containers that started at least 10 s before the kubelet.
    await new Promise((r) => setTimeout(r, 12_000));
    const watch = watchPods(cluster);
    try {
      await eventually('the watch to list both pods', () =>
        Promise.resolve(
          watch.ready('steady').length > 0 && watch.ready('started').length > 0 ? true : undefined,
        ),
      );
      const before = new Map<string, number>();
      for (const name of ['steady', 'started']) before.set(name, await probeRuns(cluster, name));
      berth = await berth.restart();
      const healthz = Number(
        /^healthzPort: (\d+)$/m.exec(await readFile(berth.configFile, 'utf8'))?.[1],
      );
      await eventually('berth healthy after its restart', async () =>
        (await fetchLocal(`http://127.0.0.1:${healthz}/healthz`)).status === 200 ? true : undefined,
      );
      // Past the first readiness probe of every container after the restart, and one
      // period more: a kubelet that forgot the results would have written NotReady in
      // the window before that first probe, and its write would have reached the watch.
      for (const name of ['steady', 'started'])
        await eventually(`two readiness probes of ${name} after the restart`, async () =>
          (await probeRuns(cluster, name)) >= (before.get(name) ?? 0) + 2 ? true : undefined,
        );
      for (const name of ['steady', 'started']) {
        assert.deepEqual(runsOf(watch.ready(name)), ['1/1'], `${name} never left 1/1`);
        const pod = await getPod(cluster, 'default', name);
        const status = pod?.status?.containerStatuses?.[0];
        assert.equal(status?.restartCount, 0, name);
        assert.equal(status?.started, true, name);
        assert.equal(status?.ready, true, name);
      }
    } finally {
      await watch.stop();
    }
  });

  test('probes that cannot work as written: clear results, no stuck worker, berth unaffected', async () => {
    await applyJson(
      cluster,
      probedPod(cluster, 'bad-probes', node, ['sleep', '3600'], {
        ports: [{ name: 'http', containerPort: 8080 }],
        readinessProbe: { httpGet: { path: '/', port: 'nope' }, periodSeconds: 1 },
        // A typo in a liveness probe's port must not kill the container.
        livenessProbe: { tcpSocket: { port: 'missing' }, periodSeconds: 1, failureThreshold: 1 },
      }),
    );
    await applyJson(
      cluster,
      probedPod(cluster, 'hanging-probe', node, ['sleep', '3600'], {
        readinessProbe: {
          exec: { command: ['sleep', '30'] },
          periodSeconds: 2,
          timeoutSeconds: 1,
        },
      }),
    );
    const errored = await eventually(
      'probe errors reported for the unknown port names',
      async () => {
        const events = await eventsOf(cluster, 'bad-probes');
        const readiness = events.find(
          (e) =>
            e.message ===
            'Readiness probe errored and resulted in unknown state: port "nope" not found',
        );
        const liveness = events.find(
          (e) =>
            e.message ===
            'Liveness probe errored and resulted in unknown state: port "missing" not found',
        );
        return readiness !== undefined && (liveness?.count ?? 0) >= 5 ? events : undefined;
      },
      90_000,
    );
    assert.ok(
      errored.every((e) => e.reason !== 'Killing'),
      JSON.stringify(errored),
    );
    const bad = await getPod(cluster, 'default', 'bad-probes');
    assert.equal(bad?.status?.containerStatuses?.[0]?.restartCount, 0);
    assert.equal(bad?.status?.containerStatuses?.[0]?.ready, false);
    // The hanging command is cut at its timeout each period and the worker goes on.
    await eventually(
      'repeated exec probe timeouts',
      async () => {
        const timedOut = (await eventsOf(cluster, 'hanging-probe')).find(
          (e) => e.reason === 'Unhealthy' && /timed out/.test(e.message),
        );
        return (timedOut?.count ?? 0) >= 3 ? timedOut : undefined;
      },
      90_000,
    );
    const hanging = await getPod(cluster, 'default', 'hanging-probe');
    assert.equal(hanging?.status?.containerStatuses?.[0]?.ready, false);
    // A negative period never reaches the node: the API server refuses it.
    const refused = await run(
      cluster.bin.kubectl,
      ['--kubeconfig', cluster.adminKubeconfig, 'create', '-f', '-'],
      {
        input: JSON.stringify(
          probedPod(cluster, 'negative-period', node, ['sleep', '3600'], {
            readinessProbe: { exec: { command: ['true'] }, periodSeconds: -1 },
          }),
        ),
        okCodes: [1],
      },
    );
    assert.match(refused.stderr, /periodSeconds/);
    // berth is healthy and still starts pods.
    const healthz = Number(
      /^healthzPort: (\d+)$/m.exec(await readFile(berth.configFile, 'utf8'))?.[1],
    );
    assert.equal((await fetchLocal(`http://127.0.0.1:${healthz}/healthz`)).status, 200);
    await applyJson(cluster, busyboxPod(cluster, 'after-bad', node));
    await waitForPod(
      cluster,
      'default',
      'after-bad',
      'Running',
      (p) => condition(p, 'Ready')?.status === 'True',
    );
  });
});
