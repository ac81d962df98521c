/**
 * User namespaces through the runtime manager (upstream's NamespacesForPod and
 * applyPlatformSpecificContainerConfig) over the fake CRI and the fake userns manager:
 * what RunPodSandbox and CreateContainer get for a `hostUsers: false` pod, the refusal
 * on a handler without support, and the same mappings for a container started in a
 * sandbox berth did not create in this run (a restart).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, test } from 'node:test';
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { testPod } from '../container/testing.ts';
import { cri } from '../cri/index.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { ImageManager } from '../images/manager.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { KubeletMetrics } from '../metrics/registry.ts';
import { RelistPleg } from '../pleg/generic.ts';
import type { WaitingReason } from '../status/generate.ts';
import { FakeUserNamespaceManager, type FakeUsernsOptions } from '../userns/fake.ts';
import { Backoff } from '../util/backoff.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FakeVolumeManager } from '../volumes/fake.ts';
import { KubeRuntimeManager } from './runtime-manager.ts';
import { RuntimeStatusReader } from './runtime-status.ts';

const BACKOFF = { initialMs: 10_000, maxMs: 300_000, resetAfterMs: 600_000 } as const;
const live = (): AbortSignal => new AbortController().signal;
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

async function harness(userns: FakeUsernsOptions) {
  const dir = await mkdtemp(join(tmpdir(), 'berth-userns-runtime-'));
  dirs.push(dir);
  const clock = new FakeClock();
  const fake = new FakeCriClient({ clock });
  fake.addImage('registry.test/main:1', { preloaded: true });
  const recorder = new MemoryEventRecorder();
  const logger = new MemoryLogger();
  const metrics = new KubeletMetrics();
  const pleg = new RelistPleg({ runtime: fake.runtime, clock, logger, onEvents: () => undefined });
  const manager = (users: FakeUserNamespaceManager) =>
    new KubeRuntimeManager({
      cri: fake,
      kube: new FakeKubeClient({ clock }),
      pleg,
      reader: new RuntimeStatusReader(fake.runtime),
      images: new ImageManager({
        images: fake.image,
        recorder,
        clock,
        logger,
        backoff: new Backoff(clock, BACKOFF),
        maxParallelPulls: 1,
      }),
      recorder,
      clock,
      logger,
      crashBackoff: new Backoff(clock, BACKOFF),
      runtimeConfig: {
        podLogsDir: join(dir, 'logs'),
        cgroupRoot: '',
        cgroupsPerQOS: false,
        nodeName: 'node-a',
        clusterDomain: 'cluster.local',
        dns: () => undefined,
      },
      rootDir: dir,
      volumes: new FakeVolumeManager({ rootDir: dir }),
      env: {
        environment: (_pod, c: Container) =>
          Promise.resolve({ env: [], command: c.command ?? [], args: c.args ?? [] }),
      },
      hostsFile: () => '127.0.0.1\tlocalhost\n',
      userns: users,
      metrics,
    });
  const sync = async (
    m: KubeRuntimeManager,
    pod: Pod,
    waiting = new Map<string, WaitingReason>(),
  ) => {
    await pleg.relist(live());
    const status = await m.getPodStatus(pod, live());
    return m.syncPod(pod, status, () => Promise.resolve([]), live(), {
      volumes: { byName: new Map() },
      waiting,
    });
  };
  const users = new FakeUserNamespaceManager(userns);
  /** kubelet_started_user_namespaced_pods_total and its errors. */
  const counts = async () => {
    const text = await metrics.registry.metrics();
    const value = (name: string) =>
      Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1] ?? 'NaN');
    return [
      value('kubelet_started_user_namespaced_pods_total'),
      value('kubelet_started_user_namespaced_pods_errors_total'),
    ];
  };
  return { fake, recorder, users, manager, sync, counts, first: manager(users) };
}

function usernsPod(containers: string[] = ['main']): Pod {
  const p = testPod({ containers });
  return { ...p, spec: { ...p.spec, containers: p.spec?.containers ?? [], hostUsers: false } };
}

const sandboxes = (fake: FakeCriClient) =>
  fake.callsTo('RuntimeService/RunPodSandbox') as cri.RunPodSandboxRequest[];
const creates = (fake: FakeCriClient) =>
  fake.callsTo('RuntimeService/CreateContainer') as cri.CreateContainerRequest[];

