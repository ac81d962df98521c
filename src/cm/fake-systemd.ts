/**
 * A SystemdBus that behaves like systemd's manager over a directory standing in for
 * the cgroup2 mount: starting a slice creates its directory (and its parents', as
 * systemd loads parent slices implicitly), setting properties writes the files
 * systemd would, stopping a slice removes it with the slices inside. It records every
 * call, and a test can make the next call of a method fail with a D-Bus error or a
 * job end with another result than "done".
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { JobResult, SystemdBus, UnitProperty } from './systemd-dbus.ts';
import { CgroupError } from './types.ts';

export interface FakeSystemdCall {
  readonly method:
    'startTransientUnit' | 'stopUnit' | 'setUnitProperties' | 'resetFailedUnit' | 'version';
  readonly unit?: string;
  readonly properties?: readonly UnitProperty[];
}

type Method = FakeSystemdCall['method'];

/** upstream's ExpandSlice: "a-b-c.slice" -> "/a.slice/a-b.slice/a-b-c.slice". */
export function expandSlice(unit: string): string {
  if (!unit.endsWith('.slice') || unit.includes('/') || unit === '.slice')
    throw new Error(`invalid slice name: ${unit}`);
  const base = unit.slice(0, -'.slice'.length);
  if (base === '-') return '/';
  const comps = base.split('-');
  if (comps.some((c) => c === '')) throw new Error(`invalid slice name: ${unit}`);
  return `/${comps.map((_, i) => `${comps.slice(0, i + 1).join('-')}.slice`).join('/')}`;
}

export class FakeSystemdBus implements SystemdBus {
  readonly calls: FakeSystemdCall[] = [];
  /** Loaded units and their properties as last set. */
  readonly units = new Map<string, Map<string, UnitProperty['value']>>();
  readonly #root: string;
  readonly #systemdVersion: number;
  readonly #failures = new Map<Method, CgroupError>();
  readonly #results = new Map<'startTransientUnit' | 'stopUnit', JobResult[]>();

  constructor(options: { mountRoot: string; systemdVersion?: number }) {
    this.#root = options.mountRoot;
    this.#systemdVersion = options.systemdVersion ?? 252;
  }

  /** The next call of `method` fails as a D-Bus error `dbusError` would. */
  failNext(method: Method, dbusError: string): void {
    this.#failures.set(
      method,
      new CgroupError(`Cannot call ${method}: ${dbusError}`, {
        code: 'BERTH_CGROUP_SYSTEMD_BUS',
        dbusError,
      }),
    );
  }

  /** The next start or stop jobs end with `results`, in order (and change nothing). */
  nextJobResult(method: 'startTransientUnit' | 'stopUnit', ...results: JobResult[]): void {
    this.#results.set(method, [...(this.#results.get(method) ?? []), ...results]);
  }

  #forced(method: 'startTransientUnit' | 'stopUnit'): JobResult | undefined {
    return this.#results.get(method)?.shift();
  }

  #enter(call: FakeSystemdCall, signal: AbortSignal): void {
    signal.throwIfAborted();
    this.calls.push(call);
    const failure = this.#failures.get(call.method);
    if (failure !== undefined) {
      this.#failures.delete(call.method);
      throw failure;
    }
  }

  async startTransientUnit(
    name: string,
    _mode: 'replace' | 'fail',
    properties: readonly UnitProperty[],
    signal: AbortSignal,
  ): Promise<JobResult> {
    this.#enter({ method: 'startTransientUnit', unit: name, properties }, signal);
    const forced = this.#forced('startTransientUnit');
    if (forced !== undefined) return forced;
    if (this.units.has(name)) return 'exists';
    this.units.set(name, new Map(properties.map((p) => [p.name, p.value])));
    await mkdir(join(this.#root, expandSlice(name)), { recursive: true });
    return 'done';
  }

  async stopUnit(name: string, _mode: 'replace' | 'fail', signal: AbortSignal): Promise<JobResult> {
    this.#enter({ method: 'stopUnit', unit: name }, signal);
    const forced = this.#forced('stopUnit');
    if (forced !== undefined) return forced;
    const dir = join(this.#root, expandSlice(name));
    const inside = `${name.slice(0, -'.slice'.length)}-`;
    const loaded = [...this.units.keys()].filter((u) => u === name || u.startsWith(inside));
    if (loaded.length === 0) return 'missing';
    for (const u of loaded) this.units.delete(u);
    await rm(dir, { recursive: true, force: true });
    return 'done';
  }

  async setUnitProperties(
    name: string,
    _runtime: boolean,
    properties: readonly UnitProperty[],
    signal: AbortSignal,
  ): Promise<void> {
    this.#enter({ method: 'setUnitProperties', unit: name, properties }, signal);
    const unit = this.units.get(name);
    if (unit === undefined)
      throw new CgroupError(`Cannot call setUnitProperties: unit ${name} not loaded`, {
        code: 'BERTH_CGROUP_SYSTEMD_BUS',
        dbusError: 'org.freedesktop.systemd1.NoSuchUnit',
      });
    const dir = join(this.#root, expandSlice(name));
    for (const p of properties) {
      unit.set(p.name, p.value);
      const file = fileOf(p);
      if (file !== undefined) await writeFile(join(dir, file.name), file.value);
    }
  }

  async resetFailedUnit(name: string, signal: AbortSignal): Promise<void> {
    await Promise.resolve();
    this.#enter({ method: 'resetFailedUnit', unit: name }, signal);
  }

  async version(signal: AbortSignal): Promise<number> {
    await Promise.resolve();
    this.#enter({ method: 'version' }, signal);
    return this.#systemdVersion;
  }

  close(): void {
    // Nothing to release: no connection.
  }
}

const INFINITY = 2n ** 64n - 1n;

/** The cgroup2 file systemd writes for a property (cpu.max is left to the files' writer). */
function fileOf(p: UnitProperty): { name: string; value: string } | undefined {
  if (p.type !== 't') return undefined;
  const v = p.value === INFINITY ? 'max' : String(p.value);
  switch (p.name) {
    case 'CPUWeight':
      return { name: 'cpu.weight', value: v };
    case 'MemoryMax':
      return { name: 'memory.max', value: v };
    case 'TasksMax':
      return { name: 'pids.max', value: v };
    default:
      return undefined;
  }
}
