import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Pod, ResourceRequirements } from 'kubernetes-types/core/v1.js';
import { MemoryResourceState } from '../allocation/state.ts';
import { PodCgroups } from '../cm/pod-cgroups.ts';
import { FakeCgroupManager } from '../cm/fake.ts';
import { MemoryLogger } from '../util/logger.ts';
import type { cri } from '../cri/index.ts';
import { computeResizeActions, isResizeInProgress, type ActuatedReader } from './resize.ts';
import { containerUnified } from './memory-qos.ts';
import { doPodResize } from './resize-exec.ts';
import type { RuntimeContainer, RuntimePodStatus } from '../container/pod-status.ts';

const req = (cpu: string, memory: string): ResourceRequirements => ({
  requests: { cpu, memory },
  limits: { cpu, memory },
});

function container(
  name: string,
  r: ResourceRequirements,
  extra: Partial<Container> = {},
): Container {
  return { name, image: 'busybox', resources: r, ...extra };
}

function pod(containers: Container[], inits: Container[] = []): Pod {
  return {
    metadata: { uid: 'u', name: 'p', namespace: 'default', generation: 2 },
    spec: { containers, ...(inits.length > 0 && { initContainers: inits }) },
  };
}

function running(name: string, state: RuntimeContainer['state'] = 'running'): RuntimeContainer {
  return {
    id: `id-${name}`,
    name,
    state,
    attempt: 0,
    createdAt: 1,
    hash: '',
    image: 'busybox',
    imageRef: 'busybox',
    sandboxId: 's',
  };
}

function status(...containers: RuntimeContainer[]): RuntimePodStatus {
  return { uid: 'u', name: 'p', namespace: 'default', sandboxes: [], containers };
}

function actuated(
  map: Record<string, ResourceRequirements>,
  podLevel?: ResourceRequirements,
): ActuatedReader {
  return { container: (_uid, name) => map[name], podLevel: () => podLevel };
}

/** `p` with pod-level resources (spec.resources, newer than the generated types). */
function withPodLevel(p: Pod, resources: ResourceRequirements): Pod {
  return { ...p, spec: { ...p.spec, resources } as NonNullable<Pod['spec']> };
}

describe('computeResizeActions', () => {
  test('orders each resource decreases first, then increases; unchanged and stopped are left out', () => {
    const p = pod([
      container('grow', req('400m', '128Mi')),
      container('shrink', req('100m', '32Mi')),
      container('same', req('100m', '32Mi')),
      container('stopped', req('900m', '32Mi')),
    ]);
    const a = computeResizeActions(
      p,
      status(running('grow'), running('shrink'), running('same'), running('stopped', 'exited')),
      actuated({
        grow: req('200m', '64Mi'),
        shrink: req('200m', '64Mi'),
        same: req('100m', '32Mi'),
        stopped: req('100m', '32Mi'),
      }),
    );
    assert.deepEqual(
      a.updates.cpu.map((u) => u.name),
      ['shrink', 'grow'],
    );
    assert.deepEqual(
      a.updates.memory.map((u) => u.name),
      ['shrink', 'grow'],
    );
    assert.equal(a.updates.cpu[1]?.desired.cpuLimit, 400);
    assert.equal(a.updates.cpu[1]?.current.cpuLimit, 200);
    assert.equal(a.restarts.size, 0);
    assert.equal(a.updatePodResources, false);
  });

  test('RestartContainer for a changed resource restarts that container instead', () => {
    const restart = [{ resourceName: 'memory', restartPolicy: 'RestartContainer' }];
    const p = pod([
      container('mem', req('100m', '96Mi'), { resizePolicy: restart }),
      container('cpuonly', req('200m', '32Mi'), { resizePolicy: restart }),
    ]);
    const a = computeResizeActions(
      p,
      status(running('mem'), running('cpuonly')),
      actuated({ mem: req('100m', '64Mi'), cpuonly: req('100m', '32Mi') }),
    );
    assert.deepEqual([...a.restarts], [['mem', 'Container mem resize requires restart']]);
    // Its cpu did not change memory: resized in place.
    assert.deepEqual(
      a.updates.cpu.map((u) => u.name),
      ['cpuonly'],
    );
    assert.equal(a.updatePodResources, true);
  });

  test('running sidecars and regular init containers are resized; only sidecars hold a resize in progress', () => {
    const p = pod(
      [container('app', req('100m', '32Mi'))],
      [
        container('side', req('300m', '32Mi'), { restartPolicy: 'Always' }),
        container('init', req('300m', '32Mi')),
      ],
    );
    const rt = status(running('app'), running('side'), running('init'));
    const act = actuated({
      app: req('100m', '32Mi'),
      side: req('100m', '32Mi'),
      init: req('100m', '32Mi'),
    });
    assert.deepEqual(
      computeResizeActions(p, rt, act).updates.cpu.map((u) => u.name),
      ['side', 'init'],
    );
    assert.equal(isResizeInProgress(p, rt, act), true);
    const sideDone = actuated({
      app: req('100m', '32Mi'),
      side: req('300m', '32Mi'),
      init: req('100m', '32Mi'),
    });
    // Upstream's IsPodResizeInProgress looks at restartable init containers only.
    assert.equal(isResizeInProgress(p, rt, sideDone), false);
  });

  test('actuated "0" limits equal absent ones (upstream records zero quantities)', () => {
    const p = pod([container('c', { requests: { cpu: '100m', memory: '32Mi' } })]);
    const act = actuated({
      c: { requests: { cpu: '100m', memory: '32Mi' }, limits: { cpu: '0', memory: '0' } },
    });
    assert.equal(isResizeInProgress(p, status(running('c')), act), false);
  });

  test('pod-level resources that differ from the actuated ones need the pod cgroup, with no container work', () => {
    const p = withPodLevel(pod([container('c', req('100m', '32Mi'))]), req('900m', '128Mi'));
    const act = actuated({ c: req('100m', '32Mi') }, req('800m', '128Mi'));
    const a = computeResizeActions(p, status(running('c')), act);
    assert.equal(a.updatePodLevelResources, true);
    assert.equal(a.updates.cpu.length + a.updates.memory.length, 0);
    assert.equal(isResizeInProgress(p, status(running('c')), act), true);
    const done = actuated({ c: req('100m', '32Mi') }, req('900m', '128Mi'));
    assert.equal(
      computeResizeActions(p, status(running('c')), done).updatePodLevelResources,
      false,
    );
    assert.equal(isResizeInProgress(p, status(running('c')), done), false);
  });

  test('no pod-level resources and no record: nothing to do', () => {
    const p = pod([container('c', req('100m', '32Mi'))]);
    const act = actuated({ c: req('100m', '32Mi') });
    assert.equal(computeResizeActions(p, status(running('c')), act).updatePodLevelResources, false);
    assert.equal(isResizeInProgress(p, status(running('c')), act), false);
  });
});

