/** The PodSource contract against ApiPodSource (fake API client) and the fake. */
import type { Pod } from 'kubernetes-types/core/v1.js';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { inNamespace, PODS } from '../kube/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { ApiPodSource } from './api-source.ts';
import { podSourceContract, POD_SOURCE_NODE } from './contract.ts';
import { FakePodSource } from './fake.ts';
import type { PodSourceConsumer } from './types.ts';

const START = Date.UTC(2026, 0, 1);
const NS = inNamespace(PODS, 'default');

async function turns(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise<void>((r) => setImmediate(r));
}

function recording(log: string[]): PodSourceConsumer {
  const name = (p: Pod): string => p.metadata?.name ?? '';
  return {
    add: (p) => log.push(`add ${name(p)}`),
    update: (p) => log.push(`update ${name(p)}`),
    remove: (p) => log.push(`remove ${name(p)}`),
  };
}

podSourceContract('ApiPodSource (fake API client)', () => {
  const clock = new FakeClock(START);
  const client = new FakeKubeClient({ clock });
  const log: string[] = [];
  const source = new ApiPodSource({
    client,
    clock,
    logger: new MemoryLogger(),
    nodeName: POD_SOURCE_NODE,
    consumer: recording(log),
  });
  return {
    source,
    clock,
    log,
    create: async (pod) => {
      await client.create(NS, pod);
      await turns();
    },
    relabel: async (name, labels) => {
      const pod = await client.get<Pod>(NS, name);
      await client.update(NS, name, { ...pod, metadata: { ...pod.metadata, labels } });
      await turns();
    },
    remove: async (name) => {
      await client.delete(NS, name, { gracePeriodSeconds: 0 });
      await turns();
    },
    removeWhileDisconnected: async (name) => {
      client.failWatches(new Error('connection reset by peer'));
      await turns();
      await client.delete(NS, name, { gracePeriodSeconds: 0 });
      // The deletion is compacted away: resuming the watch gets 410 and re-lists.
      client.expireWatches();
      for (let i = 0; i < 10; i++) {
        await clock.advance(60_000);
        await turns();
      }
    },
    failLists: (n) => {
      client.failNext({ verb: 'list', error: new Error('apiserver down'), times: n });
    },
    settle: turns,
  };
});

podSourceContract('FakePodSource', () => {
  const clock = new FakeClock(START);
  const log: string[] = [];
  const source = new FakePodSource({ clock, consumer: recording(log) });
  // The "API": what a list returns; resourceVersion bumped on every write, as the API does.
  const api = new Map<string, Pod>();
  let rv = 0;
  const write = (pod: Pod): Pod => {
    const stored = { ...pod, metadata: { ...pod.metadata, resourceVersion: String(++rv) } };
    api.set(pod.metadata?.name ?? '', stored);
    source.initial = [...api.values()];
    return stored;
  };
  return {
    source,
    clock,
    log,
    create: (pod) => {
      const stored = write(pod);
      if (source.synced) source.event('ADDED', stored);
      return Promise.resolve();
    },
    relabel: (name, labels) => {
      const pod = api.get(name);
      if (pod !== undefined)
        source.event('MODIFIED', write({ ...pod, metadata: { ...pod.metadata, labels } }));
      return Promise.resolve();
    },
    remove: (name) => {
      const pod = api.get(name);
      api.delete(name);
      source.initial = [...api.values()];
      if (pod !== undefined) source.event('DELETED', pod);
      return Promise.resolve();
    },
    removeWhileDisconnected: (name) => {
      api.delete(name);
      source.list([...api.values()]);
      return Promise.resolve();
    },
    failLists: (n) => {
      source.failLists(n);
    },
    settle: turns,
  };
});
