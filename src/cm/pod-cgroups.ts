/**
 * The QoS cgroup hierarchy and one cgroup per pod, as upstream's QOSContainerManager
 * and PodContainerManager build them (cgroupsPerQOS):
 *
 *   <cgroupRoot>/kubepods                 cpu.shares = allocatable cpu, memory = allocatable
 *   <cgroupRoot>/kubepods/burstable       cpu.shares = sum of the Burstable pods' requests
 *   <cgroupRoot>/kubepods/besteffort      cpu.shares = 2
 *   <cgroupRoot>/kubepods[/tier]/pod<uid> the pod's requests and (when every container
 *                                         sets one) limits; podPidsLimit
 *
 * The runtime creates the containers' cgroups inside the pod's (CRI cgroup_parent).
 * With the systemd driver the same hierarchy is made of slices (kubepods.slice,
 * kubepods-burstable.slice, kubepods-burstable-pod<uid_with_underscores>.slice) that
 * berth creates, limits and stops through systemd (systemd.ts), as upstream does;
 * the runtime puts the containers' scopes inside the pod's slice. Without a systemd
 * manager (no system bus given) berth only names the slices and sets no limits.
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { podRequests } from '../container/pod-requests.ts';
import { podLevelValue } from '../container/pod-level.ts';
import { qosClassOf, type QosClass } from '../container/qos.ts';
import type { Logger } from '../util/logger.ts';
import { milliCpu, parseQuantity } from '../util/quantity.ts';
import type { CgroupManager, CgroupResources, CgroupState } from './types.ts';

export interface PodCgroupsOptions {
  /** The cgroupfs driver's manager. */
  readonly cgroups: CgroupManager;
  /** The systemd driver's manager (systemd.ts); without it the slices are left alone. */
  readonly systemdCgroups?: CgroupManager;
  /** The kubelet's cgroupRoot ('' or '/' for the hierarchy root). */
  readonly cgroupRoot: string;
  /** The runtime's cgroup driver (known once the runtime answered RuntimeConfig). */
  readonly driver: () => 'cgroupfs' | 'systemd';
  /** podPidsLimit; <= 0: unlimited. */
  readonly podPidsLimit: number;
  readonly logger: Logger;
}

export const CPU_PERIOD_US = 100_000;
const MIN_SHARES = 2;
const MAX_SHARES = 262_144;

/** Upstream MilliCPUToShares. */
export function milliCpuToShares(milli: number): number {
  if (milli === 0) return MIN_SHARES;
  return Math.min(MAX_SHARES, Math.max(MIN_SHARES, Math.floor((milli * 1024) / 1000)));
}

/** Upstream MilliCPUToQuota (at least 1 ms per period). */
export function milliCpuToQuota(milli: number, period = CPU_PERIOD_US): number {
  if (milli === 0) return 0;
  return Math.max(1000, Math.floor((milli * period) / 1000));
}

function limitOf(c: Container, resource: 'cpu' | 'memory'): number | undefined {
  const q = c.resources?.limits?.[resource];
  if (q === undefined) return undefined;
  return resource === 'cpu' ? milliCpu(q) : Math.floor(parseQuantity(q));
}

/**
 * The pod's limit for `resource`: the pod-level limit where the pod sets one, else the
 * containers' when every container has one (upstream's rule), else undefined.
 */
function podLimit(pod: Pod, resource: 'cpu' | 'memory'): number | undefined {
  const podLevel = podLevelValue(pod, 'limits', resource);
  if (podLevel !== undefined) return podLevel;
  const inits = pod.spec?.initContainers ?? [];
  const apps = pod.spec?.containers ?? [];
  const all = [...inits, ...apps];
  if (all.length === 0 || all.some((c) => limitOf(c, resource) === undefined)) return undefined;
  let sidecars = 0;
  let initPeak = 0;
  for (const c of inits) {
    const l = limitOf(c, resource) ?? 0;
    if (c.restartPolicy === 'Always') {
      sidecars += l;
      initPeak = Math.max(initPeak, sidecars);
    } else initPeak = Math.max(initPeak, sidecars + l);
  }
  const appSum = apps.reduce((n, c) => n + (limitOf(c, resource) ?? 0), 0);
  return Math.max(appSum + sidecars, initPeak);
}