describe('doPodResize', () => {
  function harness(podUsage: number, containerUsage: number) {
    const cgroups = new FakeCgroupManager();
    const podCgroups = new PodCgroups({
      cgroups,
      cgroupRoot: '/r',
      driver: () => 'cgroupfs',
      podPidsLimit: 0,
      logger: new MemoryLogger(),
    });
    const calls: string[] = [];
    const runtime = {
      updateContainerResources: (r: cri.DeepPartial<cri.UpdateContainerResourcesRequest>) => {
        calls.push(
          `container ${r.containerId ?? ''} quota=${String(r.linux?.cpuQuota)} mem=${String(r.linux?.memoryLimitInBytes)}`,
        );
        return Promise.resolve({});
      },
      containerStats: () =>
        Promise.resolve({
          stats: { memory: { usageBytes: { value: BigInt(containerUsage) } } },
        } as unknown as cri.ContainerStatsResponse),
    };
    const state = new MemoryResourceState();
    return { cgroups, podCgroups, calls, runtime, state, podUsage };
  }

  async function run(old: ResourceRequirements, next: ResourceRequirements, usage = 0) {
    const h = harness(usage, usage);
    const before = pod([container('c', old)]);
    const after = pod([container('c', next)]);
    await h.podCgroups.ensurePod(before);
    h.cgroups.memoryUsage.set(h.podCgroups.podCgroupName(before), usage);
    const actions = computeResizeActions(after, status(running('c')), actuated({ c: old }));
    const result = await doPodResize(
      {
        runtime: h.runtime,
        podCgroups: h.podCgroups,
        actuated: h.state,
        logger: new MemoryLogger(),
      },
      after,
      actions,
      new AbortController().signal,
    );
    const order = h.cgroups.updates.map(
      (u) => `pod quota=${String(u.resources.cpuQuota)} mem=${String(u.resources.memoryLimit)}`,
    );
    return { h, result, order };
  }

  test('growing: the pod cgroup first, then the container', async () => {
    const { h, result } = await run(req('200m', '64Mi'), req('400m', '128Mi'));
    assert.deepEqual(result, { ok: true });
    const log = [...h.cgroups.updates.map((u) => `pod ${JSON.stringify(u.resources)}`)];
    assert.equal(log.length, 3); // memory limit, cpu limit, cpu shares
    assert.match(log[0] ?? '', /"memoryLimit":134217728/);
    assert.equal(h.calls.length, 2);
    assert.match(h.calls[0] ?? '', /mem=134217728/);
    assert.deepEqual(h.state.get('u')?.containerResources['c'], {
      limits: { cpu: '400m', memory: '128Mi' },
      requests: { cpu: '400m', memory: '128Mi' },
    });
  });

  test('the unified map (memory.high on cgroup v2) follows a memory resize', async () => {
    const h = harness(0, 0);
    const before = pod([
      container('c', { requests: { memory: '64Mi' }, limits: { memory: '128Mi' } }),
    ]);
    const after = pod([
      container('c', { requests: { memory: '64Mi' }, limits: { memory: '256Mi' } }),
    ]);
    await h.podCgroups.ensurePod(before);
    const sent: (Record<string, string> | undefined)[] = [];
    const runtime = {
      ...h.runtime,
      updateContainerResources: (r: cri.DeepPartial<cri.UpdateContainerResourcesRequest>) => {
        sent.push(r.linux?.unified as Record<string, string> | undefined);
        return Promise.resolve({});
      },
    };
    const actions = computeResizeActions(
      after,
      status(running('c')),
      actuated({ c: { requests: { memory: '64Mi' }, limits: { memory: '128Mi' } } }),
    );
    const unifiedOptions = {
      cgroupV2: true,
      singleProcessOOMKill: null,
      memoryQos: { throttlingFactor: 0.9, allocatableMemoryBytes: undefined },
    };
    const result = await doPodResize(
      {
        runtime,
        podCgroups: h.podCgroups,
        actuated: h.state,
        logger: new MemoryLogger(),
        unified: (c) => containerUnified(c, unifiedOptions),
      },
      after,
      actions,
      new AbortController().signal,
    );
    assert.deepEqual(result, { ok: true });
    // 64 MiB + (256 - 64) MiB x 0.9, page aligned: the new limit's throttle, not the old one's.
    const high = String(Math.floor((64 + 192 * 0.9) * 256) * 4096);
    assert.deepEqual(sent, [
      { 'memory.oom.group': '1', 'memory.min': '0', 'memory.low': '0', 'memory.high': high },
    ]);
  });

  test('shrinking: the container first, then the pod cgroup', async () => {
    const h = harness(0, 0);
    const before = pod([container('c', req('400m', '64Mi'))]);
    const after = pod([container('c', req('200m', '64Mi'))]);
    await h.podCgroups.ensurePod(before);
    const seen: string[] = [];
    const runtime = {
      ...h.runtime,
      updateContainerResources: () => {
        seen.push(
          `container, pod quota then ${String(h.cgroups.groups.get(h.podCgroups.podCgroupName(before))?.cpuQuota)}`,
        );
        return Promise.resolve({});
      },
    };
    const actions = computeResizeActions(
      after,
      status(running('c')),
      actuated({ c: req('400m', '64Mi') }),
    );
    const result = await doPodResize(
      { runtime, podCgroups: h.podCgroups, actuated: h.state, logger: new MemoryLogger() },
      after,
      actions,
      new AbortController().signal,
    );
    assert.deepEqual(result, { ok: true });
    assert.deepEqual(seen, ['container, pod quota then 40000']);
    assert.equal(h.cgroups.groups.get(h.podCgroups.podCgroupName(before))?.cpuQuota, 20000);
  });

  test('a pod-level-only resize grows the pod cgroup and records the actuated pod-level resources', async () => {
    const h = harness(0, 0);
    const before = withPodLevel(pod([container('c', req('100m', '32Mi'))]), req('800m', '128Mi'));
    const after = withPodLevel(pod([container('c', req('100m', '32Mi'))]), req('900m', '256Mi'));
    await h.podCgroups.ensurePod(before);
    await h.state.setPodLevel('u', req('800m', '128Mi'));
    const actions = computeResizeActions(
      after,
      status(running('c')),
      actuated({ c: req('100m', '32Mi') }, req('800m', '128Mi')),
    );
    const result = await doPodResize(
      {
        runtime: h.runtime,
        podCgroups: h.podCgroups,
        actuated: h.state,
        logger: new MemoryLogger(),
      },
      after,
      actions,
      new AbortController().signal,
    );
    assert.deepEqual(result, { ok: true });
    assert.deepEqual(h.calls, []);
    const group = h.cgroups.groups.get(h.podCgroups.podCgroupName(before));
    assert.equal(group?.cpuQuota, 90000);
    assert.equal(group?.memoryLimit, 256 * 1024 * 1024);
    assert.deepEqual(h.state.get('u')?.podLevelResources, req('900m', '256Mi'));
  });

  test("a memory limit below current use is refused with upstream's message, nothing applied", async () => {
    const { h, result } = await run(req('100m', '128Mi'), req('100m', '32Mi'), 40 * 1024 * 1024);
    assert.equal(result.ok, false);
    assert.equal(
      result.ok ? '' : result.message,
      `cannot decrease memory limits: [attempting to set pod memory limit (33554432) below current usage (41943040), attempting to set container "c" memory limit (33554432) below current usage (41943040)]`,
    );
    assert.deepEqual(h.calls, []);
    assert.deepEqual(h.cgroups.updates, []);
  });
});
