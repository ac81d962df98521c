/**
 * The whole kubelet started without a reachable API server (the fake runtime; the fake
 * API server behind a switch): static pods run at once; once the API answers, the
 * Node registers and the mirror pod gets the running pod's status. Standalone: static
 * pods run and not one API request is made.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import type { Node, Pod } from 'kubernetes-types/core/v1.js';
import { FakeCgroupManager } from '../cm/fake.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { NoApiClient } from '../kube/no-api-client.ts';
import {
  inNamespace,
  KubeApiError,
  NODES,
  PODS,
  type KubeClient,
  type WatchEvent,
} from '../kube/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FakeMounter } from '../volumes/mounter.ts';
import { Kubelet, type KubeletOptions } from './kubelet.ts';
import { host, testKubeletOptions, untilOnClock } from './testing.ts';

const options = await testKubeletOptions();
const manifests = await mkdtemp(join(tmpdir(), 'berth-startup-manifests-'));
after(() =>
  Promise.all([
    rm(options.rootDir, { recursive: true, force: true }),
    rm(manifests, { recursive: true, force: true }),
  ]),
);
await writeFile(
  join(manifests, 'web.yaml'),
  [
    'apiVersion: v1',
    'kind: Pod',
    'metadata: {name: web}',
    'spec:',
    '  containers:',
    '  - {name: main, image: berth.local/busybox:1, imagePullPolicy: IfNotPresent, command: [sleep, "3600"]}',
    '',
  ].join('\n'),
);

/** The fake API server, unreachable while `down` (every request fails as a refused connection). */
class SwitchedClient implements KubeClient {
  down = true;
  readonly #kube: FakeKubeClient;
  constructor(kube: FakeKubeClient) {
    this.#kube = kube;
  }
  #call<T>(f: () => Promise<T>): Promise<T> {
    return this.down ? Promise.reject(new KubeApiError(0, 'Unknown', 'connection refused')) : f();
  }
  get<T>(...a: Parameters<KubeClient['get']>): Promise<T> {
    return this.#call(() => this.#kube.get<T>(...a));
  }
  list<T>(...a: Parameters<KubeClient['list']>) {
    return this.#call(() => this.#kube.list<T>(...a));
  }
  create<T>(
    path: Parameters<KubeClient['create']>[0],
    body: T,
    o?: Parameters<KubeClient['create']>[2],
  ) {
    return this.#call(() => this.#kube.create<T>(path, body, o));
  }
  update<T>(
    path: Parameters<KubeClient['update']>[0],
    name: string,
    body: T,
    o?: Parameters<KubeClient['update']>[3],
  ) {
    return this.#call(() => this.#kube.update<T>(path, name, body, o));
  }
  patch<T>(...a: Parameters<KubeClient['patch']>): Promise<T> {
    return this.#call(() => this.#kube.patch<T>(...a));
  }
  delete(...a: Parameters<KubeClient['delete']>): Promise<void> {
    return this.#call(() => this.#kube.delete(...a));
  }
  watch<T>(...a: Parameters<KubeClient['watch']>): AsyncIterable<WatchEvent<T>> {
    if (!this.down) return this.#kube.watch<T>(...a);
    return {
      [Symbol.asyncIterator]: () => ({
        next: () => Promise.reject(new KubeApiError(0, 'Unknown', 'connection refused')),
      }),
    };
  }
  close(): Promise<void> {
    return this.#kube.close();
  }
}

/** Counts every request a standalone kubelet makes (there must be none). */
class CountingNoApiClient extends NoApiClient {
  calls = 0;
  override get<T>(): Promise<T> {
    this.calls++;
    return super.get<T>();
  }
  override list<T>() {
    this.calls++;
    return super.list<T>();
  }
  override create<T>(): Promise<T> {
    this.calls++;
    return super.create<T>();
  }
  override patch<T>(): Promise<T> {
    this.calls++;
    return super.patch<T>();
  }
  override watch<T>() {
    this.calls++;
    return super.watch<T>();
  }
}

function kubeletWith(kube: KubeClient, clock: FakeClock, extra: Partial<KubeletOptions> = {}) {
  const cri = new FakeCriClient({ flavor: 'containerd2', clock });
  cri.addImage('berth.local/busybox:1', { preloaded: true });
  const logger = new MemoryLogger();
  const kubelet = new Kubelet(
    {
      ...options,
      staticPods: { staticPodPath: manifests, fileCheckFrequencyMs: 60_000 },
      ...extra,
    },
    {
      kube,
      cri,
      recorder: new MemoryEventRecorder(),
      clock,
      logger,
      host,
      mounter: new FakeMounter(),
      cgroups: new FakeCgroupManager(),
    },
  );
  return { kubelet, cri, logger };
}

async function runningContainer(
  cri: FakeCriClient,
  clock: FakeClock,
  pod: string,
): Promise<string> {
  return untilOnClock(clock, `the container of ${pod} running`, async () => {
    const { containers } = await cri.runtime.listContainers({});
    const c = containers.find(
      (x) => x.labels['io.kubernetes.pod.name'] === pod && x.state === 1, // CONTAINER_RUNNING
    );
    return c?.id;
  });
}

describe('Kubelet start-up without an API server', () => {
  test('static pods run while the API is unreachable; the node and the mirror follow', async () => {
    const clock = new FakeClock();
    const fake = new FakeKubeClient({ clock });
    const kube = new SwitchedClient(fake);
    const { kubelet, cri, logger } = kubeletWith(kube, clock);
    await kubelet.start();
    try {
      const id = await runningContainer(cri, clock, 'web-node-a');
      assert.ok(logger.records.some((r) => r.msg === 'Unable to register node, will retry'));
      kube.down = false;
      const node = await untilOnClock(clock, 'the node registered', () =>
        fake.get<Node>(NODES, 'node-a').catch(() => undefined),
      );
      const mirror = await untilOnClock(
        clock,
        'the mirror pod with the running status',
        async () => {
          const p = await fake
            .get<Pod>(inNamespace(PODS, 'default'), 'web-node-a')
            .catch(() => undefined);
          return p?.status?.containerStatuses?.[0]?.state?.running !== undefined ? p : undefined;
        },
      );
      assert.equal(mirror.metadata?.ownerReferences?.[0]?.uid, node.metadata?.uid);
      assert.equal(mirror.status?.containerStatuses?.[0]?.containerID, `containerd://${id}`);
    } finally {
      await kubelet.stop();
      cri.close();
      await kube.close();
    }
  });

  test('standalone: static pods run and no API request is ever made', async () => {
    const kube = new CountingNoApiClient();
    const clock = new FakeClock();
    const { kubelet, cri } = kubeletWith(kube, clock, { standalone: true });
    await kubelet.start();
    try {
      await runningContainer(cri, clock, 'web-node-a');
      // The admission used the Node built from this host.
      assert.equal(kubelet.nodeStatus.node?.status?.allocatable?.['pods'], '110');
      // A minute of fake time: every periodic loop (status, node status, lease, resync) ran.
      for (let i = 0; i < 60; i++) {
        await clock.advance(1000);
        await new Promise<void>((r) => setTimeout(r, 1));
      }
      assert.equal(kube.calls, 0);
    } finally {
      await kubelet.stop();
      cri.close();
    }
    assert.equal(kube.calls, 0);
  });
});
