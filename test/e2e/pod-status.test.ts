/**
 * Pod status as upstream's NodeConformance specs check it (issue #33): init container
 * readiness and PodInitializing, a sidecar's readiness in the pod's, a container-level
 * restart policy in the phase, the status of a terminated pod kept by a finalizer
 * after a preStop sleep, container status resources, and a restart of all containers
 * (RestartAllContainers). containerd 2.x.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { applyJson, busyboxPod, getPod, waitForPod } from '../harness/kube-helpers.ts';

const cond = (p: Pod, type: string) => p.status?.conditions?.find((c) => c.type === type);

describe('pod status on berth (upstream conformance rules)', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let node: string;
  const pod = (name: string, spec: Record<string, unknown>, grace = 5): Pod => {
    const base = busyboxPod(cluster, name, node, { grace });
    return { ...base, spec: { ...base.spec, containers: [], ...spec } };
  };
  const image = () => cluster.images.busyboxLocal;
  const container = (name: string, command: string[], extra: Record<string, unknown> = {}) => ({
    name,
    image: image(),
    imagePullPolicy: 'IfNotPresent',
    command,
    ...extra,
  });

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

  test('completed init containers are ready; the app waits in PodInitializing meanwhile', async () => {
    await applyJson(
      cluster,
      pod('init-ready', {
        initContainers: [container('init1', ['true']), container('init2', ['sh', '-c', 'sleep 4'])],
        containers: [container('app', ['sleep', '3600'])],
      }),
    );
    const initializing = await waitForPod(
      cluster,
      'default',
      'init-ready',
      'running init2',
      (p) => p.status?.initContainerStatuses?.[1]?.state?.running !== undefined,
    );
    assert.equal(initializing.status?.initContainerStatuses?.[0]?.ready, true);
    // A running (non-sidecar) init container is not ready.
    assert.equal(initializing.status?.initContainerStatuses?.[1]?.ready, false);
    assert.equal(
      initializing.status?.containerStatuses?.[0]?.state?.waiting?.reason,
      'PodInitializing',
    );
    const running = await waitForPod(
      cluster,
      'default',
      'init-ready',
      'Running and Ready',
      (p) => cond(p, 'Ready')?.status === 'True',
    );
    assert.deepEqual(
      running.status?.initContainerStatuses?.map((s) => [s.name, s.ready]),
      [
        ['init1', true],
        ['init2', true],
      ],
    );
  });

  test('while an init container fails, app containers wait in PodInitializing', async () => {
    await applyJson(
      cluster,
      pod('init-fails', {
        initContainers: [container('init1', ['false'])],
        containers: [container('app', ['sleep', '3600'])],
      }),
    );
    const p = await waitForPod(
      cluster,
      'default',
      'init-fails',
      'init1 restarted',
      (x) => (x.status?.initContainerStatuses?.[0]?.restartCount ?? 0) >= 1,
    );
    assert.equal(p.status?.phase, 'Pending');
    assert.equal(p.status?.containerStatuses?.[0]?.state?.waiting?.reason, 'PodInitializing');
    assert.equal(p.status?.initContainerStatuses?.[0]?.ready, false);
  });

  test("a sidecar's failing readiness probe keeps the pod from being Ready", async () => {
    await applyJson(
      cluster,
      pod('sidecar-unready', {
        initContainers: [
          container('side', ['sleep', '3600'], {
            restartPolicy: 'Always',
            // Fails, stamping each run so the test counts probes rather than sleeping.
            readinessProbe: {
              exec: { command: ['sh', '-c', 'date +%s >> /tmp/probed; false'] },
              periodSeconds: 1,
            },
          }),
        ],
        containers: [container('app', ['sleep', '3600'])],
      }),
    );
    const p = await waitForPod(
      cluster,
      'default',
      'sidecar-unready',
      'app running',
      (x) => x.status?.containerStatuses?.[0]?.state?.running !== undefined,
    );
    // Four more probes of the sidecar: the pod must stay unready all along.
    const probes = async (): Promise<number> =>
      Number(
        await cluster.kubectl([
          ...['exec', 'sidecar-unready', '-c', 'side', '--'],
          ...['sh', '-c', 'cat /tmp/probed 2>/dev/null | wc -l'],
        ]),
      );
    const first = await probes();
    const deadline = Date.now() + 60_000;
    for (let seen = first; seen < first + 4; seen = await probes()) {
      assert.ok(Date.now() < deadline, `the sidecar's probe stopped at ${String(seen)} runs`);
      await new Promise((r) => setTimeout(r, 250));
      const now = await getPod(cluster, 'default', 'sidecar-unready');
      assert.equal(now?.status?.initContainerStatuses?.[0]?.ready, false);
      assert.equal(now && cond(now, 'Ready')?.status, 'False');
      assert.equal(
        now && cond(now, 'ContainersReady')?.message,
        'containers with unready status: [side]',
      );
    }
    assert.equal(p.status?.phase, 'Running');
  });

  test('restartPolicy Never on a container of an Always pod: exit 1 ends the pod Failed', async () => {
    await applyJson(
      cluster,
      pod('container-never', {
        containers: [container('app', ['sh', '-c', 'exit 1'], { restartPolicy: 'Never' })],
      }),
    );
    const p = await waitForPod(
      cluster,
      'default',
      'container-never',
      'Failed',
      (x) => x.status?.phase === 'Failed',
    );
    assert.equal(p.status?.containerStatuses?.[0]?.restartCount, 0);
    assert.equal(p.status?.containerStatuses?.[0]?.state?.terminated?.exitCode, 1);
  });

  test('an exit whose rule is RestartAllContainers restarts every container in place, once', async () => {
    const mount = { volumeMounts: [{ name: 'work', mountPath: '/mnt' }] };
    await applyJson(
      cluster,
      pod('restart-all', {
        restartPolicy: 'Never',
        volumes: [{ name: 'work', emptyDir: {} }],
        initContainers: [
          container('init', ['sh', '-c', 'echo run >> /mnt/init-runs'], mount),
          container('sidecar', ['sleep', '10000'], { restartPolicy: 'Always' }),
        ],
        containers: [
          container(
            'source',
            [
              'sh',
              '-c',
              'if [ -f /mnt/done ]; then sleep 10000; else touch /mnt/done; exit 42; fi',
            ],
            {
              ...mount,
              restartPolicy: 'Never',
              restartPolicyRules: [
                { action: 'RestartAllContainers', exitCodes: { operator: 'In', values: [42] } },
              ],
            },
          ),
          container('regular', ['sleep', '10000']),
        ],
      }),
    );
    const statuses = (p: Pod) => [
      ...(p.status?.initContainerStatuses ?? []),
      ...(p.status?.containerStatuses ?? []),
    ];
    const p = await waitForPod(
      cluster,
      'default',
      'restart-all',
      'every container restarted once, the app containers running',
      (x) =>
        statuses(x).length === 4 &&
        statuses(x).every((s) => s.restartCount > 0 && s.lastState?.terminated !== undefined) &&
        (x.status?.containerStatuses ?? []).every((s) => s.state?.running !== undefined),
    );
    assert.equal(p.status?.phase, 'Running');
    assert.equal(cond(p, 'AllContainersRestarting')?.status, 'False');
    assert.equal(cond(p, 'Initialized')?.status, 'True');
    for (const s of statuses(p)) assert.equal(s.restartCount, 1, s.name);
    // The same sandbox (the emptyDir survived): the init container ran twice in it.
    const runs = await cluster.kubectl([
      'exec',
      'restart-all',
      '-c',
      'source',
      '--',
      'cat',
      '/mnt/init-runs',
    ]);
    assert.equal(runs.trim().split('\n').length, 2, runs);
    const events = await cluster.kubectl([
      'get',
      'events',
      '--field-selector',
      'involvedObject.name=restart-all,reason=Killing',
      '-o',
      'jsonpath={.items[*].message}',
    ]);
    assert.match(events, /killing/);
    await cluster.kubectl(['delete', 'pod', 'restart-all', '--wait=true', '--timeout=60s']);
  });

  test('a deleted pod kept by a finalizer: terminated after its preStop sleep, never Pending', async () => {
    const base = pod(
      'prestop-finalizer',
      {
        containers: [
          // Exits on SIGTERM, as the pause image of the upstream spec does (a shell as PID 1
          // would otherwise ignore it and wait for the kill at the deadline).
          container('app', ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 0.2; done'], {
            lifecycle: { preStop: { sleep: { seconds: 3 } } },
          }),
        ],
      },
      20,
    );
    await applyJson(cluster, {
      ...base,
      metadata: { ...base.metadata, finalizers: ['test/finalizer'] },
    });
    await waitForPod(cluster, 'default', 'prestop-finalizer', 'Running', (x) => {
      return x.status?.containerStatuses?.[0]?.state?.running !== undefined;
    });
    try {
      await cluster.kubectl(['delete', 'pod', 'prestop-finalizer', '--wait=false']);
      const deleted = await getPod(cluster, 'default', 'prestop-finalizer');
      const deletionAt = Date.parse(deleted?.metadata?.deletionTimestamp ?? '');
      const done = await waitForPod(
        cluster,
        'default',
        'prestop-finalizer',
        'container terminated',
        (x) => x.status?.containerStatuses?.[0]?.state?.terminated !== undefined,
      );
      const finished = Date.parse(
        done.status?.containerStatuses?.[0]?.state?.terminated?.finishedAt ?? '',
      );
      // deletionTimestamp is the deletion time + the 20 s grace period.
      const slept = finished - (deletionAt - 20_000);
      assert.ok(slept >= 3000 && slept < 20_000, `the preStop sleep took ${String(slept)} ms`);
      assert.match(done.status?.phase ?? '', /^(Succeeded|Failed)$/);
      // Long after berth finished with it, the status stays terminal and terminated.
      await new Promise((r) => setTimeout(r, 5000));
      const later = await getPod(cluster, 'default', 'prestop-finalizer');
      assert.match(later?.status?.phase ?? '', /^(Succeeded|Failed)$/);
      assert.ok(later?.status?.containerStatuses?.[0]?.state?.terminated !== undefined);
    } finally {
      await cluster.kubectl([
        'patch',
        'pod',
        'prestop-finalizer',
        '--type=json',
        '-p',
        '[{"op":"remove","path":"/metadata/finalizers"}]',
      ]);
    }
  });

  test('container statuses report resources and allocatedResources', async () => {
    const resources = {
      requests: { cpu: '100m', memory: '32Mi' },
      limits: { cpu: '200m', memory: '64Mi' },
    };
    await applyJson(
      cluster,
      pod('resources', { containers: [container('app', ['sleep', '3600'], { resources })] }),
    );
    const p = await waitForPod(
      cluster,
      'default',
      'resources',
      'Running',
      (x) => x.status?.containerStatuses?.[0]?.state?.running !== undefined,
    );
    assert.deepEqual(p.status?.containerStatuses?.[0]?.resources, resources);
    assert.deepEqual(p.status?.containerStatuses?.[0]?.allocatedResources, resources.requests);
  });

  test('status.observedGeneration and the conditions follow the pod generation', async () => {
    type Observed = { observedGeneration?: number };
    const generationOf = (x: Pod) => x.metadata?.generation ?? 0;
    const observed = (x: Pod) => (x.status as Observed | undefined)?.observedGeneration;
    const first = await waitForPod(
      cluster,
      'default',
      'resources',
      'observedGeneration set',
      (x) => observed(x) === generationOf(x),
    );
    // A spec change (an active deadline far away) makes a new generation.
    await cluster.kubectl([
      'patch',
      'pod',
      'resources',
      '--type=merge',
      '-p',
      '{"spec":{"activeDeadlineSeconds":36000}}',
    ]);
    const next = await waitForPod(
      cluster,
      'default',
      'resources',
      'the new generation observed',
      (x) => generationOf(x) > generationOf(first) && observed(x) === generationOf(x),
    );
    const ready = cond(next, 'Ready') as Observed | undefined;
    assert.equal(ready?.observedGeneration, generationOf(next));
  });
});
