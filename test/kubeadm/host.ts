/**
 * What the kubeadm test needs from the host: kubeadm writes fixed, host-wide paths
 * (/etc/kubernetes, /var/lib/kubelet, /var/lib/etcd) and binds fixed ports, so one such
 * test may run on the machine at a time (a host-wide flock), and whatever it finds at
 * those paths is moved aside first and put back afterwards.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from '../harness/exec.ts';

/** The host-wide lock of the kubeadm test. */
export const KUBEADM_LOCK = '/run/berth-kubeadm.lock';

/** The paths `kubeadm reset` must leave empty. */
export const KUBEADM_PATHS = ['/etc/kubernetes', '/var/lib/kubelet', '/var/lib/etcd'] as const;
/**
 * The kubelet's default pod log directories: `kubeadm reset` stops the kubelet before it
 * removes the containers and never deletes these, so the pods' logs stay there with
 * upstream's kubelet as with berth; the test removes them itself.
 */
export const POD_LOG_PATHS = ['/var/log/pods', '/var/log/containers'] as const;
/** Every host path kubeadm or its kubelet writes. */
export const HOST_PATHS = [...KUBEADM_PATHS, ...POD_LOG_PATHS] as const;

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/**
 * A flock held by a child process (`flock -n <file> cat`) for as long as its stdin is
 * open: released by release(), and by the kernel if this process dies.
 */
export interface HeldLock {
  release(): Promise<void>;
}

export async function holdLock(file: string, what: string): Promise<HeldLock> {
  const child: ChildProcess = spawn('flock', ['-n', '-E', '75', file, 'cat'], {
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  // flock fails at once when the lock is held; cat waits on stdin when it was taken.
  const early = await new Promise<number | null>((resolve) => {
    const timer = setTimeout(() => {
      resolve(null);
    }, 500);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code ?? -1);
    });
  });
  if (early !== null)
    throw new Error(
      `Cannot take ${file} for ${what}: ${early === 75 ? 'another test or cluster holds it' : `flock exited ${String(early)}: ${stderr}`}`,
    );
  return {
    release: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.stdin?.end();
      await exited;
    },
  };
}

/**
 * Moves each existing host path into `backup`, recording each in `saved` as soon as it
 * moved, so that a failure half-way still restores what was moved.
 */
export async function saveHostPaths(backup: string, saved: string[]): Promise<void> {
  await mkdir(backup, { recursive: true });
  for (const path of HOST_PATHS) {
    if (!(await exists(path))) continue;
    await run('mv', ['-T', path, join(backup, path.replaceAll('/', '_'))]);
    saved.push(path);
  }
}

/** Removes what the test left at the host paths and moves the saved ones back. */
export async function restoreHostPaths(backup: string, saved: readonly string[]): Promise<void> {
  for (const path of HOST_PATHS) {
    await rm(path, { recursive: true, force: true });
    if (saved.includes(path))
      await run('mv', ['-T', join(backup, path.replaceAll('/', '_')), path]);
  }
  await rm(backup, { recursive: true, force: true });
}

/** Files (not directories) left under kubeadm's paths, and mounts below any host path. */
export async function hostLeftovers(): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      const path = join(dir, e.name);
      if (e.isDirectory()) await walk(path);
      else out.push(`${path} is left behind`);
    }
  };
  for (const path of KUBEADM_PATHS) await walk(path);
  const mountinfo = await readFile('/proc/self/mountinfo', 'utf8');
  for (const line of mountinfo.split('\n')) {
    const point = line.split(' ')[4] ?? '';
    if (HOST_PATHS.some((p) => point === p || point.startsWith(`${p}/`)))
      out.push(`mount ${point} is left behind`);
  }
  return out;
}

/**
 * The kubelet flags kubeadm wrote (KUBELET_KUBEADM_ARGS in kubeadm-flags.env), split
 * as the systemd drop-in's shell would split them (kubeadm quotes nothing inside).
 */
export function kubeadmFlags(envFile: string): string[] {
  const m = /^KUBELET_KUBEADM_ARGS="([^"]*)"$/m.exec(envFile);
  if (m?.[1] === undefined) throw new Error(`Cannot read KUBELET_KUBEADM_ARGS from:\n${envFile}`);
  return m[1].split(/\s+/).filter((a) => a !== '');
}
