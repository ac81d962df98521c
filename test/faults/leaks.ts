/**
 * What a node agent left behind for pods the API no longer has: ready sandboxes and
 * running containers in the runtime, volume mounts and pod directories under its root
 * directory, pod cgroups, and network namespaces the runtime still has mounted for
 * sandboxes that are not ready. Empty when nothing leaked.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { runtimePods } from './agent.ts';

async function mountPoints(): Promise<string[]> {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) =>
      (l.split(' ')[4] ?? '').replace(/\\(\d{3})/g, (_m, o: string) =>
        String.fromCharCode(parseInt(o, 8)),
      ),
    );
}

/** Pod cgroup directories (pod<uid>) under the node's cgroup root, in every v1 hierarchy. */
async function podCgroups(cgroupRoot: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (dir: string, depth: number): Promise<void> => {
    if (depth > 4) return;
    for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      if (!e.isDirectory()) continue;
      const m = /^pod([0-9a-f-]{36})$/.exec(e.name.replaceAll('_', '-'));
      if (m?.[1] !== undefined) out.set(join(dir, e.name), m[1]);
      else await walk(join(dir, e.name), depth + 1);
    }
  };
  for (const h of await readdir('/sys/fs/cgroup').catch(() => []))
    await walk(join('/sys/fs/cgroup', h, cgroupRoot), 0);
  return out;
}

export interface LeakScope {
  /** CRI socket of the runtime. */
  readonly socket: string;
  /** The agent's --root-dir (pods/<uid> under it). */
  readonly rootDir: string;
  readonly cgroupRoot: string;
  /** containerd's state directory (netns mounts live under it here). */
  readonly runtimeStateDir: string;
  /** UIDs of the pods the API binds to the node. */
  readonly liveUids: ReadonlySet<string>;
}

export async function findPodLeaks(scope: LeakScope): Promise<string[]> {
  const leaks: string[] = [];
  const rt = await runtimePods(scope.socket);
  let readySandboxes = 0;
  for (const [uid, e] of rt) {
    readySandboxes += e.readySandboxes.length;
    if (scope.liveUids.has(uid)) {
      if (e.readySandboxes.length > 1)
        leaks.push(`pod ${uid}: ${e.readySandboxes.length} ready sandboxes`);
      continue;
    }
    if (e.readySandboxes.length > 0) leaks.push(`sandbox of deleted pod ${uid} still ready`);
    if (e.runningContainers.length > 0)
      leaks.push(`${e.runningContainers.length} containers of deleted pod ${uid} still running`);
  }
  const mounts = await mountPoints();
  const podsDir = join(scope.rootDir, 'pods');
  for (const m of mounts) {
    if (!m.startsWith(`${podsDir}/`)) continue;
    const uid = m.slice(podsDir.length + 1).split('/')[0] ?? '';
    if (!scope.liveUids.has(uid)) leaks.push(`mount ${m} of deleted pod ${uid}`);
  }
  for (const uid of await readdir(podsDir).catch(() => [])) {
    if (!scope.liveUids.has(uid)) leaks.push(`pod directory ${join(podsDir, uid)}`);
  }
  for (const [dir, uid] of await podCgroups(scope.cgroupRoot)) {
    if (!scope.liveUids.has(uid)) leaks.push(`cgroup ${dir}`);
  }
  const netns = mounts.filter(
    (m) => m.startsWith(`${scope.runtimeStateDir}/`) && m.includes('/netns/'),
  );
  if (netns.length > readySandboxes)
    leaks.push(`${netns.length} netns mounted for ${readySandboxes} ready sandboxes`);
  return leaks;
}
