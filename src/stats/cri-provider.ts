/**
 * StatsProvider over the CRI and the host, as upstream's CRI stats provider: pod and
 * container usage from ListPodSandboxStats (which carries the containers' stats), or,
 * on runtimes without it (containerd 1.6 answers Unimplemented), from ListContainerStats
 * summed per pod; the image filesystem from ImageFsInfo; the node from procfs and statfs.
 * usageNanoCores comes from the runtime when it reports it, else from the previous
 * sample (CpuRateCache).
 */
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { cri, CriUnimplementedError, type CriClient } from '../cri/index.ts';
import {
  CONTAINER_NAME_LABEL,
  POD_NAME_LABEL,
  POD_NAMESPACE_LABEL,
  POD_UID_LABEL,
  podLogsDirectory,
} from '../container/labels.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import { CpuRateCache } from './cpu-rate.ts';
import type { FsUsage, HostStats } from './host.ts';
import type {
  ContainerStats,
  CPUStats,
  FsStats,
  MemoryStats,
  NetworkStats,
  NodeStats,
  PodStats,
  StatsProvider,
  Summary,
  SummaryOptions,
  VolumeStatsSource,
} from './types.ts';

export interface CriStatsProviderOptions {
  readonly cri: CriClient;
  readonly host: HostStats;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly nodeName: string;
  /** The kubelet's root directory (--root-dir): the node filesystem. */
  readonly rootDir: string;
  /** Where container logs live (podLogsDir), for the logs usage of each container. */
  readonly podLogsDir: string;
  readonly volumes?: VolumeStatsSource;
}

/** A CRI timestamp (ns) or, when the runtime left it 0, now; as an RFC 3339 string. */
export function rfc3339(ms: number): string {
  return new Date(ms).toISOString();
}

const nsToMs = (ns: bigint): number => Number(ns / 1_000_000n);
const num = (v: { value: bigint } | undefined): number | undefined =>
  v === undefined ? undefined : Number(v.value);

function fsStats(
  time: string,
  fs: FsUsage | undefined,
  usedBytes?: number,
  inodesUsed?: number,
): FsStats {
  const inodes = inodesUsed ?? fs?.inodesUsed;
  return {
    time,
    ...(fs !== undefined && {
      availableBytes: fs.availableBytes,
      capacityBytes: fs.capacityBytes,
      inodes: fs.inodes,
      inodesFree: fs.inodesFree,
    }),
    usedBytes: usedBytes ?? fs?.usedBytes ?? 0,
    ...(inodes !== undefined && { inodesUsed: inodes }),
  };
}

interface PodUsage {
  cpu?: CPUStats;
  memory?: MemoryStats;
  network?: NetworkStats;
  processCount?: number;
  containers: Map<string, cri.ContainerStats>;
}

export class CriStatsProvider implements StatsProvider {
  readonly #o: CriStatsProviderOptions;
  readonly #rates: CpuRateCache;
  /** Set once the runtime answered Unimplemented: later summaries go straight to the fallback. */
  #noSandboxStats = false;

  constructor(options: CriStatsProviderOptions) {
    this.#o = options;
    this.#rates = new CpuRateCache(options.clock);
  }

