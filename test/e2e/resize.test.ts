/**
 * In-place pod resize on berth (issue #30), containerd 2.x, cgroup v1: the `resize`
 * subresource changes a running pod's cpu and memory, read back from the container's
 * and the pod's cgroup files and from status.containerStatuses[].resources; resizePolicy
 * RestartContainer restarts only its container; a resize that does not fit beside the
 * other pods is Deferred and applied once one leaves; berth killed around a resize
 * finishes it after a restart; a sidecar is resized; a memory limit below use stays in
 * progress with upstream's error; a completed init container's resize is allocated. A
 * request beyond the node's allocatable never reaches the kubelet at v1.37 (the API
 * server's PodResizeValidator refuses it), nor does a pod-level resources resize (berth
 * does not declare InPlacePodLevelResourcesVerticalScaling).
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type {
  Container,
  Node,
  Pod,
  PodCondition,
  ResourceRequirements,
} from 'kubernetes-types/core/v1.js';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  getJson,
  getPod,
  isRunningAndReady,
  waitForPod,
} from '../harness/kube-helpers.ts';

type Condition = PodCondition & { observedGeneration?: number };
const cond = (p: Pod, type: string): Condition | undefined =>
  p.status?.conditions?.find((c) => c.type === type);
const guaranteed = (cpu: string, memory: string) => ({
  requests: { cpu, memory },
  limits: { cpu, memory },
});

describe('in-place pod resize on berth', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let node: string;

  const container = (name: string, resources: object, extra: object = {}): Container => ({
    name,
    image: cluster.images.busyboxLocal,
    imagePullPolicy: 'IfNotPresent',
    command: ['sleep', '3600'],
    resources,
    ...extra,
  });
  const pod = (name: string, containers: Container[], extra: object = {}): Pod => {
    const base = busyboxPod(cluster, name, node, { grace: 2 });
    return { ...base, spec: { ...base.spec, containers, ...extra } };
  };
  const running = (name: string): Promise<Pod> =>
    waitFor(name, 'Running and Ready', isRunningAndReady);

  /** kubectl patch --subresource resize with a strategic merge of the named containers. */
  const resize = (name: string, patch: object): Promise<string> =>
    cluster.kubectl([
      'patch',
      'pod',
      name,
      '--subresource',
      'resize',
      '--type=strategic',
      '-p',
      JSON.stringify({ spec: patch }),
    ]);

  /** The pod's cgroup directory for `controller` (cgroupfs driver, cgroup v1). */
  const podCgroup = (p: Pod, controller: string): string => {
    const qos = p.status?.qosClass ?? 'BestEffort';
    const tier = qos === 'Guaranteed' ? [] : [qos.toLowerCase()];
    return join(
      '/sys/fs/cgroup',
      controller,
      cluster.state.cgroupRoot,
      'kubepods',
      ...tier,
      `pod${p.metadata?.uid ?? ''}`,
    );
  };
  const statusOf = (p: Pod, name: string) =>
    [...(p.status?.containerStatuses ?? []), ...(p.status?.initContainerStatuses ?? [])].find(
      (s) => s.name === name,
    );
  const containerCgroup = (p: Pod, name: string, controller: string): string => {
    const id = (statusOf(p, name)?.containerID ?? '').replace(/^[a-z0-9]+:\/\//, '');
    return join(podCgroup(p, controller), id);
  };
  const readNumber = async (file: string): Promise<number> =>
    Number((await readFile(file, 'utf8')).trim());
  const cpuQuota = (p: Pod, name: string) =>
    readNumber(join(containerCgroup(p, name, 'cpu'), 'cpu.cfs_quota_us'));
  const memoryLimit = (p: Pod, name: string) =>
    readNumber(join(containerCgroup(p, name, 'memory'), 'memory.limit_in_bytes'));

  /** Waits until the resize of generation `generation` is done (no resize condition left). */
  /** waitForPod, failing with what the pod and berth said, so a failure reads without the cluster. */
  const waitFor = async (
    name: string,
    what: string,
    ok: (p: Pod) => boolean,
    timeoutMs = 90_000,
  ): Promise<Pod> => {
    try {
      return await waitForPod(cluster, 'default', name, what, ok, timeoutMs);
    } catch (err) {
      const p = await getPod(cluster, 'default', name);
      const log = await readFile(berth.logFile, 'utf8').catch(() => '');
      const lines = log
        .split('\n')
        .filter((l) => /resiz|allocat|Container resources|admission/i.test(l))
        .slice(-15);
      const statuses = [
        ...(p?.status?.containerStatuses ?? []),
        ...(p?.status?.initContainerStatuses ?? []),
      ].map((s) => [s.name, s.restartCount, s.resources, s.allocatedResources]);
      throw new Error(
        `${(err as Error).message}\nphase: ${p?.status?.phase ?? ''} ${p?.status?.reason ?? ''}\n` +
          `conditions: ${JSON.stringify(p?.status?.conditions)}\n` +
          `statuses: ${JSON.stringify(statuses)}\nberth: ${lines.join('\n')}`,
        { cause: err },
      );
    }
  };
  /** Waits until a resize is done: `ok`, and no resize condition left. */
  const resized = (name: string, what: string, ok: (p: Pod) => boolean): Promise<Pod> =>
    waitFor(
      name,
      what,
      (p) =>
        ok(p) &&
        cond(p, 'PodResizeInProgress') === undefined &&
        cond(p, 'PodResizePending') === undefined,
    );

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

  test("a Guaranteed pod's cpu limit is raised and lowered in place", async () => {
    await applyJson(cluster, pod('cpu', [container('c', guaranteed('200m', '64Mi'))]));
    const first = await running('cpu');
    assert.equal(await cpuQuota(first, 'c'), 20_000);
    const id = statusOf(first, 'c')?.containerID;

    await resize('cpu', { containers: [{ name: 'c', resources: guaranteed('400m', '64Mi') }] });
    const up = await resized(
      'cpu',
      'resized to 400m',
      (p) => statusOf(p, 'c')?.resources?.limits?.['cpu'] === '400m',
    );
    assert.deepEqual(statusOf(up, 'c')?.resources, guaranteed('400m', '64Mi'));
    assert.deepEqual(statusOf(up, 'c')?.allocatedResources, { cpu: '400m', memory: '64Mi' });
    assert.equal(statusOf(up, 'c')?.containerID, id, 'same container');
    assert.equal(statusOf(up, 'c')?.restartCount, 0);
    assert.equal(await cpuQuota(up, 'c'), 40_000);
    assert.equal(await readNumber(join(podCgroup(up, 'cpu'), 'cpu.cfs_quota_us')), 40_000);
    assert.equal(await readNumber(join(podCgroup(up, 'cpu'), 'cpu.shares')), 409);
    const events = await cluster.kubectl([
      'get',
      'events',
      '--field-selector',
      'involvedObject.name=cpu',
      '-o',
      'jsonpath={range .items[*]}{.reason}{"\\n"}{end}',
    ]);
    assert.match(events, /ResizeStarted/);
    assert.match(events, /ResizeCompleted/);

    await resize('cpu', { containers: [{ name: 'c', resources: guaranteed('100m', '64Mi') }] });
    const down = await resized(
      'cpu',
      'resized to 100m',
      (p) => statusOf(p, 'c')?.resources?.limits?.['cpu'] === '100m',
    );
    assert.equal(statusOf(down, 'c')?.containerID, id, 'same container');
    assert.equal(await cpuQuota(down, 'c'), 10_000);
    assert.equal(await readNumber(join(podCgroup(down, 'cpu'), 'cpu.cfs_quota_us')), 10_000);
    assert.equal(
      (down.status as { observedGeneration?: number } | undefined)?.observedGeneration,
      down.metadata?.generation,
    );
  });

  test('a memory resize with RestartContainer restarts only that container', async () => {
    const restart = [{ resourceName: 'memory', restartPolicy: 'RestartContainer' }];
    await applyJson(
      cluster,
      pod('mem', [
        container('restarts', guaranteed('100m', '64Mi'), { resizePolicy: restart }),
        container('stays', guaranteed('100m', '64Mi')),
      ]),
    );
    const first = await running('mem');
    const staysId = statusOf(first, 'stays')?.containerID;
    await resize('mem', {
      containers: [
        { name: 'restarts', resources: guaranteed('100m', '96Mi') },
        { name: 'stays', resources: guaranteed('100m', '96Mi') },
      ],
    });
    const after = await resized(
      'mem',
      'both at 96Mi, one restarted',
      (p) =>
        isRunningAndReady(p) &&
        statusOf(p, 'restarts')?.restartCount === 1 &&
        statusOf(p, 'stays')?.resources?.limits?.['memory'] === '96Mi' &&
        statusOf(p, 'restarts')?.resources?.limits?.['memory'] === '96Mi',
    );
    assert.equal(statusOf(after, 'stays')?.restartCount, 0);
    assert.equal(statusOf(after, 'stays')?.containerID, staysId);
    assert.equal(await memoryLimit(after, 'restarts'), 96 * 1024 * 1024);
    assert.equal(await memoryLimit(after, 'stays'), 96 * 1024 * 1024);
    assert.equal(
      await readNumber(join(podCgroup(after, 'memory'), 'memory.limit_in_bytes')),
      192 * 1024 * 1024,
    );
  });

  test('a sidecar (restartable init container) is resized in place', async () => {
    await applyJson(
      cluster,
      pod('sidecar', [container('app', guaranteed('100m', '32Mi'))], {
        initContainers: [
          container('side', guaranteed('100m', '32Mi'), { restartPolicy: 'Always' }),
        ],
      }),
    );
    const first = await running('sidecar');
    await resize('sidecar', {
      initContainers: [{ name: 'side', resources: guaranteed('300m', '32Mi') }],
    });
    const after = await resized(
      'sidecar',
      'sidecar at 300m',
      (p) => statusOf(p, 'side')?.resources?.limits?.['cpu'] === '300m',
    );
    assert.equal(statusOf(after, 'side')?.restartCount, 0);
    assert.equal(statusOf(after, 'side')?.containerID, statusOf(first, 'side')?.containerID);
    assert.equal(await cpuQuota(after, 'side'), 30_000);
    // The pod's limit: app and sidecar together.
    assert.equal(await readNumber(join(podCgroup(after, 'cpu'), 'cpu.cfs_quota_us')), 40_000);
  });

  test("a memory limit below current use stays in progress with upstream's error", async () => {
    await applyJson(
      cluster,
      pod('below', [
        container('hog', guaranteed('100m', '128Mi'), {
          command: [
            'sh',
            '-c',
            'dd if=/dev/zero of=/dev/shm/fill bs=1M count=48 && touch /tmp/filled; sleep 3600',
          ],
        }),
      ]),
    );
    await running('below');
    // The 48 MiB file in /dev/shm is charged to the container's memory cgroup once dd is done.
    await eventually('the 48 MiB written', async () => {
      await cluster.kubectl(['exec', 'below', '--', 'test', '-e', '/tmp/filled']);
      return true;
    });
    await resize('below', { containers: [{ name: 'hog', resources: guaranteed('100m', '32Mi') }] });
    const stuck = await waitFor(
      'below',
      'PodResizeInProgress with reason Error',
      (p) => cond(p, 'PodResizeInProgress')?.reason === 'Error',
      90_000,
    );
    assert.match(
      cond(stuck, 'PodResizeInProgress')?.message ?? '',
      /^cannot decrease memory limits: .*attempting to set .*memory limit \(33554432\) below current usage \(\d+\)/,
    );
    assert.equal(statusOf(stuck, 'hog')?.resources?.limits?.['memory'], '128Mi');
    assert.equal(statusOf(stuck, 'hog')?.allocatedResources?.['memory'], '32Mi');
    assert.equal(await memoryLimit(stuck, 'hog'), 128 * 1024 * 1024);
    await cluster.kubectl(['delete', 'pod', 'below', '--wait=true', '--timeout=60s']);
  });

  test("a resize beyond the node's allocatable is refused by the API server (v1.37)", async () => {
    await applyJson(cluster, pod('huge', [container('c', guaranteed('100m', '32Mi'))]));
    await running('huge');
    await assert.rejects(
      resize('huge', { containers: [{ name: 'c', resources: guaranteed('1000', '32Mi') }] }),
      /node didn't have enough allocatable resources/,
    );
    await assert.rejects(
      resize('huge', { containers: [{ name: 'c', resources: guaranteed('-1', '32Mi') }] }),
      /Invalid value|must be greater than or equal to 0|quantities must match/,
    );
    await assert.rejects(
      resize('huge', { containers: [{ name: 'c', resources: guaranteed('lots', '32Mi') }] }),
      /quantities must match the regular expression|unable to parse quantity|invalid/i,
    );
    await cluster.kubectl(['delete', 'pod', 'huge', '--wait=true', '--timeout=60s']);
  });

  test('pod-level resources are resized in place: the pod cgroup and a container without a limit follow', async () => {
    await applyJson(
      cluster,
      pod('level', [container('c', { requests: { cpu: '100m', memory: '32Mi' } })], {
        resources: { limits: { cpu: '200m', memory: '64Mi' } },
      }),
    );
    const first = await running('level');
    // The container has no cpu limit of its own: it is bounded by the pod's.
    assert.equal(await cpuQuota(first, 'c'), 20_000);
    assert.equal(await readNumber(join(podCgroup(first, 'cpu'), 'cpu.cfs_quota_us')), 20_000);
    const id = statusOf(first, 'c')?.containerID;
    await resize('level', { resources: { limits: { cpu: '300m', memory: '64Mi' } } });
    const after = await resized(
      'level',
      'pod-level cpu limit at 300m',
      (p) =>
        ((p.status as { observedGeneration?: number } | undefined)?.observedGeneration ?? 0) >= 2,
    );
    assert.equal(await readNumber(join(podCgroup(after, 'cpu'), 'cpu.cfs_quota_us')), 30_000);
    assert.equal(await cpuQuota(after, 'c'), 30_000);
    assert.equal(statusOf(after, 'c')?.containerID, id, 'same container');
    await cluster.kubectl(['delete', 'pod', 'level', '--wait=true', '--timeout=60s']);
  });

  test('a pod-level resize whose containers keep their own limits changes the pod cgroup alone', async () => {
    await applyJson(
      cluster,
      pod('level2', [container('c', guaranteed('100m', '32Mi'))], {
        resources: guaranteed('200m', '64Mi'),
      }),
    );
    const first = await running('level2');
    assert.equal(await readNumber(join(podCgroup(first, 'cpu'), 'cpu.cfs_quota_us')), 20_000);
    await resize('level2', { resources: guaranteed('400m', '96Mi') });
    const after = await resized(
      'level2',
      'status.resources at the new pod-level limits',
      (p) =>
        (p.status as { resources?: ResourceRequirements } | undefined)?.resources?.limits?.[
          'cpu'
        ] === '400m',
    );
    assert.equal(await readNumber(join(podCgroup(after, 'cpu'), 'cpu.cfs_quota_us')), 40_000);
    assert.equal(
      await readNumber(join(podCgroup(after, 'memory'), 'memory.limit_in_bytes')),
      96 * 1024 * 1024,
    );
    // The container's own limit is not the pod's: it stays.
    assert.equal(await cpuQuota(after, 'c'), 10_000);
    assert.deepEqual((after.status as { resources?: ResourceRequirements }).resources, {
      requests: { cpu: '400m', memory: '96Mi' },
      limits: { cpu: '400m', memory: '96Mi' },
    });
    const conditions = (after.status?.conditions ?? []).map((c) => c.type);
    assert.ok(!conditions.includes('PodResizeInProgress'), conditions.join(','));
    await cluster.kubectl(['delete', 'pod', 'level2', '--wait=true', '--timeout=60s']);
  });

  test('a running regular init container is resized in place (its cgroup and status follow)', async () => {
    await applyJson(
      cluster,
      pod('init-running', [container('app', guaranteed('100m', '32Mi'))], {
        initContainers: [
          container('setup', guaranteed('100m', '32Mi'), { command: ['tail', '-f', '/dev/null'] }),
        ],
      }),
    );
    const first = await waitFor(
      'init-running',
      'init container running',
      (p) => statusOf(p, 'setup')?.state?.running !== undefined,
    );
    assert.equal(await cpuQuota(first, 'setup'), 10_000);
    const id = statusOf(first, 'setup')?.containerID;
    await resize('init-running', {
      initContainers: [{ name: 'setup', resources: guaranteed('200m', '48Mi') }],
    });
    const p = await resized(
      'init-running',
      'running init container at 200m',
      (x) => statusOf(x, 'setup')?.resources?.limits?.['cpu'] === '200m',
    );
    assert.deepEqual(statusOf(p, 'setup')?.resources, guaranteed('200m', '48Mi'));
    assert.equal(await cpuQuota(p, 'setup'), 20_000);
    assert.equal(await memoryLimit(p, 'setup'), 48 * 1024 * 1024);
    assert.equal(statusOf(p, 'setup')?.containerID, id, 'same container');
    await cluster.kubectl(['delete', 'pod', 'init-running', '--wait=true', '--timeout=60s']);
  });

  test("a completed init container's resize is allocated for its next run", async () => {
    await applyJson(
      cluster,
      pod('init', [container('app', guaranteed('100m', '32Mi'))], {
        initContainers: [container('setup', guaranteed('100m', '32Mi'), { command: ['true'] })],
      }),
    );
    await running('init');
    await resize('init', {
      initContainers: [{ name: 'setup', resources: guaranteed('200m', '32Mi') }],
    });
    const p = await resized(
      'init',
      'init container allocated at 200m',
      (x) => statusOf(x, 'setup')?.allocatedResources?.['cpu'] === '200m',
    );
    assert.deepEqual(statusOf(p, 'setup')?.resources, guaranteed('200m', '32Mi'));
    await cluster.kubectl(['delete', 'pod', 'init', '--wait=true', '--timeout=60s']);
  });

  test('a resize that does not fit beside another pod is Deferred, then applied once it leaves', async () => {
    const nodeObj = await getJson<Node>(cluster, ['get', 'node', node]);
    const allocatable = milli(nodeObj?.status?.allocatable?.['cpu'] ?? '0');
    const pods = (await getJson<{ items: Pod[] }>(cluster, ['get', 'pods', '-A']))?.items ?? [];
    const used = pods
      .filter((p) => p.spec?.nodeName === node)
      // What keeps running: app containers and sidecars.
      .flatMap((p) => [
        ...(p.spec?.containers ?? []),
        ...(p.spec?.initContainers ?? []).filter((c) => c.restartPolicy === 'Always'),
      ])
      .reduce((n, c) => n + milli(c.resources?.requests?.['cpu'] ?? '0'), 0);
    const free = allocatable - used;
    assert.ok(free > 600, `enough cpu left on the node: ${free}m`);
    await applyJson(cluster, pod('hog', [container('c', guaranteed(`${free - 400}m`, '32Mi'))]));
    await applyJson(cluster, pod('grow', [container('c', guaranteed('200m', '32Mi'))]));
    await running('hog');
    const first = await running('grow');
    await resize('grow', { containers: [{ name: 'c', resources: guaranteed('600m', '32Mi') }] });
    const deferred = await waitFor(
      'grow',
      'PodResizePending Deferred',
      (p) => cond(p, 'PodResizePending')?.reason === 'Deferred',
    );
    assert.match(
      cond(deferred, 'PodResizePending')?.message ?? '',
      /^Node didn't have enough resource: cpu, requested: 600, used: \d+, capacity: \d+$/,
    );
    assert.equal(
      cond(deferred, 'PodResizePending')?.observedGeneration,
      deferred.metadata?.generation,
    );
    assert.equal(statusOf(deferred, 'c')?.allocatedResources?.['cpu'], '200m');
    assert.equal(await cpuQuota(deferred, 'c'), 20_000);
    await cluster.kubectl(['delete', 'pod', 'hog', '--wait=true', '--timeout=60s']);
    const applied = await resized(
      'grow',
      'applied after the other pod left',
      (p) => statusOf(p, 'c')?.resources?.limits?.['cpu'] === '600m',
    );
    assert.equal(statusOf(applied, 'c')?.containerID, statusOf(first, 'c')?.containerID);
    assert.equal(await cpuQuota(applied, 'c'), 60_000);
  });

  test('berth killed around a resize finishes it after a restart', async () => {
    await applyJson(cluster, pod('crash', [container('c', guaranteed('100m', '32Mi'))]));
    const first = await running('crash');
    const id = statusOf(first, 'c')?.containerID;
    // Resized while berth is down: the restarted berth allocates and actuates it.
    await berth.kill();
    await resize('crash', { containers: [{ name: 'c', resources: guaranteed('200m', '32Mi') }] });
    berth = await berth.restart();
    let p = await resized(
      'crash',
      'at 200m after the restart',
      (x) => statusOf(x, 'c')?.resources?.limits?.['cpu'] === '200m',
    );
    assert.equal(await cpuQuota(p, 'c'), 20_000);
    // Killed right after the resize reached it (allocated, maybe not yet actuated).
    await resize('crash', { containers: [{ name: 'c', resources: guaranteed('300m', '32Mi') }] });
    await berth.kill();
    berth = await berth.restart();
    p = await resized(
      'crash',
      'at 300m after the second restart',
      (x) => statusOf(x, 'c')?.resources?.limits?.['cpu'] === '300m',
    );
    assert.equal(await cpuQuota(p, 'c'), 30_000);
    assert.equal(statusOf(p, 'c')?.containerID, id, 'never restarted');
    assert.equal(statusOf(p, 'c')?.restartCount, 0);
    // Upstream's checkpoints in the root directory hold the new size.
    for (const file of ['allocated_pods_state', 'actuated_pods_state']) {
      const text = await readFile(join(berth.dir, file), 'utf8');
      const data = (JSON.parse(text) as { data: string }).data;
      assert.match(
        data,
        new RegExp(
          `"${p.metadata?.uid ?? ''}":\\{"ContainerResources":\\{"c":\\{"limits":\\{"cpu":"300m"`,
        ),
      );
    }
  });
});

function milli(q: string): number {
  if (q.endsWith('m')) return Number(q.slice(0, -1));
  return Math.round(Number(q) * 1000);
}
