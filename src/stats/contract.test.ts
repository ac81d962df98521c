/** The StatsProvider contract against the CRI stats provider and the fake. */
import { status as GrpcStatus } from '@grpc/grpc-js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cri } from '../cri/index.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { statsProviderContract, type ContractPod } from './contract.ts';
import { CriStatsProvider } from './cri-provider.ts';
import { FakeStatsProvider } from './fake.ts';
import type { HostStats } from './host.ts';

const START = Date.UTC(2026, 0, 1);
const IMAGE = 'registry.test/app:1';

/** A host that always reads the same. */
const host: HostStats = {
  bootTimeMs: () => Promise.resolve(START - 3_600_000),
  cpu: () => Promise.resolve({ usageCoreNanoSeconds: 1e9 }),
  memory: () =>
    Promise.resolve({
      totalBytes: 8e9,
      usageBytes: 3e9,
      workingSetBytes: 2e9,
      availableBytes: 6e9,
      rssBytes: 1e9,
      pageFaults: 10,
      majorPageFaults: 1,
    }),
  network: () =>
    Promise.resolve([{ name: 'eth0', rxBytes: 5, rxErrors: 0, txBytes: 7, txErrors: 0 }]),
  fs: () =>
    Promise.resolve({
      capacityBytes: 100e9,
      availableBytes: 60e9,
      usedBytes: 40e9,
      inodes: 1000,
      inodesFree: 900,
      inodesUsed: 100,
    }),
  rlimit: () => Promise.resolve({ maxpid: 4194304, curproc: 321 }),
};

async function runPod(fake: FakeCriClient, pod: ContractPod): Promise<void> {
  const config = cri.PodSandboxConfig.fromPartial({
    metadata: { name: pod.name, uid: pod.uid, namespace: pod.namespace },
  });
  const { podSandboxId } = await fake.runtime.runPodSandbox({ config });
  for (const name of pod.containers) {
    const { containerId } = await fake.runtime.createContainer({
      podSandboxId,
      sandboxConfig: config,
      config: {
        metadata: { name, attempt: 0 },
        image: { image: IMAGE },
        labels: { 'io.kubernetes.container.name': name },
      },
    });
    await fake.runtime.startContainer({ containerId });
  }
}

statsProviderContract('CriStatsProvider (fake CRI, fixed host)', async (nodeName, pods) => {
  const clock = new FakeClock(START);
  const fake = new FakeCriClient({ clock });
  fake.addImage(IMAGE, { preloaded: true });
  for (const p of pods) await runPod(fake, p);
  const dir = await mkdtemp(join(tmpdir(), 'berth-stats-contract-'));
  const provider = new CriStatsProvider({
    cri: fake,
    host,
    clock,
    logger: new MemoryLogger(),
    nodeName,
    rootDir: dir,
    podLogsDir: dir,
  });
  return {
    provider,
    failNextRead: (message) => {
      fake.failNext('RuntimeService/ListPodSandboxStats', {
        grpcCode: GrpcStatus.UNAVAILABLE,
        details: message,
      });
    },
    dispose: () => rm(dir, { recursive: true, force: true }),
  };
});

statsProviderContract('FakeStatsProvider', (nodeName, pods) => {
  const startTime = new Date(START).toISOString();
  const provider = new FakeStatsProvider({
    node: { nodeName, startTime },
    pods: pods.map((p) => ({
      podRef: { namespace: p.namespace, name: p.name, uid: p.uid },
      startTime,
      containers: p.containers.map((name) => ({ name, startTime })),
    })),
  });
  return Promise.resolve({
    provider,
    failNextRead: (message) => {
      provider.failNext(new Error(message));
    },
    dispose: () => Promise.resolve(),
  });
});
