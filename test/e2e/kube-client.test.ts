/**
 * The real Kubernetes API client against a real kube-apiserver (one test cluster for
 * the file): the shared KubeClient contract, connection
 * reuse over TLS, client-certificate rotation (setCredentials and reload), idle
 * watches outliving the request timeout, the reflector, and the event recorder.
 * (A real 410 Gone cannot be provoked here: a fresh apiserver's watch cache replays
 * from any resourceVersion, even after an etcd compaction; the unit tests cover it.)
 */
import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import type { ConfigMap, Event } from 'kubernetes-types/core/v1.js';
import { ApiEventRecorder } from '../../src/events/recorder.ts';
import { kubeClientContract } from '../../src/kube/contract.ts';
import { HttpKubeClient } from '../../src/kube/http-client.ts';
import { loadKubeconfig } from '../../src/kube/kubeconfig.ts';
import { Reflector } from '../../src/kube/reflector.ts';
import {
  CONFIGMAPS,
  EVENTS,
  inNamespace,
  NAMESPACES,
  type KubeClient,
  type ResourcePath,
  type WatchEvent,
} from '../../src/kube/types.ts';
import { systemClock } from '../../src/util/clock.ts';
import { MemoryLogger } from '../../src/util/logger.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';

let cluster: Cluster;

before(async () => {
  cluster = await startCluster();
});

after(async () => {
  await cluster.stop();
  assert.deepEqual(await cluster.leaks(), []);
});

kubeClientContract('HttpKubeClient', async () => ({
  client: await HttpKubeClient.fromKubeconfig(cluster.adminKubeconfig),
}));

const SELF_SUBJECT_REVIEWS: ResourcePath = {
  group: 'authentication.k8s.io',
  version: 'v1',
  resource: 'selfsubjectreviews',
};

async function whoAmI(client: KubeClient): Promise<string> {
  interface SelfSubjectReview {
    apiVersion: string;
    kind: string;
    status?: { userInfo?: { username?: string } };
  }
  const review = await client.create<SelfSubjectReview>(SELF_SUBJECT_REVIEWS, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'SelfSubjectReview',
  });
  return review.status?.userInfo?.username ?? '';
}

/** The next event of a watch; fails when the watch ends. */
async function next<T>(pending: Promise<IteratorResult<WatchEvent<T>>>): Promise<WatchEvent<T>> {
  const r = await pending;
  assert.notEqual(r.done, true, 'the watch ended');
  return r.value as WatchEvent<T>;
}

