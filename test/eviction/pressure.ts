/**
 * Helpers the eviction tests share: what the host has now (measured as berth measures
 * it), a small loop-mounted filesystem for disk pressure that cannot reach the host's
 * disk, and node-condition waits.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Node, Pod } from 'kubernetes-types/core/v1.js';
import type { BerthNode } from '../harness/berth-node.ts';
import type { Cluster } from '../harness/cluster.ts';
import { eventually, getJson } from '../harness/kube-helpers.ts';

export const Mi = 2 ** 20;
export const Gi = 2 ** 30;
export const run = promisify(execFile);

/** One /proc/meminfo field, in bytes. */
export async function meminfo(key: string): Promise<number> {
  const text = await readFile('/proc/meminfo', 'utf8');
  const line = text.split('\n').find((l) => l.startsWith(`${key}:`));
  return Number(/(\d+)/.exec(line ?? '')?.[1] ?? 0) * 1024;
}

/** memory.available as berth (and cAdvisor) measure it: MemFree + Inactive(file). */
export async function memoryAvailable(): Promise<number> {
  return (await meminfo('MemFree')) + (await meminfo('Inactive(file)'));
}

/** pid.available as berth measures it: pid_max minus the tasks now. */
export async function pidAvailable(): Promise<number> {
  const max = Number((await readFile('/proc/sys/kernel/pid_max', 'utf8')).trim());
  const tasks = Number(/\d+\/(\d+)/.exec(await readFile('/proc/loadavg', 'utf8'))?.[1] ?? 0);
  return max - tasks;
}

/** A MiB count Go prints in Mi (a multiple of 1024 would print as Gi). */
export const miText = (mi: number): string => `${mi % 1024 === 0 ? mi - 1 : mi}Mi`;

export function withResources(pod: Pod, resources: Record<string, Record<string, string>>): Pod {
  const [c] = pod.spec?.containers ?? [];
  if (c !== undefined) c.resources = resources;
  return pod;
}

export const condition = (node: Node | undefined, type: string): string | undefined =>
  node?.status?.conditions?.find((c) => c.type === type)?.status;

/** Waits for the node's `type` condition to have `status`; the Node then. */
export function waitCondition(
  cluster: Cluster,
  nodeName: string,
  type: string,
  status: string,
  timeoutMs: number,
): Promise<Node> {
  return eventually(
    `node ${nodeName} ${type}=${status}`,
    async () => {
      const n = await getJson<Node>(cluster, ['get', 'node', nodeName]);
      return condition(n, type) === status ? n : undefined;
    },
    timeoutMs,
  );
}

/** The last lines of berth's log that mention eviction or image GC, for failure messages. */
export async function evictionLog(logFile: string, lines = 15): Promise<string> {
  const log = await readFile(logFile, 'utf8').catch(() => '');
  return log
    .split('\n')
    .filter((l) => /viction|image-gc|garbage/i.test(l))
    .slice(-lines)
    .join('\n');
}

export interface SmallFs {
  readonly mountpoint: string;
  remove(): Promise<void>;
}

/** A `size` ext4 image loop-mounted in a temporary directory (root needed). */
export async function smallFs(size: string): Promise<SmallFs> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-smallfs-'));
  const image = join(dir, 'fs.img');
  const mountpoint = join(dir, 'mnt');
  await mkdir(mountpoint);
  await run('truncate', ['-s', size, image]);
  await run('mkfs.ext4', ['-q', '-F', image]);
  await run('mount', ['-o', 'loop', image, mountpoint]);
  return {
    mountpoint,
    remove: async () => {
      await run('umount', [mountpoint]).catch(() => run('umount', ['-l', mountpoint]));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The config line after which the eviction tests write their own settings. */
export const MARK = '# eviction settings (rewritten by the test)';

/** Replaces the settings after MARK in berth's config with `lines`, and restarts berth. */
export async function restartWith(berth: BerthNode, lines: readonly string[]): Promise<BerthNode> {
  const config = await readFile(berth.configFile, 'utf8');
  const at = config.indexOf(MARK);
  if (at < 0) throw new Error(`${berth.configFile} has no "${MARK}" line`);
  await writeFile(berth.configFile, [config.slice(0, at) + MARK, ...lines, ''].join('\n'));
  return berth.restart();
}