/** Upstream ResourceConfigForPod. */
export function podResources(pod: Pod, podPidsLimit: number): CgroupResources {
  const qos = qosClassOf(pod);
  const pids = podPidsLimit > 0 ? { pidsLimit: podPidsLimit } : {};
  if (qos === 'BestEffort') return { cpuShares: MIN_SHARES, ...pids };
  const cpuLimit = podLimit(pod, 'cpu');
  const memoryLimit = podLimit(pod, 'memory');
  return {
    cpuShares: milliCpuToShares(podRequests(pod).cpu),
    cpuPeriod: CPU_PERIOD_US,
    cpuQuota: cpuLimit === undefined ? -1 : milliCpuToQuota(cpuLimit),
    ...(memoryLimit !== undefined && { memoryLimit }),
    ...pids,
  };
}

function rootParts(cgroupRoot: string): string[] {
  return cgroupRoot.split('/').filter((p) => p !== '');
}

/** `<root>/kubepods[/tier]` in cgroupfs form. */
export function qosCgroupName(cgroupRoot: string, qos: QosClass): string {
  const tier = qos === 'Guaranteed' ? [] : [qos.toLowerCase()];
  return `/${[...rootParts(cgroupRoot), 'kubepods', ...tier].join('/')}`;
}

/** Upstream's ToSystemd: /a/b/c -> /a.slice/a-b.slice/a-b-c.slice ('-' in parts -> '_'). */
export function toSystemdName(cgroupfsName: string): string {
  const parts = cgroupfsName
    .split('/')
    .filter((p) => p !== '')
    .map((p) => p.replace(/-/g, '_'));
  const out: string[] = [];
  for (let i = 0; i < parts.length; i++) out.push(`${parts.slice(0, i + 1).join('-')}.slice`);
  return `/${out.join('/')}`;
}

export class PodCgroups {
  readonly #o: PodCgroupsOptions;

  constructor(options: PodCgroupsOptions) {
    this.#o = options;
  }

  /** The pod's cgroup, cgroupfs form. */
  podCgroupName(pod: Pod): string {
    return `${qosCgroupName(this.#o.cgroupRoot, qosClassOf(pod))}/pod${pod.metadata?.uid ?? ''}`;
  }

  /** What CRI gets as cgroup_parent (the driver's naming). */
  cgroupParent(pod: Pod): string {
    const name = this.podCgroupName(pod);
    return this.#o.driver() === 'systemd' ? toSystemdName(name) : name;
  }