async function until<T>(what: string, fn: () => Promise<T | undefined> | T | undefined) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('HttpKubeClient against kube-apiserver', () => {
  let client: HttpKubeClient;
  const ns = `berth-e2e-${process.pid}`;
  const cms = inNamespace(CONFIGMAPS, ns);

  before(async () => {
    client = await HttpKubeClient.fromKubeconfig(cluster.adminKubeconfig);
    await client.create(NAMESPACES, { metadata: { name: ns } });
  });

  after(async () => {
    await client.close();
  });

  test('50 requests over TLS open at most two connections', async () => {
    let connected = 0;
    const onConnect = (): void => {
      connected++;
    };
    const fresh = await HttpKubeClient.fromKubeconfig(cluster.adminKubeconfig);
    subscribe('net.client.socket', onConnect);
    try {
      for (let i = 0; i < 50; i++) await fresh.list(cms);
    } finally {
      unsubscribe('net.client.socket', onConnect);
      await fresh.close();
    }
    assert.ok(connected >= 1 && connected <= 2, `${connected} connections`);
  });

  test('a rotated client certificate takes effect while an open watch keeps working', async () => {
    const rotating = await HttpKubeClient.fromKubeconfig(cluster.adminKubeconfig);
    assert.equal(await whoAmI(rotating), 'berth-admin');
    const from = (await rotating.list(cms)).metadata.resourceVersion;
    const iterator = rotating
      .watch<ConfigMap>(cms, { resourceVersion: from, fieldSelector: 'metadata.name=rotation' })
      [Symbol.asyncIterator]();
    const first = iterator.next();
    await sleep(200);
    const admin = await loadKubeconfig(cluster.adminKubeconfig);
    const [cert, key] = await Promise.all([
      readFile(cluster.pki.scheduler.cert, 'utf8'),
      readFile(cluster.pki.scheduler.key, 'utf8'),
    ]);
    assert.equal(rotating.setCredentials({ ...admin, cert, key }), true);
    assert.equal(await whoAmI(rotating), 'system:kube-scheduler');
    await client.create(cms, { metadata: { name: 'rotation' } });
    assert.equal((await next(first)).type, 'ADDED');
    await iterator.return?.();
    await rotating.close();
  });

  test('reload() reads the kubeconfig again and switches identity', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-reload-'));
    try {
      const path = join(dir, 'kubeconfig');
      const original = await readFile(cluster.adminKubeconfig, 'utf8');
      await writeFile(path, original);
      const reloading = await HttpKubeClient.fromKubeconfig(path);
      assert.equal(await whoAmI(reloading), 'berth-admin');
      assert.equal(await reloading.reload(), false);
      await writeFile(
        path,
        original
          .replace(cluster.pki.admin.cert, cluster.pki.scheduler.cert)
          .replace(cluster.pki.admin.key, cluster.pki.scheduler.key),
      );
      assert.equal(await reloading.reload(), true);
      assert.equal(await whoAmI(reloading), 'system:kube-scheduler');
      await reloading.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('an idle watch outlives the request timeout', async () => {
    const quick = await HttpKubeClient.fromKubeconfig(cluster.adminKubeconfig, {
      requestTimeoutMs: 1000,
    });
    const from = (await quick.list(cms)).metadata.resourceVersion;
    const iterator = quick
      .watch<ConfigMap>(cms, { resourceVersion: from, fieldSelector: 'metadata.name=idle' })
      [Symbol.asyncIterator]();
    const first = iterator.next();
    await sleep(2500);
    await client.create(cms, { metadata: { name: 'idle' } });
    assert.equal((await next(first)).type, 'ADDED');
    await iterator.return?.();
    await quick.close();
  });

  test('a reflector lists, watches and reports health', async () => {
    const rns = `${ns}-reflector`;
    await client.create(NAMESPACES, { metadata: { name: rns } });
    const path = inNamespace(CONFIGMAPS, rns);
    const labels = { reflector: 'e2e' };
    for (const n of ['a', 'b', 'c']) await client.create(path, { metadata: { name: n, labels } });
    const state = new Map<string, ConfigMap>();
    const reflector = new Reflector<ConfigMap>({
      client,
      path,
      labelSelector: 'reflector=e2e',
      clock: systemClock,
      logger: new MemoryLogger(),
      pageSize: 2,
      handler: {
        onSync: (items) => {
          state.clear();
          for (const i of items) state.set(i.metadata?.name ?? '', i);
        },
        onEvent: (type, obj) => {
          if (type === 'DELETED') state.delete(obj.metadata?.name ?? '');
          else state.set(obj.metadata?.name ?? '', obj);
        },
      },
    });
    const controller = new AbortController();
    const running = reflector.run(controller.signal);
    try {
      await reflector.whenSynced(AbortSignal.timeout(20_000));
      assert.deepEqual([...state.keys()].sort(), ['a', 'b', 'c']);
      await client.create(path, { metadata: { name: 'd', labels } });
      await client.delete(path, 'a');
      await until('events', () => (state.has('d') && !state.has('a') ? true : undefined));
      const health = reflector.health();
      assert.equal(health.synced, true);
      assert.equal(health.consecutiveErrors, 0);
      assert.ok(health.lastEventAt !== undefined);
    } finally {
      controller.abort();
      await running;
    }
  });

  test('the event recorder creates kubelet-shaped Events and aggregates repeats', async () => {
    const recorder = new ApiEventRecorder({
      client,
      nodeName: 'berth-node',
      clock: systemClock,
      logger: new MemoryLogger(),
    });
    const target = { kind: 'Pod', namespace: ns, name: 'web-0', uid: 'uid-web-0' } as const;
    recorder.event(target, 'Warning', 'BackOff', 'Back-off restarting failed container main');
    recorder.event(target, 'Warning', 'BackOff', 'Back-off restarting failed container main');
    recorder.event(target, 'Normal', 'Pulled', 'Container image "busybox" already present');
    recorder.event(
      { kind: 'Node', name: 'berth-node', uid: 'berth-node' },
      'Normal',
      'Starting',
      'Starting kubelet.',
    );
    await recorder.close();
    assert.deepEqual(recorder.stats(), {
      created: 3,
      patched: 1,
      droppedRateLimited: 0,
      droppedQueueFull: 0,
      droppedClosed: 0,
      failed: 0,
      queued: 0,
    });
    const events = await client.list<Event>(inNamespace(EVENTS, ns), {
      fieldSelector: 'involvedObject.name=web-0',
    });
    const backOff = events.items.find((e) => e.reason === 'BackOff');
    assert.equal(backOff?.count, 2);
    assert.equal(backOff.type, 'Warning');
    assert.deepEqual(backOff.source, { component: 'kubelet', host: 'berth-node' });
    assert.equal(backOff.reportingComponent, 'kubelet');
    assert.equal(backOff.reportingInstance, 'berth-node');
    assert.equal(backOff.involvedObject.uid, 'uid-web-0');
    assert.equal(events.items.length, 2);
    const nodeEvents = await client.list<Event>(inNamespace(EVENTS, 'default'), {
      fieldSelector: 'involvedObject.kind=Node,reason=Starting',
    });
    assert.equal(nodeEvents.items.length, 1);
  });
});
