/**
 * Guests of the VM test tier: QEMU machines (TCG emulation, systemd as PID 1, pure cgroup
 * v2) resumed from the image's golden state (hack/vm/build-image.sh) over a per-guest
 * qcow2 overlay, each with its own hostname, machine-id, MAC and address on a host-only
 * bridge, reached over ssh, with the repository (berth, its bundle, the pinned Node) and
 * the build cache (containerd, kube-proxy, test images) mounted read-only over 9p.
 *
 * Every guest has 2 GiB and 2 vCPUs and costs about 650 MB of host memory; everything
 * inside runs about 10x slower than on the host, so waits here are in minutes.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { REPO_ROOT, cacheDir } from './binaries.ts';
import { run } from './exec.ts';
import { freePort } from './net.ts';
import { ComponentProcess, isAlive } from './process.ts';
import { Qmp, qemuArgs, sshRun, waitForSsh, SHARES } from './vm-qemu.ts';
import { createTap, deleteLinks, existingLinks, type VmNetwork } from './vm-net.ts';

export interface Guest {
  /** Hostname and node name. */
  readonly name: string;
  readonly index: number;
  /** Address on the host-only bridge (eth1 inside). */
  readonly ip: string;
  readonly mac: string;
  readonly sshPort: number;
  /** Host directory: overlay disk, console and QEMU logs. */
  readonly dir: string;
  readonly consoleLog: string;
  readonly process: ComponentProcess;
  /** Runs `command` with sh -c as root in the guest; stdout, or throws on a non-zero exit. */
  sh(command: string, options?: { input?: string; timeoutMs?: number }): Promise<string>;
  /** Like sh, but resolves with the exit code (and output) whatever it is. */
  exec(
    command: string,
    options?: { input?: string; timeoutMs?: number },
  ): Promise<{ stdout: string; stderr: string; exitCode: number }>;
  /** Writes a file in the guest (parent directories made). */
  writeFile(path: string, content: string, mode?: number): Promise<void>;
  /** Waits until the machine has powered off (QEMU exits: -no-reboot). */
  waitForPowerOff(timeoutMs: number): Promise<void>;
}

export interface VmState {
  readonly root: string;
  readonly links: readonly string[];
  readonly processes: readonly { name: string; pid: number; logFile: string }[];
}

export const VM_STATE_FILE = 'vm-state.json';

/**
 * Builds the guest image on first use (minutes; cached under $BERTH_CACHE/vm) and returns
 * its directory.
 */
export async function guestImage(log: (m: string) => void = () => undefined): Promise<string> {
  log('vm: guest image (hack/vm/build-image.sh; builds on first use)');
  const { stdout } = await run('bash', [join(REPO_ROOT, 'hack/vm/build-image.sh')], {
    timeoutMs: 45 * 60_000,
  });
  const dir = stdout.trim().split('\n').pop() ?? '';
  await stat(join(dir, 'READY'));
  return dir;
}

export interface StartGuestsOptions {
  readonly image: string;
  readonly network: VmNetwork;
  /** Host directory of this run (overlays, logs, vm-state.json). */
  readonly root: string;
  readonly count: number;
  /** Guest names: <prefix>-<index> (default vm-<random>). */
  readonly namePrefix?: string;
  readonly log?: (message: string) => void;
  /** Told how to read the run's state before anything is made (teardown after a failure). */
  readonly onState?: (state: () => VmState) => void;
}

/** Resumes `count` guests from the golden state and makes each one itself. */
export async function startGuests(options: StartGuestsOptions): Promise<{
  guests: Guest[];
  state: () => VmState;
}> {
  const { image, network, root, count } = options;
  const log = options.log ?? (() => undefined);
  const prefix = options.namePrefix ?? `vm-${randomBytes(2).toString('hex')}`;
  const links: string[] = [network.bridge];
  const processes: ComponentProcess[] = [];
  const state = (): VmState => ({
    root,
    links: [...links],
    processes: processes.map((p) => ({ name: p.name, pid: p.pid, logFile: p.logFile })),
  });
  options.onState?.(state);
  const save = () => writeFile(join(root, VM_STATE_FILE), JSON.stringify(state(), null, 2));
  await mkdir(root, { recursive: true });
  const guests: Guest[] = [];
  for (let index = 0; index < count; index++) {
    const name = `${prefix}-${index}`;
    const dir = join(root, name);
    await mkdir(dir, { recursive: true });
    const tap = `t${network.bridge.slice(1)}${index}`.slice(0, 15);
    await createTap(network, tap);
    links.unshift(tap);
    const disk = join(dir, 'disk.qcow2');
    await run('qemu-img', [
      'create',
      '-q',
      '-f',
      'qcow2',
      '-F',
      'qcow2',
      '-b',
      join(image, 'base.qcow2'),
      disk,
    ]);
    const sshPort = await freePort();
    const consoleLog = join(dir, 'console.log');
    const proc = ComponentProcess.start({
      name: `qemu-${name}`,
      command: 'qemu-system-x86_64',
      args: qemuArgs({
        image,
        disk,
        sshPort,
        tap,
        qmpSocket: join(dir, 'qmp.sock'),
        consoleLog,
        incoming: join(image, 'golden.state'),
        repoRoot: REPO_ROOT,
        cacheRoot: cacheDir(),
      }),
      logFile: join(dir, 'qemu.log'),
    });
    processes.push(proc);
    await save();
    const ip = `${network.prefix}.${10 + index}`;
    const mac = `52:54:00:${randomBytes(3).toString('hex').match(/../g)?.join(':') ?? '00:00:00'}`;
    guests.push(
      makeGuest({ name, index, ip, mac, sshPort, dir, consoleLog, process: proc, image }),
    );
  }
  await Promise.all(
    guests.map(async (g) => {
      await resume(join(g.dir, 'qmp.sock'));
      await waitForSsh(image, g.sshPort, 300_000).catch(async (err: unknown) => {
        throw new Error(`guest ${g.name} did not come up:\n${await g.process.tail()}`, {
          cause: err,
        });
      });
      await personalize(g, network);
      log(`vm: ${g.name} up on ${g.ip} (ssh 127.0.0.1:${g.sshPort})`);
    }),
  );
  return { guests, state };
}