  async summary(options: SummaryOptions = {}): Promise<Summary> {
    const client = this.#o.cri;
    const full = options.onlyCpuAndMemory !== true;
    const opts = options.signal === undefined ? {} : { signal: options.signal };
    const nowMs = this.#o.clock.now();
    const [sandboxes, containers, usage, node] = await Promise.all([
      client.runtime.listPodSandbox(
        { filter: { state: { state: cri.PodSandboxState.SANDBOX_READY } } },
        opts,
      ),
      client.runtime.listContainers(
        { filter: { state: { state: cri.ContainerState.CONTAINER_RUNNING } } },
        opts,
      ),
      this.#podUsage(opts),
      this.#node(full, nowMs, opts),
    ]);
    const nodeFs = node.fs;
    const rootfsInfo = node.runtime?.imageFs;
    const pods: PodStats[] = [];
    for (const sb of sandboxes.items) {
      const ref = {
        name: sb.metadata?.name ?? sb.labels[POD_NAME_LABEL] ?? '',
        namespace: sb.metadata?.namespace ?? sb.labels[POD_NAMESPACE_LABEL] ?? '',
        uid: sb.metadata?.uid ?? sb.labels[POD_UID_LABEL] ?? '',
      };
      const pu = usage.get(sb.id);
      const mine = containers.containers.filter((c) => c.podSandboxId === sb.id);
      const stats: ContainerStats[] = [];
      let rootUsed = 0;
      let logsUsed = 0;
      for (const c of mine) {
        const name = c.labels[CONTAINER_NAME_LABEL] ?? c.metadata?.name ?? '';
        const s = pu?.containers.get(c.id);
        const time = rfc3339(nowMs);
        const logs = full ? await this.#logsUsage(ref, name, time, nodeFs) : undefined;
        const rootfs =
          full && s?.writableLayer !== undefined
            ? {
                ...fsStats(
                  time,
                  undefined,
                  num(s.writableLayer.usedBytes) ?? 0,
                  num(s.writableLayer.inodesUsed),
                ),
                ...capacityOf(rootfsInfo),
              }
            : undefined;
        rootUsed += rootfs?.usedBytes ?? 0;
        logsUsed += logs?.usedBytes ?? 0;
        stats.push({
          name,
          startTime: rfc3339(nsToMs(c.createdAt)),
          ...(s !== undefined && this.#cpu(c.id, s.cpu, nowMs)),
          ...(s?.memory !== undefined && { memory: memoryStats(s.memory, nowMs) }),
          ...(rootfs !== undefined && { rootfs }),
          ...(logs !== undefined && { logs }),
        });
      }
      const fallback = pu?.cpu === undefined ? sumContainers(stats, nowMs) : {};
      const cpu = pu?.cpu ?? fallback.cpu;
      const memory = pu?.memory ?? fallback.memory;
      const measured = full ? this.#o.volumes?.(ref.uid) : undefined;
      const volumes = measured === undefined ? [] : [...measured.ephemeral, ...measured.persistent];
      // Upstream's calcEphemeralStorage adds only the local ephemeral volumes.
      const volumesUsed = (measured?.ephemeral ?? []).reduce((t, v) => t + (v.usedBytes ?? 0), 0);
      pods.push({
        podRef: ref,
        startTime: rfc3339(nsToMs(sb.createdAt)),
        containers: stats,
        ...(cpu !== undefined && { cpu }),
        ...(memory !== undefined && { memory }),
        ...(full && pu?.network !== undefined && { network: pu.network }),
        // Go's omitempty: no `volume` key until the pod has a measured volume.
        ...(volumes.length > 0 && { volume: volumes }),
        ...(full && {
          'ephemeral-storage': {
            ...capacityOf(nodeFs),
            time: rfc3339(nowMs),
            usedBytes: rootUsed + logsUsed + volumesUsed,
          },
        }),
        ...(full &&
          pu?.processCount !== undefined && { process_stats: { process_count: pu.processCount } }),
      });
    }
    this.#rates.prune();
    return { node, pods };
  }

  #cpu(key: string, c: cri.CpuUsage | undefined, nowMs: number): { cpu?: CPUStats } {
    if (c === undefined) return {};
    const usage = num(c.usageCoreNanoSeconds);
    const timeNs = c.timestamp > 0n ? Number(c.timestamp) : nowMs * 1e6;
    const reported = num(c.usageNanoCores);
    const nanoCores =
      reported !== undefined && reported > 0
        ? reported
        : usage === undefined
          ? undefined
          : this.#rates.rate(key, timeNs, usage);
    return {
      cpu: {
        time: rfc3339(c.timestamp > 0n ? nsToMs(c.timestamp) : nowMs),
        ...(nanoCores !== undefined && { usageNanoCores: nanoCores }),
        ...(usage !== undefined && { usageCoreNanoSeconds: usage }),
      },
    };
  }

