/**
 * Tears a test cluster down completely from its recorded state, and finds anything
 * that outlived it: processes, mounts, cgroups, the bridge, kube-proxy's iptables chains
 * and the cluster directory.
 * Works from cluster-state.json alone, so `make demo-stop` can clean up a cluster that
 * an earlier process started.
 */
import { readdir, readFile, rm, rmdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { GrpcCriClient } from '../../src/cri/index.ts';
import { run } from './exec.ts';
import { cleanupKubeProxy, kubeProxyLeaks, type KubeProxyState } from './kube-proxy.ts';
import { ComponentProcess, isAlive } from './process.ts';

export interface ClusterState {
  readonly id: string;
  readonly root: string;
  readonly bridge: string;
  /** Cgroup path (same in every v1 hierarchy) under which all pods of the cluster live. */
  readonly cgroupRoot: string;
  readonly runtimeSocket: string;
  /** Present when the cluster ran kube-proxy (its iptables chains are host-global). */
  readonly kubeProxy?: KubeProxyState;
  readonly processes: readonly {
    readonly name: string;
    readonly pid: number;
    readonly logFile: string;
  }[];
}

const CGROUP_FS = '/sys/fs/cgroup';

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Mount points (unescaped) of this mount namespace. */
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

/** PIDs whose command line mentions `needle` (e.g. the cluster root: shims, runtime). */
async function pidsMentioning(needle: string): Promise<number[]> {
  const out: number[] = [];
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    const cmd = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmd.includes(needle) && isAlive(pid)) out.push(pid);
  }
  return out;
}

/** Every cgroup directory of the cluster, deepest first, across all hierarchies. */
async function cgroupDirs(cgroupRoot: string): Promise<string[]> {
  const dirs: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const e of entries) if (e.isDirectory()) await walk(join(dir, e.name));
    dirs.push(dir);
  };
  for (const hierarchy of await readdir(CGROUP_FS).catch(() => [])) {
    const top = join(CGROUP_FS, hierarchy, cgroupRoot);
    if (await exists(top)) await walk(top);
  }
  return dirs;
}

async function cgroupPids(dirs: readonly string[]): Promise<number[]> {
  const pids = new Set<number>();
  for (const d of dirs) {
    const text = await readFile(join(d, 'cgroup.procs'), 'utf8').catch(() => '');
    for (const l of text.split('\n')) if (l !== '') pids.add(Number(l));
  }
  return [...pids];
}

function kill(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Gone already.
  }
}

/** Removes every pod sandbox through CRI, so CNI DEL runs and shims exit cleanly. */
async function removeSandboxes(socket: string, log: (m: string) => void): Promise<void> {
  if (!(await exists(socket))) return;
  const client = new GrpcCriClient(socket, { defaultTimeoutMs: 15_000 });
  try {
    const { items } = await client.runtime.listPodSandbox({});
    for (const sandbox of items) {
      await client.runtime.stopPodSandbox({ podSandboxId: sandbox.id }).catch((e: unknown) => {
        log(`stop sandbox ${sandbox.id}: ${String(e)}`);
      });
      await client.runtime.removePodSandbox({ podSandboxId: sandbox.id }).catch((e: unknown) => {
        log(`remove sandbox ${sandbox.id}: ${String(e)}`);
      });
    }
  } catch (err) {
    log(`listing sandboxes failed, falling back to force cleanup: ${String(err)}`);
  } finally {
    client.close();
  }
}

export async function teardownCluster(
  state: ClusterState,
  log: (m: string) => void = () => undefined,
): Promise<void> {
  await removeSandboxes(state.runtimeSocket, log);
  // Reverse start order: clients of the apiserver first, etcd and the runtime last.
  for (const p of [...state.processes].reverse()) {
    await ComponentProcess.adopt(p.name, p.pid, p.logFile).stop(10_000);
  }
  // Anything left: shims (their argv names the socket under root) and pod processes.
  for (let round = 0; round < 5; round++) {
    const pids = [
      ...(await pidsMentioning(state.root)),
      ...(await cgroupPids(await cgroupDirs(state.cgroupRoot))),
    ];
    if (pids.length === 0) break;
    pids.forEach(kill);
    await sleep(200);
  }
  // Only once no kube-proxy of this cluster runs: it would recreate what this removes.
  if (state.kubeProxy !== undefined) await cleanupKubeProxy(state.kubeProxy, log);
  const mounts = (await mountPoints()).filter(
    (m) => m === state.root || m.startsWith(`${state.root}/`),
  );
  for (const m of mounts.sort((a, b) => b.length - a.length)) {
    await run('umount', [m]).catch(() =>
      run('umount', ['-l', m]).catch((e: unknown) => {
        log(`umount ${m}: ${String(e)}`);
      }),
    );
  }
  await run('ip', ['link', 'del', state.bridge]).catch(() => undefined);
  for (const d of await cgroupDirs(state.cgroupRoot)) {
    await rmdir(d).catch((e: unknown) => {
      log(`rmdir ${d}: ${String(e)}`);
    });
  }
  await rm(state.root, { recursive: true, force: true, maxRetries: 3 });
}

/** What of the cluster still exists; empty when teardown was complete. */
export async function findLeaks(state: ClusterState): Promise<string[]> {
  const leaks: string[] = [];
  for (const p of state.processes)
    if (isAlive(p.pid)) leaks.push(`process ${p.name} (pid ${p.pid}) is still running`);
  for (const pid of await pidsMentioning(state.root))
    leaks.push(`process ${pid} still refers to ${state.root}`);
  for (const m of await mountPoints()) {
    if (m === state.root || m.startsWith(`${state.root}/`))
      leaks.push(`mount ${m} is still mounted`);
  }
  for (const d of await cgroupDirs(state.cgroupRoot)) leaks.push(`cgroup ${d} still exists`);
  const link = await run('ip', ['-o', 'link', 'show', state.bridge]).then(
    () => true,
    () => false,
  );
  if (link) leaks.push(`bridge ${state.bridge} still exists`);
  if (state.kubeProxy !== undefined) leaks.push(...(await kubeProxyLeaks(state.kubeProxy)));
  if (await exists(state.root)) leaks.push(`directory ${state.root} still exists`);
  return leaks;
}
