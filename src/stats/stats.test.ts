import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { cri } from '../cri/index.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { CpuRateCache } from './cpu-rate.ts';
import { CriStatsProvider } from './cri-provider.ts';
import {
  parseMeminfo,
  parseNetDev,
  parseProcStatCpu,
  ProcHostStats,
  type HostStats,
} from './host.ts';
import { renderResourceMetrics } from './resource-metrics.ts';
import type { PodVolumeStats, VolumeStats, VolumeStatsSource } from './types.ts';

const START = Date.UTC(2026, 0, 1);
const IMAGE = 'registry.test/app:1';

/** A host whose CPU counter the test moves. */
function fakeHost(): HostStats & { cpuNs: number } {
  const host = {
    cpuNs: 1e9,
    bootTimeMs: () => Promise.resolve(START - 3_600_000),
    cpu: () => Promise.resolve({ usageCoreNanoSeconds: host.cpuNs }),
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
  return host;
}

async function runPod(
  fake: FakeCriClient,
  name: string,
): Promise<{ sandbox: string; app: string }> {
  fake.addImage(IMAGE, { preloaded: true });
  const config = cri.PodSandboxConfig.fromPartial({
    metadata: { name, uid: `uid-${name}`, namespace: 'ns' },
  });
  const { podSandboxId } = await fake.runtime.runPodSandbox({ config });
  const { containerId } = await fake.runtime.createContainer({
    podSandboxId,
    sandboxConfig: config,
    config: {
      metadata: { name: 'app', attempt: 0 },
      image: { image: IMAGE },
      labels: { 'io.kubernetes.container.name': 'app' },
    },
  });
  await fake.runtime.startContainer({ containerId });
  return { sandbox: podSandboxId, app: containerId };
}

async function setup(
  flavor: 'containerd2' | 'containerd1' = 'containerd2',
  volumes?: VolumeStatsSource,
) {
  const clock = new FakeClock(START);
  const fake = new FakeCriClient({ clock, flavor });
  const host = fakeHost();
  const logs = await mkdtemp(join(tmpdir(), 'berth-stats-'));
  const provider = new CriStatsProvider({
    cri: fake,
    host,
    clock,
    logger: new MemoryLogger(),
    nodeName: 'node-a',
    rootDir: logs,
    podLogsDir: logs,
    ...(volumes !== undefined && { volumes }),
  });
  return { clock, fake, host, logs, provider };
}

describe('CRI stats provider', () => {
  test('the summary has node, pods and containers with rates from two samples', async () => {
    const { clock, fake, host, logs, provider } = await setup();
    try {
      const { app } = await runPod(fake, 'web');
      await mkdir(join(logs, 'ns_web_uid-web', 'app'), { recursive: true });
      await writeFile(join(logs, 'ns_web_uid-web', 'app', '0.log'), 'x'.repeat(123));
      fake.setUsage(app, {
        cpuUsageCoreNanoSeconds: 1_000_000_000n,
        memoryWorkingSetBytes: 4096n,
        writableLayerBytes: 77n,
      });
      const first = await provider.summary();
      assert.equal(first.node.nodeName, 'node-a');
      assert.equal(first.node.startTime, new Date(START - 3_600_000).toISOString());
      // One sample: no rate yet, but the cumulative counters are there.
      assert.equal(first.node.cpu?.usageNanoCores, undefined);
      assert.equal(first.pods[0]?.containers[0]?.cpu?.usageCoreNanoSeconds, 1e9);

      await clock.advance(10_000);
      host.cpuNs += 5e9; // half a core for 10 s
      fake.setUsage(app, { cpuUsageCoreNanoSeconds: 3_000_000_000n }); // 0.2 core
      const s = await provider.summary();
      assert.equal(s.node.cpu?.usageNanoCores, 500_000_000);
      assert.equal(s.node.memory?.workingSetBytes, 2e9);
      assert.equal(s.node.fs?.capacityBytes, 100e9);
      assert.equal(s.node.network?.name, 'eth0');
      assert.equal(s.node.rlimit?.curproc, 321);
      assert.ok((s.node.runtime?.imageFs?.usedBytes ?? 0) > 0, 'image fs used from ImageFsInfo');
      assert.equal(s.pods.length, 1);
      const pod = s.pods[0];
      assert.deepEqual(pod?.podRef, { name: 'web', namespace: 'ns', uid: 'uid-web' });
      const c = pod?.containers[0];
      assert.equal(c?.name, 'app');
      assert.ok(Math.abs((c?.cpu?.usageNanoCores ?? 0) - 200_000_000) < 1000);
      assert.equal(c?.memory?.workingSetBytes, 4096);
      assert.equal(c?.rootfs?.usedBytes, 77);
      assert.equal(c?.logs?.usedBytes, 123);
      assert.ok(Math.abs((pod?.cpu?.usageNanoCores ?? 0) - 200_000_000) < 1000, 'pod rate');
      assert.equal(pod?.memory?.workingSetBytes, 4096);
      assert.equal(pod?.network?.name, 'eth0');
      assert.equal(pod?.['ephemeral-storage']?.usedBytes, 77 + 123);
    } finally {
      await rm(logs, { recursive: true, force: true });
    }
  });

  test('without ListPodSandboxStats pod usage is summed from ListContainerStats', async () => {
    const { fake, logs, provider } = await setup('containerd1');
    try {
      const { app } = await runPod(fake, 'old');
      fake.setUsage(app, { cpuUsageCoreNanoSeconds: 2_000_000_000n, memoryWorkingSetBytes: 100n });
      fake.failNext('RuntimeService/ListPodSandboxStats', {
        grpcCode: GrpcStatus.UNIMPLEMENTED,
        details: 'unknown method ListPodSandboxStats',
      });
      const s = await provider.summary();
      assert.equal(s.pods[0]?.memory?.workingSetBytes, 100);
      assert.equal(s.pods[0]?.cpu?.usageCoreNanoSeconds, 2e9);
      assert.equal(s.pods[0]?.containers[0]?.memory?.workingSetBytes, 100);
      // Remembered: the runtime is not asked again.
      await provider.summary();
      assert.equal(fake.callsTo('RuntimeService/ListPodSandboxStats').length, 1);
    } finally {
      await rm(logs, { recursive: true, force: true });
    }
  });

  test('only_cpu_and_memory leaves out filesystems, network and ImageFsInfo', async () => {
    const { fake, logs, provider } = await setup();
    try {
      await runPod(fake, 'web');
      fake.clearCalls();
      const s = await provider.summary({ onlyCpuAndMemory: true });
      assert.equal(s.node.fs, undefined);
      assert.equal(s.node.runtime, undefined);
      assert.equal(s.pods[0]?.network, undefined);
      assert.equal(s.pods[0]?.containers[0]?.logs, undefined);
      assert.ok(s.pods[0]?.memory !== undefined);
      assert.equal(fake.callsTo('ImageService/ImageFsInfo').length, 0);
    } finally {
      await rm(logs, { recursive: true, force: true });
    }
  });

  test('volumes come from the source; only local ephemeral ones count as ephemeral-storage', async () => {
    const vol = (name: string, usedBytes: number): VolumeStats => ({
      name,
      time: new Date(START).toISOString(),
      usedBytes,
      capacityBytes: 1000,
    });
    const measured = new Map<string, PodVolumeStats>([
      [
        'uid-web',
        {
          ephemeral: [vol('scratch', 40)],
          persistent: [{ ...vol('data', 500), pvcRef: { name: 'claim', namespace: 'ns' } }],
        },
      ],
    ]);
    const { fake, logs, provider } = await setup('containerd2', (uid) => measured.get(uid));
    try {
      const { app } = await runPod(fake, 'web');
      await runPod(fake, 'bare');
      fake.setUsage(app, { writableLayerBytes: 7n });
      const s = await provider.summary();
      const web = s.pods.find((p) => p.podRef.name === 'web');
      assert.deepEqual(
        web?.volume?.map((v) => v.name),
        ['scratch', 'data'],
      );
      assert.deepEqual(web.volume[1]?.pvcRef, { name: 'claim', namespace: 'ns' });
      assert.equal(web['ephemeral-storage']?.usedBytes, 7 + 40);
      // No measured volume: no `volume` key at all (Go's omitempty).
      const bare = s.pods.find((p) => p.podRef.name === 'bare');
      assert.ok(bare !== undefined && !('volume' in bare));
      const cpuOnly = await provider.summary({ onlyCpuAndMemory: true });
      assert.ok(cpuOnly.pods.every((p) => p.volume === undefined));
    } finally {
      await rm(logs, { recursive: true, force: true });
    }
  });

  test('other runtime errors fail the summary', async () => {
    const { fake, logs, provider } = await setup();
    try {
      fake.failNext('RuntimeService/ListPodSandboxStats', {
        grpcCode: GrpcStatus.UNAVAILABLE,
        details: 'connection refused',
      });
      await assert.rejects(provider.summary(), /connection refused/);
    } finally {
      await rm(logs, { recursive: true, force: true });
    }
  });
});

describe('CPU rate cache', () => {
  test('rates from consecutive samples; same sample repeats; counter reset restarts', async () => {
    const clock = new FakeClock(0);
    const cache = new CpuRateCache(clock, 60_000);
    assert.equal(cache.rate('c', 1e9, 0), undefined);
    assert.equal(cache.rate('c', 3e9, 1e9), 5e8);
    assert.equal(cache.rate('c', 3e9, 1e9), 5e8);
    assert.equal(cache.rate('c', 4e9, 0), undefined);
    await clock.advance(60_001);
    cache.prune();
    assert.equal(cache.size, 0);
  });
});

describe('host stats', () => {
  test('procfs parsing', async () => {
    assert.equal(parseProcStatCpu('cpu  100 10 50 1000 20 5 5 10 0 0\ncpu0 1 2 3\n'), 180 * 1e7);
    assert.equal(parseMeminfo('MemTotal:  1000 kB\nHugePages_Total: 0\n').get('MemTotal'), 1024000);
    const dev =
      'Inter-|   Receive\n face |bytes packets errs\n  eth0: 10 1 2 0 0 0 0 0 20 2 3 0 0 0 0 0\n';
    assert.deepEqual(parseNetDev(dev), [
      { name: 'eth0', rxBytes: 10, rxErrors: 2, txBytes: 20, txErrors: 3 },
    ]);
    const root = await mkdtemp(join(tmpdir(), 'berth-proc-'));
    try {
      await mkdir(join(root, 'proc/net'), { recursive: true });
      await mkdir(join(root, 'proc/sys/kernel'), { recursive: true });
      await mkdir(join(root, 'sys/devices/virtual/net/cni0'), { recursive: true });
      await writeFile(join(root, 'proc/stat'), 'cpu  1 0 1 0 0 0 0 0\nbtime 1700000000\n');
      await writeFile(
        join(root, 'proc/meminfo'),
        'MemTotal: 1000 kB\nMemFree: 200 kB\nInactive(file): 300 kB\nAnonPages: 100 kB\n',
      );
      await writeFile(join(root, 'proc/vmstat'), 'pgfault 7\npgmajfault 2\n');
      await writeFile(
        join(root, 'proc/net/dev'),
        `h\nh\n  lo: 1 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0\n cni0: 1 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0\n${dev.split('\n')[2] ?? ''}\n`,
      );
      await writeFile(join(root, 'proc/sys/kernel/pid_max'), '32768\n');
      await writeFile(join(root, 'proc/loadavg'), '0.1 0.2 0.3 2/345 999\n');
      const host = new ProcHostStats({ procRoot: join(root, 'proc'), sysRoot: join(root, 'sys') });
      assert.equal(await host.bootTimeMs(), 1_700_000_000_000);
      const mem = await host.memory();
      assert.equal(mem.workingSetBytes, 500 * 1024);
      assert.equal(mem.availableBytes, 500 * 1024);
      assert.equal(mem.majorPageFaults, 2);
      assert.deepEqual(
        (await host.network()).map((i) => i.name),
        ['eth0'],
      );
      assert.deepEqual(await host.rlimit(), { maxpid: 32768, curproc: 345 });
      assert.ok((await host.fs(root)).capacityBytes > 0);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe('/metrics/resource', () => {
  test('samples carry their own timestamps; errors set scrape_error', () => {
    const time = '2026-01-01T00:00:10.000Z';
    const text = renderResourceMetrics({
      node: {
        nodeName: 'n',
        startTime: time,
        cpu: { time, usageCoreNanoSeconds: 2.5e9 },
        memory: { time, workingSetBytes: 1024 },
      },
      pods: [
        {
          podRef: { name: 'p', namespace: 'ns', uid: 'u' },
          startTime: time,
          containers: [
            {
              name: 'c',
              startTime: '2026-01-01T00:00:00.000Z',
              cpu: { time, usageCoreNanoSeconds: 1e9 },
              memory: { time, workingSetBytes: 10 },
            },
          ],
          cpu: { time, usageCoreNanoSeconds: 1e9 },
          memory: { time, workingSetBytes: 10 },
        },
      ],
    });
    const ms = Date.parse(time);
    assert.match(text, new RegExp(`^node_cpu_usage_seconds_total 2\\.5 ${ms}$`, 'm'));
    assert.match(text, /^# TYPE node_cpu_usage_seconds_total counter$/m);
    assert.match(text, new RegExp(`^node_memory_working_set_bytes 1024 ${ms}$`, 'm'));
    assert.match(
      text,
      new RegExp(
        `^container_cpu_usage_seconds_total\\{container="c",namespace="ns",pod="p"\\} 1 ${ms}$`,
        'm',
      ),
    );
    assert.match(
      text,
      /^container_start_time_seconds\{container="c",namespace="ns",pod="p"\} 1767225600 /m,
    );
    assert.match(
      text,
      new RegExp(`^pod_memory_working_set_bytes\\{namespace="ns",pod="p"\\} 10 ${ms}$`, 'm'),
    );
    assert.match(text, /^resource_scrape_error 0$/m);
    const failed = renderResourceMetrics(undefined);
    assert.match(failed, /^scrape_error 1$/m);
    assert.doesNotMatch(failed, /node_cpu/);
  });
});