  /** Per sandbox ID: its usage and its containers' stats. */
  async #podUsage(opts: { signal?: AbortSignal }): Promise<Map<string, PodUsage>> {
    const out = new Map<string, PodUsage>();
    const nowMs = this.#o.clock.now();
    if (!this.#noSandboxStats) {
      try {
        const res = await this.#o.cri.runtime.listPodSandboxStats({}, opts);
        for (const s of res.stats) {
          const id = s.attributes?.id ?? '';
          const l = s.linux;
          const network = l?.network === undefined ? undefined : networkStats(l.network, nowMs);
          out.set(id, {
            ...(l?.cpu !== undefined && this.#cpu(`pod:${id}`, l.cpu, nowMs)),
            ...(l?.memory !== undefined && { memory: memoryStats(l.memory, nowMs) }),
            ...(network !== undefined && { network }),
            ...(l?.process?.processCount !== undefined && {
              processCount: Number(l.process.processCount.value),
            }),
            containers: new Map((l?.containers ?? []).map((c) => [c.attributes?.id ?? '', c])),
          });
        }
        return out;
      } catch (err) {
        if (!(err instanceof CriUnimplementedError)) throw err;
        this.#o.logger.info(
          'The runtime has no ListPodSandboxStats; pod stats are summed from ListContainerStats',
        );
        this.#noSandboxStats = true;
      }
    }
    const res = await this.#o.cri.runtime.listContainerStats({}, opts);
    const bySandbox = new Map<string, string>();
    const list = await this.#o.cri.runtime.listContainers({}, opts);
    for (const c of list.containers) bySandbox.set(c.id, c.podSandboxId);
    for (const s of res.stats) {
      const id = s.attributes?.id ?? '';
      const sb = bySandbox.get(id);
      if (sb === undefined) continue;
      let pu = out.get(sb);
      if (pu === undefined) {
        pu = { containers: new Map() };
        out.set(sb, pu);
      }
      pu.containers.set(id, s);
    }
    return out;
  }

  async #node(full: boolean, nowMs: number, opts: { signal?: AbortSignal }): Promise<NodeStats> {
    const { host } = this.#o;
    const time = rfc3339(nowMs);
    const [boot, cpu, mem] = await Promise.all([host.bootTimeMs(), host.cpu(), host.memory()]);
    const nanoCores = this.#rates.rate('node', nowMs * 1e6, cpu.usageCoreNanoSeconds);
    const base: NodeStats = {
      nodeName: this.#o.nodeName,
      startTime: rfc3339(boot),
      cpu: {
        time,
        ...(nanoCores !== undefined && { usageNanoCores: nanoCores }),
        usageCoreNanoSeconds: cpu.usageCoreNanoSeconds,
      },
      memory: {
        time,
        availableBytes: mem.availableBytes,
        usageBytes: mem.usageBytes,
        workingSetBytes: mem.workingSetBytes,
        rssBytes: mem.rssBytes,
        pageFaults: mem.pageFaults,
        majorPageFaults: mem.majorPageFaults,
      },
    };
    if (!full) return base;
    const [ifaces, rootFs, imageFs, rlimit] = await Promise.all([
      host.network().catch(() => []),
      host.fs(this.#o.rootDir).catch(() => undefined),
      this.#o.cri.image.imageFsInfo({}, opts),
      host.rlimit().catch(() => undefined),
    ]);
    const image = imageFs.imageFilesystems[0];
    const imageMount = image?.fsId?.mountpoint;
    const imageFsUsage =
      imageMount === undefined || imageMount === ''
        ? undefined
        : await host.fs(imageMount).catch(() => undefined);
    const imageStats =
      image === undefined
        ? undefined
        : fsStats(time, imageFsUsage, num(image.usedBytes), num(image.inodesUsed));
    const container = imageFs.containerFilesystems[0];
    const containerStats =
      container === undefined
        ? imageStats
        : fsStats(time, imageFsUsage, num(container.usedBytes), num(container.inodesUsed));
    const def = ifaces.find((i) => i.name === 'eth0') ?? ifaces[0];
    return {
      ...base,
      ...(def !== undefined && { network: { time, ...def, interfaces: ifaces } }),
      ...(rootFs !== undefined && { fs: fsStats(time, rootFs) }),
      runtime: {
        ...(imageStats !== undefined && { imageFs: imageStats }),
        ...(containerStats !== undefined && { containerFs: containerStats }),
      },
      ...(rlimit !== undefined && { rlimit: { time, ...rlimit } }),
    };
  }

  /** The bytes of the container's log directory (regular files only; nothing followed). */
  async #logsUsage(
    ref: { namespace: string; name: string; uid: string },
    container: string,
    time: string,
    nodeFs: FsStats | undefined,
  ): Promise<FsStats> {
    const dir = path.join(podLogsDirectory(ref, this.#o.podLogsDir), container);
    let used = 0;
    let files = 0;
    const entries = await readdir(dir).catch(() => [] as string[]);
    for (const e of entries) {
      const st = await lstat(path.join(dir, e)).catch(() => undefined);
      if (st?.isFile() !== true) continue;
      used += st.size;
      files++;
    }
    return { ...capacityOf(nodeFs), time, usedBytes: used, inodesUsed: files };
  }
}

function capacityOf(fs: FsStats | undefined): Partial<FsStats> {
  if (fs === undefined) return {};
  return {
    ...(fs.availableBytes !== undefined && { availableBytes: fs.availableBytes }),
    ...(fs.capacityBytes !== undefined && { capacityBytes: fs.capacityBytes }),
    ...(fs.inodes !== undefined && { inodes: fs.inodes }),
    ...(fs.inodesFree !== undefined && { inodesFree: fs.inodesFree }),
  };
}

function memoryStats(m: cri.MemoryUsage, nowMs: number): MemoryStats {
  const out: Record<string, number | string> = {
    time: rfc3339(m.timestamp > 0n ? nsToMs(m.timestamp) : nowMs),
  };
  const fields = [
    ['availableBytes', m.availableBytes],
    ['usageBytes', m.usageBytes],
    ['workingSetBytes', m.workingSetBytes],
    ['rssBytes', m.rssBytes],
    ['pageFaults', m.pageFaults],
    ['majorPageFaults', m.majorPageFaults],
  ] as const;
  for (const [k, v] of fields) if (v !== undefined) out[k] = Number(v.value);
  return out as unknown as MemoryStats;
}

function networkStats(n: cri.NetworkUsage, nowMs: number): NetworkStats | undefined {
  const iface = (i: cri.NetworkInterfaceUsage): NetworkStats['interfaces'][number] => ({
    name: i.name,
    rxBytes: num(i.rxBytes) ?? 0,
    rxErrors: num(i.rxErrors) ?? 0,
    txBytes: num(i.txBytes) ?? 0,
    txErrors: num(i.txErrors) ?? 0,
  });
  if (n.defaultInterface === undefined) return undefined;
  return {
    time: rfc3339(n.timestamp > 0n ? nsToMs(n.timestamp) : nowMs),
    ...iface(n.defaultInterface),
    interfaces: n.interfaces.map(iface),
  };
}

/** Pod CPU and memory as the sum of its containers' (the ListContainerStats fallback). */
function sumContainers(
  containers: readonly ContainerStats[],
  nowMs: number,
): { cpu?: CPUStats; memory?: MemoryStats } {
  if (containers.length === 0) return {};
  const time = rfc3339(nowMs);
  const sum = (pick: (c: ContainerStats) => number | undefined): number | undefined => {
    const values = containers.map(pick);
    return values.some((v) => v === undefined)
      ? undefined
      : values.reduce<number>((t, v) => t + (v ?? 0), 0);
  };
  const nanoCores = sum((c) => c.cpu?.usageNanoCores);
  const coreNs = sum((c) => c.cpu?.usageCoreNanoSeconds);
  const ws = sum((c) => c.memory?.workingSetBytes);
  const usage = sum((c) => c.memory?.usageBytes);
  const rss = sum((c) => c.memory?.rssBytes);
  return {
    cpu: {
      time,
      ...(nanoCores !== undefined && { usageNanoCores: nanoCores }),
      ...(coreNs !== undefined && { usageCoreNanoSeconds: coreNs }),
    },
    memory: {
      time,
      ...(ws !== undefined && { workingSetBytes: ws }),
      ...(usage !== undefined && { usageBytes: usage }),
      ...(rss !== undefined && { rssBytes: rss }),
    },
  };
}
