/**
 * CgroupManager for the systemd cgroup driver, as upstream's cgroupCommon drives
 * runc's libcontainer systemd manager (Create = Apply(-1) then Set; Update = Set;
 * Destroy): every cgroup berth makes is a transient slice unit that systemd owns, so
 * systemd neither moves nor resets it, and berth still enforces the limits.
 *
 * - Names stay in cgroupfs form ("/kubepods/burstable/pod<uid>"), as the other
 *   managers use them; the unit is the last part of upstream's ToSystemd
 *   ("kubepods-burstable-pod<uid_with_underscores>.slice") and its cgroup directory
 *   the whole of it ("/kubepods.slice/kubepods-burstable.slice/...").
 * - ensure: StartTransientUnit(unit, "replace") with libcontainer's properties
 *   (Description, Wants=<parent slice>, Memory/CPU/IO(v1: BlockIO)/TasksAccounting,
 *   DefaultDependencies=no); a unit that already exists is fine (kubelet's "make sure
 *   the slice exists"); a job that does not end "done" is reset and reported.
 * - update: SetUnitProperties(runtime) with the limits (v2: CPUWeight, MemoryMax; v1:
 *   CPUShares, MemoryLimit; both: CPUQuotaPeriodUSec from systemd 242, CPUQuotaPerSecUSec,
 *   TasksMax), then the same values written to the cgroup files (libcontainer's fs
 *   Set after the systemd one): systemd rounds the CPU quota to 10 ms per second,
 *   which the files then carry too. Unlimited values are sent as "infinity" rather
 *   than left out, so systemd re-applying its properties (daemon-reload) restores
 *   what berth wrote instead of an older limit.
 * - destroy: StopUnit (children slices stop with it), ResetFailedUnit, then whatever
 *   directories are left are removed.
 *
 * Reads (exists, read, pids, children) go to the cgroup files directly, as upstream's.
 */
import { CgroupfsManager } from './cgroupfs.ts';
import type { SystemdBus, UnitProperty } from './systemd-dbus.ts';
import {
  CgroupError,
  type CgroupManager,
  type CgroupResources,
  type CgroupState,
} from './types.ts';
import { sharesToWeight } from './cgroupfs.ts';

const SUFFIX = '.slice';
const INFINITY = 2n ** 64n - 1n;
const DEFAULT_PERIOD_US = 100_000;
/** Each call to systemd is bounded; a stuck bus becomes an error, not a stuck pod worker. */
const OPERATION_TIMEOUT_MS = 60_000;

export interface SystemdCgroupOptions {
  /** The hierarchy systemd runs on. */
  readonly version: 'v1' | 'v2';
  readonly bus: SystemdBus;
  /** Where the cgroup filesystem is mounted (default /sys/fs/cgroup). */
  readonly mountRoot?: string;
}

function parts(name: string): string[] {
  const out = name.split('/').filter((p) => p !== '');
  if (
    out.length === 0 ||
    out.some((p) => p === '.' || p === '..' || p.includes('\0') || p.includes('_'))
  )
    throw new CgroupError(
      `Cannot use cgroup name ${JSON.stringify(name)}: not a path below the root, or a part with "_" (reserved for "-" in slice names)`,
    );
  return out;
}

/** Upstream's ToSystemd for a cgroupfs-form name: the slice's cgroup path. */
export function systemdPath(name: string): string {
  const escaped = parts(name).map((p) => p.replace(/-/g, '_'));
  return `/${escaped.map((_, i) => `${escaped.slice(0, i + 1).join('-')}${SUFFIX}`).join('/')}`;
}

/** The slice unit of a cgroupfs-form name and its parent slice ("-.slice" at the top). */
export function sliceUnit(name: string): { unit: string; parent: string } {
  const path = systemdPath(name).split('/');
  const unit = path[path.length - 1] ?? '';
  const parent = path.length > 2 ? (path[path.length - 2] ?? '') : `-${SUFFIX}`;
  return { unit, parent };
}

/**
 * libcontainer's addCPUQuota: CPUQuotaPerSecUSec rounded up to whole 10 ms, and the
 * quota the cgroup files get so they agree with it. Unlimited (-1) is "infinity".
 */
export function cpuQuotaPerSec(
  quota: number,
  period: number,
): { perSecUSec: bigint; quota: number } {
  if (quota <= 0) return { perSecUSec: INFINITY, quota };
  let perSec = Math.floor((quota * 1_000_000) / period);
  if (perSec % 10_000 !== 0) {
    perSec = (Math.floor(perSec / 10_000) + 1) * 10_000;
    return { perSecUSec: BigInt(perSec), quota: Math.floor((perSec * period) / 1_000_000) };
  }
  return { perSecUSec: BigInt(perSec), quota };
}

/** libcontainer's Apply(-1) properties for a slice. */
export function sliceProperties(
  version: 'v1' | 'v2',
  unit: string,
  parent: string,
): UnitProperty[] {
  return [
    { name: 'Description', type: 's', value: `libcontainer container ${unit}` },
    { name: 'Wants', type: 'as', value: [parent] },
    { name: 'MemoryAccounting', type: 'b', value: true },
    { name: 'CPUAccounting', type: 'b', value: true },
    { name: version === 'v2' ? 'IOAccounting' : 'BlockIOAccounting', type: 'b', value: true },
    { name: 'TasksAccounting', type: 'b', value: true },
    { name: 'DefaultDependencies', type: 'b', value: false },
  ];
}

