/**
 * The container manager's cgroup layer (upstream pkg/kubelet/cm): berth creates the
 * QoS hierarchy `<cgroupRoot>/kubepods[/burstable|/besteffort]/pod<uid>` itself and
 * sets pod-level limits there, so a pod as a whole cannot exceed what it asked for
 * even while the runtime starts and stops its containers inside.
 *
 * A cgroup is named by its path relative to the hierarchy root, in cgroupfs form
 * ("/kubepods/burstable/pod1234"); the systemd driver's slice names are derived from
 * that (toSystemdName in pod-cgroups.ts) by the systemd manager (systemd.ts).
 */
import { BerthError } from '../util/errors.ts';

/** Pod-level limits, in upstream's units (ResourceConfig). */
export interface CgroupResources {
  /** cgroup v1 cpu.shares (v2: converted to cpu.weight). */
  readonly cpuShares?: number;
  /** CFS quota in microseconds per period; -1 = unlimited. */
  readonly cpuQuota?: number;
  readonly cpuPeriod?: number;
  /** Bytes; undefined = unlimited. */
  readonly memoryLimit?: number;
  /** Maximum number of processes; undefined = unlimited. */
  readonly pidsLimit?: number;
}

/** A cgroup's current settings and memory use (bytes). */
export interface CgroupState extends CgroupResources {
  readonly memoryUsage?: number;
}

export interface CgroupManager {
  /** 'v1' (per-controller hierarchies) or 'v2' (unified). */
  readonly version: 'v1' | 'v2';
  /** Creates the cgroup (and missing parents) and applies `resources`. Idempotent. */
  ensure(name: string, resources: CgroupResources): Promise<void>;
  /** Applies `resources` to an existing cgroup. */
  update(name: string, resources: CgroupResources): Promise<void>;
  exists(name: string): Promise<boolean>;
  /**
   * What the cgroup has now (cpu.shares from cpu.weight on v2; unlimited values left
   * out) and its memory use, for a resize: upstream's GetPodCgroupConfig and the usage
   * a lowered memory limit is checked against.
   */
  read(name: string): Promise<CgroupState>;
  /** PIDs in the cgroup and its children. */
  pids(name: string): Promise<number[]>;
  /** Removes the cgroup and its (empty) children. Missing: no error. */
  destroy(name: string): Promise<void>;
  /** Child cgroup names (full names) directly below `name`. */
  children(name: string): Promise<string[]>;
}

/**
 * - BERTH_CGROUP: a bad name, a missing cgroup, a cgroup file that cannot be written.
 * - BERTH_CGROUP_SYSTEMD_BUS: systemd could not be asked (no bus, no answer, a D-Bus error).
 * - BERTH_CGROUP_SYSTEMD_UNIT: systemd answered but the slice's job did not finish 'done'.
 */
export type CgroupErrorCode =
  'BERTH_CGROUP' | 'BERTH_CGROUP_SYSTEMD_BUS' | 'BERTH_CGROUP_SYSTEMD_UNIT';

export class CgroupError extends BerthError {
  /** The D-Bus error name systemd answered with, when it did. */
  readonly dbusError: string | undefined;

  constructor(
    message: string,
    options?: { cause?: unknown; code?: CgroupErrorCode; dbusError?: string },
  ) {
    super(options?.code ?? 'BERTH_CGROUP', message, options);
    this.dbusError = options?.dbusError;
  }
}