/**
 * Waits for the golden state to be loaded and starts the CPUs: the state was saved from
 * a stopped machine, so QEMU leaves the guest paused after loading it.
 */
async function resume(qmpSocket: string): Promise<void> {
  const qmp = await Qmp.open(qmpSocket, 300_000);
  try {
    const deadline = Date.now() + 600_000;
    for (;;) {
      const m = (await qmp.command('query-migrate')) as { status?: string };
      if (m.status === 'completed') break;
      if (m.status === 'failed' || Date.now() > deadline)
        throw new Error(`Cannot load the golden state: migration ${String(m.status)}`);
      await sleep(500);
    }
    const s = (await qmp.command('query-status')) as { running?: boolean };
    if (s.running !== true) await qmp.command('cont');
  } finally {
    qmp.close();
  }
}

/** Clock, hostname, machine-id, MAC and address, then the 9p shares (after the resume). */
async function personalize(g: Guest, network: VmNetwork): Promise<void> {
  const machineId = randomBytes(16).toString('hex');
  const mount = (tag: string, at: string): string =>
    `mountpoint -q ${at} || mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 ${tag} ${at}`;
  await g.sh(
    [
      'set -e',
      // The golden state's clock is the build's: TLS certificates made now would not be valid yet.
      `date -s @${(Date.now() / 1000).toFixed(3)} >/dev/null`,
      `echo ${g.name} > /etc/hostname`,
      `hostname ${g.name}`,
      `echo '${g.ip} ${g.name}' >> /etc/hosts`,
      `echo ${machineId} > /etc/machine-id`,
      'ip link set eth1 down',
      `ip link set eth1 address ${g.mac}`,
      'ip addr flush dev eth1',
      `ip addr add ${g.ip}/24 dev eth1`,
      'ip link set eth1 up',
      mount('berth', SHARES.berth),
      mount('cache', SHARES.cache),
    ].join('\n'),
  );
  // The bridge answers before the guest's address is usable for a moment (DAD, ARP).
  await g.sh(`ping -c1 -W5 ${network.hostIp} >/dev/null || ping -c1 -W10 ${network.hostIp}`);
}

function makeGuest(p: {
  name: string;
  index: number;
  ip: string;
  mac: string;
  sshPort: number;
  dir: string;
  consoleLog: string;
  process: ComponentProcess;
  image: string;
}): Guest {
  const exec: Guest['exec'] = (command, options = {}) =>
    sshRun(p.image, p.sshPort, command, { ...options, okCodes: range(256) });
  return {
    ...p,
    exec,
    async sh(command, options = {}) {
      const r = await exec(command, options);
      if (r.exitCode !== 0) {
        throw new Error(
          `Command failed in guest ${p.name} (exit ${r.exitCode}): ${command}\n${r.stderr.trim()}\n${r.stdout.trim()}`,
        );
      }
      return r.stdout;
    },
    async writeFile(path, content, mode = 0o644) {
      const dir = path.slice(0, path.lastIndexOf('/')) || '/';
      const r = await exec(
        `mkdir -p '${dir}' && cat > '${path}.tmp' && chmod ${mode.toString(8)} '${path}.tmp' && mv '${path}.tmp' '${path}'`,
        { input: content },
      );
      if (r.exitCode !== 0) throw new Error(`Cannot write ${path} in ${p.name}: ${r.stderr}`);
    },
    async waitForPowerOff(timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while (p.process.alive()) {
        if (Date.now() > deadline)
          throw new Error(`guest ${p.name} still running after ${timeoutMs} ms`);
        await sleep(500);
      }
    },
  };
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_v, i) => i);
}

/** Stops every guest (QEMU killed: the guests are disposable), removes taps, bridge, overlays. */
export async function teardownVms(state: VmState): Promise<void> {
  for (const p of [...state.processes].reverse()) {
    await ComponentProcess.adopt(p.name, p.pid, p.logFile).stop(5_000);
  }
  await deleteLinks(state.links);
  await rm(state.root, { recursive: true, force: true });
}

/** What survived teardownVms: QEMU processes, links, the run's directory and overlays. */
export async function findVmLeaks(state: VmState): Promise<string[]> {
  const leaks: string[] = [];
  for (const p of state.processes) if (isAlive(p.pid)) leaks.push(`process ${p.name} (${p.pid})`);
  for (const pid of await qemuPidsUnder(state.root)) leaks.push(`qemu process ${pid}`);
  for (const l of await existingLinks(state.links)) leaks.push(`link ${l}`);
  if (
    await stat(state.root).then(
      () => true,
      () => false,
    )
  )
    leaks.push(`directory ${state.root}`);
  return leaks;
}

async function qemuPidsUnder(root: string): Promise<number[]> {
  const out: number[] = [];
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const cmd = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmd.startsWith('qemu-system') && cmd.includes(root) && isAlive(pid)) out.push(pid);
  }
  return out;
}