/** libcontainer's gen{V1,V2}ResourcesProperties for what berth sets, plus the files' quota. */
export function resourceProperties(
  version: 'v1' | 'v2',
  r: CgroupResources,
  systemdVersion: number,
): { properties: UnitProperty[]; files: CgroupResources } {
  const properties: UnitProperty[] = [];
  let files = r;
  const memory = r.memoryLimit === undefined ? INFINITY : BigInt(r.memoryLimit);
  properties.push({
    name: version === 'v2' ? 'MemoryMax' : 'MemoryLimit',
    type: 't',
    value: memory,
  });
  if (r.cpuShares !== undefined)
    properties.push(
      version === 'v2'
        ? { name: 'CPUWeight', type: 't', value: BigInt(sharesToWeight(r.cpuShares)) }
        : { name: 'CPUShares', type: 't', value: BigInt(r.cpuShares) },
    );
  if (r.cpuQuota !== undefined || r.cpuPeriod !== undefined) {
    const period = r.cpuPeriod ?? DEFAULT_PERIOD_US;
    // systemd only knows CPUQuotaPeriodUSec from 242 on; the files still get the period.
    if (systemdVersion >= 242)
      properties.push({ name: 'CPUQuotaPeriodUSec', type: 't', value: BigInt(period) });
    const q = cpuQuotaPerSec(r.cpuQuota ?? -1, period);
    properties.push({ name: 'CPUQuotaPerSecUSec', type: 't', value: q.perSecUSec });
    if (r.cpuQuota !== undefined && q.quota !== r.cpuQuota) files = { ...r, cpuQuota: q.quota };
  }
  // systemd does not accept 0 for TasksMax.
  const tasks =
    r.pidsLimit === undefined || r.pidsLimit < 0 ? INFINITY : BigInt(Math.max(1, r.pidsLimit));
  properties.push({ name: 'TasksMax', type: 't', value: tasks });
  return { properties, files };
}

export class SystemdCgroupManager implements CgroupManager {
  readonly version: 'v1' | 'v2';
  readonly #bus: SystemdBus;
  /** The cgroup files below the slices' directories. */
  readonly #files: CgroupfsManager;

  constructor(options: SystemdCgroupOptions) {
    this.version = options.version;
    this.#bus = options.bus;
    this.#files = new CgroupfsManager({
      version: options.version,
      ...(options.mountRoot !== undefined && { mountRoot: options.mountRoot }),
    });
  }

  async ensure(name: string, resources: CgroupResources): Promise<void> {
    const { unit, parent } = sliceUnit(name);
    const signal = AbortSignal.timeout(OPERATION_TIMEOUT_MS);
    const properties = sliceProperties(this.version, unit, parent);
    let result = await this.#bus.startTransientUnit(unit, 'replace', properties, signal);
    if (result !== 'done' && result !== 'exists') {
      // A leftover failed unit of that name: reset it so systemd forgets it, once more.
      await this.#bus.resetFailedUnit(unit, signal).catch(() => undefined);
      result = await this.#bus.startTransientUnit(unit, 'replace', properties, signal);
    }
    if (result !== 'done' && result !== 'exists') {
      await this.#bus.resetFailedUnit(unit, signal).catch(() => undefined);
      throw new CgroupError(
        `Cannot create systemd slice ${unit}: its start job ended "${result}"`,
        {
          code: 'BERTH_CGROUP_SYSTEMD_UNIT',
        },
      );
    }
    // libcontainer creates the directory after the unit when systemd did not (fs2.CreateCgroupPath).
    const path = systemdPath(name);
    if (!(await this.#files.exists(path))) await this.#files.ensure(path, {});
    await this.update(name, resources);
  }

  async update(name: string, resources: CgroupResources): Promise<void> {
    const { unit } = sliceUnit(name);
    const path = systemdPath(name);
    if (!(await this.#files.exists(path)))
      throw new CgroupError(`Cannot update cgroup ${name}: it does not exist (slice ${unit})`);
    const signal = AbortSignal.timeout(OPERATION_TIMEOUT_MS);
    const { properties, files } = resourceProperties(
      this.version,
      resources,
      await this.#bus.version(signal),
    );
    await this.#bus.setUnitProperties(unit, true, properties, signal);
    await this.#files.update(path, files);
  }

  exists(name: string): Promise<boolean> {
    return this.#files.exists(systemdPath(name));
  }

  read(name: string): Promise<CgroupState> {
    return this.#files.read(systemdPath(name)).catch((err: unknown) => {
      throw new CgroupError(`Cannot read cgroup ${name}: it does not exist`, { cause: err });
    });
  }

  pids(name: string): Promise<number[]> {
    return this.#files.pids(systemdPath(name));
  }

  /** Child slices only: the containers' scopes below a pod slice are the runtime's. */
  async children(name: string): Promise<string[]> {
    const own = parts(name);
    const prefix = `${own.map((p) => p.replace(/-/g, '_')).join('-')}-`;
    const out: string[] = [];
    for (const child of await this.#files.children(systemdPath(name))) {
      const base = child.slice(child.lastIndexOf('/') + 1);
      if (!base.endsWith(SUFFIX) || !base.startsWith(prefix)) continue;
      const last = base.slice(prefix.length, -SUFFIX.length);
      if (last === '' || last.includes('-')) continue;
      out.push(`/${[...own, last.replace(/_/g, '-')].join('/')}`);
    }
    return out;
  }

  async destroy(name: string): Promise<void> {
    const { unit } = sliceUnit(name);
    const signal = AbortSignal.timeout(OPERATION_TIMEOUT_MS);
    const result = await this.#bus.stopUnit(unit, 'replace', signal);
    // Upstream goes on after a stop job that did not end "done" (it only warns), and
    // lets systemd forget a failed unit; the directories left are removed below.
    if (result !== 'missing') await this.#bus.resetFailedUnit(unit, signal).catch(() => undefined);
    await this.#files.destroy(systemdPath(name));
  }
}
