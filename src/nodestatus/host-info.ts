/**
 * What the node is made of, read from the host: capacity (cpu, memory,
 * ephemeral-storage, hugepages) and the system facts of NodeSystemInfo. Behind an
 * interface so unit tests give fixed values.
 */
import { readdir, readFile, statfs } from 'node:fs/promises';
import { arch, cpus, release } from 'node:os';

export interface HostCapacity {
  /** Whole cores. */
  readonly cpu: number;
  readonly memoryBytes: number;
  /** Size of the filesystem holding the kubelet root dir. */
  readonly ephemeralStorageBytes: number;
  /** Page size (e.g. "2Mi") -> bytes reserved as huge pages. */
  readonly hugepages: Readonly<Record<string, number>>;
}

export interface HostSystemInfo {
  readonly machineID: string;
  readonly systemUUID: string;
  readonly bootID: string;
  readonly kernelVersion: string;
  readonly osImage: string;
  readonly operatingSystem: 'linux';
  readonly architecture: string;
}

export interface HostInfoProvider {
  capacity(): Promise<HostCapacity>;
  systemInfo(): Promise<HostSystemInfo>;
}

async function readTrim(path: string): Promise<string> {
  return (await readFile(path, 'utf8').catch(() => '')).trim();
}

/** Go's GOARCH names, which the kubernetes.io/arch label uses. */
export function goArch(nodeArch: string = arch()): string {
  return (
    (
      { x64: 'amd64', arm64: 'arm64', arm: 'arm', ppc64: 'ppc64le', s390x: 's390x' } as Record<
        string,
        string
      >
    )[nodeArch] ?? nodeArch
  );
}

/** Reads /proc, /sys and statfs of `rootDir`. */
export class LinuxHostInfo implements HostInfoProvider {
  readonly #rootDir: string;
  constructor(rootDir: string) {
    this.#rootDir = rootDir;
  }

  async capacity(): Promise<HostCapacity> {
    const meminfo = await readFile('/proc/meminfo', 'utf8');
    const memKiB = Number(/^MemTotal:\s+(\d+) kB/m.exec(meminfo)?.[1] ?? '0');
    const fs = await statfs(this.#rootDir);
    const hugepages: Record<string, number> = {};
    const dirs = await readdir('/sys/kernel/mm/hugepages').catch(() => []);
    for (const d of dirs) {
      const m = /^hugepages-(\d+)kB$/.exec(d);
      if (m?.[1] === undefined) continue;
      const sizeKiB = Number(m[1]);
      const pages = Number(await readTrim(`/sys/kernel/mm/hugepages/${d}/nr_hugepages`)) || 0;
      const name = sizeKiB >= 1024 * 1024 ? `${sizeKiB / (1024 * 1024)}Gi` : `${sizeKiB / 1024}Mi`;
      hugepages[name] = pages * sizeKiB * 1024;
    }
    return {
      cpu: cpus().length,
      memoryBytes: memKiB * 1024,
      ephemeralStorageBytes: fs.blocks * fs.bsize,
      hugepages,
    };
  }

  async systemInfo(): Promise<HostSystemInfo> {
    const osRelease = await readTrim('/etc/os-release');
    const pretty = /^PRETTY_NAME="?([^"\n]*)"?$/m.exec(osRelease)?.[1] ?? 'Linux';
    return {
      machineID: await readTrim('/etc/machine-id'),
      systemUUID: (await readTrim('/sys/class/dmi/id/product_uuid')).toLowerCase(),
      bootID: await readTrim('/proc/sys/kernel/random/boot_id'),
      kernelVersion: release(),
      osImage: pretty,
      operatingSystem: 'linux',
      architecture: goArch(),
    };
  }
}

/** Formats bytes as a Kubernetes quantity in Ki (the kubelet reports memory that way). */
export function toKi(bytes: number): string {
  return `${Math.floor(bytes / 1024)}Ki`;
}
