/** An in-memory CgroupManager for unit tests; passes the same contract as the real one. */
import {
  CgroupError,
  type CgroupManager,
  type CgroupResources,
  type CgroupState,
} from './types.ts';

function norm(name: string): string {
  const parts = name.split('/').filter((p) => p !== '');
  if (parts.length === 0 || parts.some((p) => p === '.' || p === '..' || p.includes('\0')))
    throw new CgroupError(
      `Cannot use cgroup name ${JSON.stringify(name)}: not a path below the root`,
    );
  return `/${parts.join('/')}`;
}

export class FakeCgroupManager implements CgroupManager {
  readonly version: 'v1' | 'v2' = 'v1';
  /** Cgroups and their applied resources (merged). */
  readonly groups = new Map<string, CgroupResources>();
  /** Memory use per cgroup in bytes, set by tests. */
  readonly memoryUsage = new Map<string, number>();
  /** Every update in order (name and resources), for tests of ordering. */
  readonly updates: { name: string; resources: CgroupResources }[] = [];
  /** PIDs per cgroup, set by tests. */
  readonly procs = new Map<string, number[]>();

  async ensure(name: string, resources: CgroupResources): Promise<void> {
    await Promise.resolve();
    const n = norm(name);
    const parts = n.split('/').filter((p) => p !== '');
    for (let i = 1; i < parts.length; i++) {
      const parent = `/${parts.slice(0, i).join('/')}`;
      if (!this.groups.has(parent)) this.groups.set(parent, {});
    }
    this.groups.set(n, { ...this.groups.get(n), ...resources });
  }

  update(name: string, resources: CgroupResources): Promise<void> {
    const n = norm(name);
    const current = this.groups.get(n);
    if (current === undefined)
      return Promise.reject(new CgroupError(`Cannot update cgroup ${n}: it does not exist`));
    this.groups.set(n, { ...current, ...resources });
    this.updates.push({ name: n, resources });
    return Promise.resolve();
  }

  read(name: string): Promise<CgroupState> {
    const n = norm(name);
    const current = this.groups.get(n);
    if (current === undefined)
      return Promise.reject(new CgroupError(`Cannot read cgroup ${n}: it does not exist`));
    const usage = this.memoryUsage.get(n);
    return Promise.resolve({ ...current, ...(usage !== undefined && { memoryUsage: usage }) });
  }

  exists(name: string): Promise<boolean> {
    return Promise.resolve(this.groups.has(norm(name)));
  }

  pids(name: string): Promise<number[]> {
    const n = norm(name);
    const out: number[] = [];
    for (const [k, v] of this.procs) if (k === n || k.startsWith(`${n}/`)) out.push(...v);
    return Promise.resolve(out);
  }

  children(name: string): Promise<string[]> {
    const n = norm(name);
    const depth = n.split('/').length;
    return Promise.resolve(
      [...this.groups.keys()].filter(
        (k) => k.startsWith(`${n}/`) && k.split('/').length === depth + 1,
      ),
    );
  }

  destroy(name: string): Promise<void> {
    const n = norm(name);
    for (const k of [...this.groups.keys()])
      if (k === n || k.startsWith(`${n}/`)) this.groups.delete(k);
    return Promise.resolve();
  }
}