  /** The manager of the runtime's driver; undefined when berth cannot manage its cgroups. */
  #manager(): CgroupManager | undefined {
    return this.#o.driver() === 'cgroupfs' ? this.#o.cgroups : this.#o.systemdCgroups;
  }

  #managed(): boolean {
    return this.#manager() !== undefined;
  }

  #cg(): CgroupManager {
    const m = this.#manager();
    if (m === undefined) throw new Error('Cannot manage pod cgroups: no manager for the driver');
    return m;
  }

  /** Creates kubepods and the QoS tiers; kubepods gets the node's allocatable. */
  async start(allocatable: { cpuMilli: number; memoryBytes?: number }): Promise<void> {
    if (!this.#managed()) {
      this.#o.logger.info(
        'systemd cgroup driver without a system bus: pod and QoS slices are left to the runtime',
      );
      return;
    }
    const cgroups = this.#cg();
    const { cgroupRoot } = this.#o;
    await cgroups.ensure(qosCgroupName(cgroupRoot, 'Guaranteed'), {
      cpuShares: milliCpuToShares(allocatable.cpuMilli),
      ...(allocatable.memoryBytes !== undefined && { memoryLimit: allocatable.memoryBytes }),
    });
    await cgroups.ensure(qosCgroupName(cgroupRoot, 'Burstable'), { cpuShares: MIN_SHARES });
    await cgroups.ensure(qosCgroupName(cgroupRoot, 'BestEffort'), { cpuShares: MIN_SHARES });
  }

  /** Creates the pod's cgroup with its limits if it does not exist yet. */
  async ensurePod(pod: Pod): Promise<void> {
    if (!this.#managed()) return;
    const name = this.podCgroupName(pod);
    if (await this.#cg().exists(name)) return;
    await this.#cg().ensure(name, podResources(pod, this.#o.podPidsLimit));
  }

  /** What the pod cgroup should have for `pod` (its allocated resources). */
  desiredPod(pod: Pod): CgroupResources {
    return podResources(pod, this.#o.podPidsLimit);
  }

  /**
   * The pod cgroup's current settings and memory use (upstream's GetPodCgroupConfig);
   * undefined when berth does not manage it (systemd driver) or it does not exist.
   */
  async readPod(pod: Pod): Promise<CgroupState | undefined> {
    if (!this.#managed()) return undefined;
    const name = this.podCgroupName(pod);
    if (!(await this.#cg().exists(name))) return undefined;
    return this.#cg().read(name);
  }

  /**
   * Applies `change` to the pod cgroup for a resize (upstream's SetPodCgroupConfig);
   * what `change` leaves out keeps its current value. A pod's QoS class cannot change
   * on resize, so its cgroup stays where it is.
   */
  async resizePod(pod: Pod, change: CgroupResources): Promise<void> {
    if (!this.#managed()) return;
    const name = this.podCgroupName(pod);
    const current: CgroupResources = { ...(await this.#cg().read(name)) };
    delete (current as { memoryUsage?: number }).memoryUsage;
    await this.#cg().update(name, { ...current, ...change });
  }

  /** Burstable tier's cpu.shares = the sum of its pods' requests (upstream's periodic update). */
  async updateQos(pods: readonly Pod[]): Promise<void> {
    if (!this.#managed()) return;
    const milli = pods
      .filter((p) => qosClassOf(p) === 'Burstable')
      .reduce((n, p) => n + podRequests(p).cpu, 0);
    await this.#cg().update(qosCgroupName(this.#o.cgroupRoot, 'Burstable'), {
      cpuShares: milliCpuToShares(milli),
    });
  }

  /** Removes a pod's cgroup once nothing runs in it; returns false when processes remain. */
  async destroyPod(uid: string): Promise<boolean> {
    if (!this.#managed()) return true;
    for (const qos of ['Guaranteed', 'Burstable', 'BestEffort'] as const) {
      const name = `${qosCgroupName(this.#o.cgroupRoot, qos)}/pod${uid}`;
      if (!(await this.#cg().exists(name))) continue;
      if ((await this.#cg().pids(name)).length > 0) return false;
      await this.#cg().destroy(name);
    }
    return true;
  }

  /** Pod cgroups whose UID is not in `active` and that hold no process are removed. */
  async cleanupOrphans(active: ReadonlySet<string>): Promise<string[]> {
    if (!this.#managed()) return [];
    const removed: string[] = [];
    for (const qos of ['Guaranteed', 'Burstable', 'BestEffort'] as const) {
      for (const child of await this.#cg().children(qosCgroupName(this.#o.cgroupRoot, qos))) {
        const base = child.slice(child.lastIndexOf('/') + 1);
        if (!base.startsWith('pod')) continue;
        const uid = base.slice(3);
        if (active.has(uid)) continue;
        if ((await this.#cg().pids(child)).length > 0) continue;
        await this.#cg().destroy(child);
        removed.push(uid);
      }
    }
    return removed;
  }
}
