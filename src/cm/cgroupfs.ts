/**
 * CgroupManager over the cgroup filesystem, for both layouts:
 *
 * - v1 (also the "hybrid" layout of this project's CI machine): one hierarchy per
 *   controller under `<mountRoot>/<controller>`; a cgroup is a directory in each.
 *   New cpuset cgroups start with empty cpus/mems, which would make every process
 *   placed there fail, so they are copied from the parent as the kernel expects.
 * - v2: one tree; controllers must be enabled in each parent's cgroup.subtree_control
 *   before a child can use them. cpu.shares maps to cpu.weight as upstream does.
 *
 * Names are validated: they come from pod UIDs and must stay below the root.
 */
import { readdir, readFile, rmdir, stat, writeFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import {
  CgroupError,
  type CgroupManager,
  type CgroupResources,
  type CgroupState,
} from './types.ts';

const V1_CONTROLLERS = [
  'cpu',
  'cpuacct',
  'cpuset',
  'memory',
  'pids',
  'hugetlb',
  'blkio',
  'devices',
  'freezer',
] as const;
const V2_CONTROLLERS = ['cpu', 'cpuset', 'memory', 'pids', 'hugetlb', 'io'];

export interface CgroupfsOptions {
  readonly version: 'v1' | 'v2';
  /** Where the cgroup filesystem is mounted (default /sys/fs/cgroup). */
  readonly mountRoot?: string;
}

/** The layout of the host: v2 when /sys/fs/cgroup itself is cgroup2. */
export async function detectCgroupVersion(mountRoot = '/sys/fs/cgroup'): Promise<'v1' | 'v2'> {
  try {
    await stat(join(mountRoot, 'cgroup.controllers'));
    return 'v2';
  } catch {
    return 'v1';
  }
}

function checkName(name: string): string {
  const parts = name.split('/').filter((p) => p !== '');
  if (parts.length === 0 || parts.some((p) => p === '.' || p === '..' || p.includes('\0')))
    throw new CgroupError(
      `Cannot use cgroup name ${JSON.stringify(name)}: not a path below the root`,
    );
  return parts.join('/');
}

async function writeIfExists(file: string, value: string): Promise<void> {
  try {
    await writeFile(file, value);
  } catch (err) {
    // A controller file the kernel does not offer (no hugetlb, no swap accounting) is skipped.
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw new CgroupError(`Cannot write ${value.trim()} to ${file}`, { cause: err });
  }
}

/** The number in a cgroup file; undefined when missing, "max" or past 2^62 (unlimited). */
async function readNumber(file: string): Promise<number | undefined> {
  const text = (await readFile(file, 'utf8').catch(() => '')).trim().split(/\s+/)[0] ?? '';
  if (text === '' || text === 'max') return undefined;
  const n = Number(text);
  return Number.isFinite(n) && n < 2 ** 62 ? n : undefined;
}

/** Upstream's CPUWeightToCPUShares, the inverse of sharesToWeight. */
export function weightToShares(weight: number): number {
  return Math.ceil(((weight - 1) * 262142) / 9999) + 2;
}

/** Upstream's CPUSharesToCPUWeight: [2, 262144] -> [1, 10000]. */
export function sharesToWeight(shares: number): number {
  return Math.floor(1 + ((shares - 2) * 9999) / 262142);
}

export class CgroupfsManager implements CgroupManager {
  readonly version: 'v1' | 'v2';
  readonly #root: string;

  constructor(options: CgroupfsOptions) {
    this.version = options.version;
    this.#root = options.mountRoot ?? '/sys/fs/cgroup';
  }

  /** Directories of one cgroup: one per v1 controller hierarchy present, or the v2 one. */
  async #dirs(name: string): Promise<{ controller: string; dir: string }[]> {
    const rel = checkName(name);
    if (this.version === 'v2') return [{ controller: '', dir: join(this.#root, rel) }];
    const out: { controller: string; dir: string }[] = [];
    const seen = new Set<string>();
    for (const c of V1_CONTROLLERS) {
      const base = join(this.#root, c);
      try {
        // cpu and cpuacct are often one hierarchy mounted twice (cpu,cpuacct).
        const st = await stat(base);
        const key = `${st.dev}:${st.ino}`;
        if (seen.has(key)) continue;
        seen.add(key);
      } catch {
        continue;
      }
      out.push({ controller: c, dir: join(base, rel) });
    }
    return out;
  }

  async #dirFor(name: string, controller: string): Promise<string | undefined> {
    if (this.version === 'v2') return join(this.#root, checkName(name));
    const dirs = await this.#dirs(name);
    // A merged cpu,cpuacct hierarchy is found under whichever name came first.
    const hit = dirs.find((d) => d.controller === controller);
    if (hit !== undefined) return hit.dir;
    const base = join(this.#root, controller);
    try {
      await stat(base);
      return join(base, checkName(name));
    } catch {
      return undefined;
    }
  }

  async ensure(name: string, resources: CgroupResources): Promise<void> {
    const rel = checkName(name);
    if (this.version === 'v2') await this.#ensureV2(rel);
    else {
      for (const { controller, dir } of await this.#dirs(rel)) {
        if (controller === 'cpuset') await this.#ensureCpuset(rel);
        else await mkdir(dir, { recursive: true });
      }
    }
    await this.update(rel, resources);
  }

  async #ensureCpuset(rel: string): Promise<void> {
    const base = join(this.#root, 'cpuset');
    let current = base;
    for (const part of rel.split('/')) {
      const parent = current;
      current = join(current, part);
      try {
        await mkdir(current);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      for (const f of ['cpuset.cpus', 'cpuset.mems']) {
        const mine = (await readFile(join(current, f), 'utf8').catch(() => '')).trim();
        if (mine !== '') continue;
        const theirs = (await readFile(join(parent, f), 'utf8').catch(() => '')).trim();
        if (theirs !== '') await writeIfExists(join(current, f), theirs);
      }
    }
  }

  async #ensureV2(rel: string): Promise<void> {
    let current = this.#root;
    for (const part of rel.split('/')) {
      const available = (
        await readFile(join(current, 'cgroup.controllers'), 'utf8').catch(() => '')
      )
        .trim()
        .split(/\s+/);
      const wanted = V2_CONTROLLERS.filter((c) => available.includes(c));
      if (wanted.length > 0)
        await writeIfExists(
          join(current, 'cgroup.subtree_control'),
          wanted.map((c) => `+${c}`).join(' '),
        );
      current = join(current, part);
      await mkdir(current, { recursive: true });
    }
  }

  async update(name: string, r: CgroupResources): Promise<void> {
    if (!(await this.exists(name)))
      throw new CgroupError(`Cannot update cgroup ${name}: it does not exist`);
    const v2 = this.version === 'v2';
    const cpu = await this.#dirFor(name, 'cpu');
    if (cpu !== undefined) {
      if (r.cpuShares !== undefined)
        await writeIfExists(
          join(cpu, v2 ? 'cpu.weight' : 'cpu.shares'),
          String(v2 ? sharesToWeight(r.cpuShares) : r.cpuShares),
        );
      if (r.cpuQuota !== undefined || r.cpuPeriod !== undefined) {
        const period = r.cpuPeriod ?? 100_000;
        const quota = r.cpuQuota ?? -1;
        if (v2) await writeIfExists(join(cpu, 'cpu.max'), `${quota < 0 ? 'max' : quota} ${period}`);
        else {
          await writeIfExists(join(cpu, 'cpu.cfs_period_us'), String(period));
          await writeIfExists(join(cpu, 'cpu.cfs_quota_us'), String(quota));
        }
      }
    }
    const memory = await this.#dirFor(name, 'memory');
    if (memory !== undefined)
      await writeIfExists(
        join(memory, v2 ? 'memory.max' : 'memory.limit_in_bytes'),
        r.memoryLimit === undefined ? (v2 ? 'max' : '-1') : String(r.memoryLimit),
      );
    const pids = await this.#dirFor(name, 'pids');
    if (pids !== undefined)
      await writeIfExists(
        join(pids, 'pids.max'),
        r.pidsLimit === undefined ? 'max' : String(r.pidsLimit),
      );
  }

  async exists(name: string): Promise<boolean> {
    const dir = (await this.#dirFor(name, 'memory')) ?? (await this.#dirs(name))[0]?.dir;
    if (dir === undefined) return false;
    return stat(dir).then(
      (s) => s.isDirectory(),
      () => false,
    );
  }

  async read(name: string): Promise<CgroupState> {
    if (!(await this.exists(name)))
      throw new CgroupError(`Cannot read cgroup ${name}: it does not exist`);
    const v2 = this.version === 'v2';
    const cpu = await this.#dirFor(name, 'cpu');
    const memory = await this.#dirFor(name, 'memory');
    const pids = await this.#dirFor(name, 'pids');
    let cpuShares: number | undefined;
    let cpuQuota: number | undefined;
    let cpuPeriod: number | undefined;
    if (cpu !== undefined && v2) {
      const weight = await readNumber(join(cpu, 'cpu.weight'));
      cpuShares = weight === undefined ? undefined : weightToShares(weight);
      const max = (await readFile(join(cpu, 'cpu.max'), 'utf8').catch(() => ''))
        .trim()
        .split(/\s+/);
      cpuQuota = max[0] === 'max' ? -1 : max[0] === undefined ? undefined : Number(max[0]);
      cpuPeriod = max[1] === undefined ? undefined : Number(max[1]);
    } else if (cpu !== undefined) {
      cpuShares = await readNumber(join(cpu, 'cpu.shares'));
      cpuPeriod = await readNumber(join(cpu, 'cpu.cfs_period_us'));
      const quota = (await readFile(join(cpu, 'cpu.cfs_quota_us'), 'utf8').catch(() => '')).trim();
      cpuQuota = quota === '' ? undefined : Number(quota);
    }
    const memoryLimit =
      memory === undefined
        ? undefined
        : await readNumber(join(memory, v2 ? 'memory.max' : 'memory.limit_in_bytes'));
    const memoryUsage =
      memory === undefined
        ? undefined
        : await readNumber(join(memory, v2 ? 'memory.current' : 'memory.usage_in_bytes'));
    const pidsLimit = pids === undefined ? undefined : await readNumber(join(pids, 'pids.max'));
    return {
      ...(cpuShares !== undefined && { cpuShares }),
      ...(cpuQuota !== undefined && !Number.isNaN(cpuQuota) && { cpuQuota }),
      ...(cpuPeriod !== undefined && !Number.isNaN(cpuPeriod) && { cpuPeriod }),
      ...(memoryLimit !== undefined && { memoryLimit }),
      ...(memoryUsage !== undefined && { memoryUsage }),
      ...(pidsLimit !== undefined && { pidsLimit }),
    };
  }

  async pids(name: string): Promise<number[]> {
    const out = new Set<number>();
    const walk = async (dir: string): Promise<void> => {
      const text = await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => '');
      for (const l of text.split('\n')) if (l.trim() !== '') out.add(Number(l));
      const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
      for (const e of entries) if (e.isDirectory()) await walk(join(dir, e.name));
    };
    for (const { dir } of await this.#dirs(name)) await walk(dir);
    return [...out];
  }

  async children(name: string): Promise<string[]> {
    const rel = checkName(name);
    const dir = (await this.#dirFor(rel, 'memory')) ?? (await this.#dirs(rel))[0]?.dir;
    if (dir === undefined) return [];
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    return entries.filter((e) => e.isDirectory()).map((e) => `/${rel}/${e.name}`);
  }

  async destroy(name: string): Promise<void> {
    const remove = async (dir: string): Promise<void> => {
      const entries = await readdir(dir, { withFileTypes: true }).catch(() => undefined);
      if (entries === undefined) return;
      for (const e of entries) if (e.isDirectory()) await remove(join(dir, e.name));
      try {
        await rmdir(dir);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
          throw new CgroupError(`Cannot remove cgroup ${dir}`, { cause: err });
      }
    };
    for (const dir of await this.#everyHierarchy(name)) await remove(dir);
  }

  /**
   * The cgroup's directory in every hierarchy mounted under the root, not only the
   * controllers berth writes: runc also makes the pod's directory (as its containers'
   * parent) in the named systemd hierarchy and, on a hybrid host, in the unified one,
   * and nothing else would remove those (upstream's Destroy covers every mount too).
   */
  async #everyHierarchy(name: string): Promise<string[]> {
    const rel = checkName(name);
    if (this.version === 'v2') return [join(this.#root, rel)];
    const out = (await this.#dirs(rel)).map((d) => d.dir);
    const seen = new Set<string>();
    for (const c of V1_CONTROLLERS) {
      const st = await stat(join(this.#root, c)).catch(() => undefined);
      if (st !== undefined) seen.add(`${st.dev}:${st.ino}`);
    }
    for (const e of await readdir(this.#root, { withFileTypes: true }).catch(() => [])) {
      if (!e.isDirectory()) continue;
      const st = await stat(join(this.#root, e.name)).catch(() => undefined);
      if (st === undefined || seen.has(`${st.dev}:${st.ino}`)) continue;
      seen.add(`${st.dev}:${st.ino}`);
      out.push(join(this.#root, e.name, rel));
    }
    return out;
  }
}