describe('user namespaces in the runtime manager', () => {
  test("hostUsers false: the sandbox and the container get the pod's mappings, mounts idmapped", async () => {
    const h = await harness({ handlers: { '': true } });
    const result = await h.sync(h.first, usernsPod());
    assert.equal(result.outcome, 'synced');
    const want = {
      mode: cri.NamespaceMode.POD,
      uids: [{ hostId: 65536, containerId: 0, length: 65536 }],
      gids: [{ hostId: 65536, containerId: 0, length: 65536 }],
    };
    const [run] = sandboxes(h.fake);
    assert.deepEqual(run?.config?.linux?.securityContext?.namespaceOptions?.usernsOptions, want);
    const [create] = creates(h.fake);
    const sc = create?.config?.linux?.securityContext;
    assert.deepEqual(sc?.namespaceOptions?.usernsOptions, want);
    const mounts = create?.config?.mounts ?? [];
    assert.ok(mounts.length > 0, 'the hosts file at least');
    for (const m of mounts) assert.deepEqual(m.uidMappings, want.uids, m.containerPath);
  });

  test('a handler without user namespaces: no sandbox, the event in upstream words', async () => {
    const h = await harness({ handlers: { '': false } });
    const result = await h.sync(h.first, usernsPod());
    assert.equal(result.outcome, 'sandbox-failed');
    assert.equal(sandboxes(h.fake).length, 0);
    assert.deepEqual(
      h.recorder.events.map((e) => [e.reason, e.message]),
      [
        [
          'FailedCreatePodSandBox',
          "Failed to create pod sandbox: can't set `spec.hostUsers: false`, runtime does not support user namespaces",
        ],
      ],
    );
  });

  test('a container started later in the running sandbox gets the same mappings', async () => {
    const h = await harness({ handlers: { '': true } });
    await h.sync(h.first, usernsPod(['main']));
    // Another manager (berth restarted) over the same runtime and the recorded ranges.
    const restarted = h.manager(h.users);
    h.fake.addImage('registry.test/side:1', { preloaded: true });
    await h.sync(restarted, usernsPod(['main', 'side']));
    assert.equal(sandboxes(h.fake).length, 1, 'the sandbox is kept');
    const side = creates(h.fake).find((c) => c.config?.metadata?.name === 'side');
    assert.equal(
      side?.config?.linux?.securityContext?.namespaceOptions?.usernsOptions?.uids[0]?.hostId,
      65536,
    );
    assert.equal(
      side?.sandboxConfig?.linux?.securityContext?.namespaceOptions?.usernsOptions?.mode,
      cri.NamespaceMode.POD,
    );
  });

  test('a container to start in a sandbox whose handler lost support: CreateContainerConfigError', async () => {
    const h = await harness({ handlers: { '': true } });
    await h.sync(h.first, usernsPod(['main']));
    // Restarted against a runtime that no longer reports user namespace support.
    const restarted = h.manager(new FakeUserNamespaceManager({ handlers: { '': false } }));
    h.fake.addImage('registry.test/side:1', { preloaded: true });
    const waiting = new Map<string, WaitingReason>();
    const result = await h.sync(restarted, usernsPod(['main', 'side']), waiting);
    assert.deepEqual(result, { outcome: 'synced', requeueAfterMs: 10_000 });
    const refusal = "can't set `spec.hostUsers: false`, runtime does not support user namespaces";
    assert.deepEqual(waiting.get('side'), {
      reason: 'CreateContainerConfigError',
      message: refusal,
    });
    assert.deepEqual(h.recorder.events.at(-1)?.message, `Error: ${refusal}`);
    assert.equal(
      creates(h.fake).filter((c) => c.config?.metadata?.name === 'side').length,
      0,
      'never started outside its user namespace',
    );
  });

  test('hostUsers unset: the node user namespace, no range', async () => {
    const h = await harness({ handlers: { '': false } });
    await h.sync(h.first, testPod());
    const [run] = sandboxes(h.fake);
    const ns = run?.config?.linux?.securityContext?.namespaceOptions?.usernsOptions;
    assert.equal(ns?.mode, cri.NamespaceMode.NODE);
    assert.equal(h.users.allocated(testPod().metadata?.uid ?? ''), undefined);
  });

  test('kubelet_started_user_namespaced_pods_total and _errors_total, as upstream counts them', async () => {
    const ok = await harness({ handlers: { '': true } });
    await ok.sync(ok.first, usernsPod());
    await ok.sync(ok.first, usernsPod());
    assert.deepEqual(
      await ok.counts(),
      [1, 0],
      'one sandbox, no error; a steady sync counts nothing',
    );
    const refused = await harness({ handlers: { '': false } });
    await refused.sync(refused.first, usernsPod());
    assert.deepEqual(await refused.counts(), [1, 1], 'the sandbox was refused');
    const failing = await harness({ handlers: { '': true } });
    failing.fake.failNext('RuntimeService/StartContainer', new Error('exec: "bogus": not found'));
    await failing.sync(failing.first, usernsPod());
    assert.deepEqual(await failing.counts(), [1, 1], 'its container did not start');
    const plain = await harness({ handlers: { '': true } });
    await plain.sync(plain.first, testPod());
    assert.deepEqual(await plain.counts(), [0, 0], 'not a user namespaced pod');
  });
});
