/**
 * The QEMU side of the VM test tier: the one machine definition shared by the golden
 * boot (hack/vm/golden.ts) and every guest (vm.ts) — a snapshot resumes only into the
 * same devices — a QMP client, and ssh into a guest.
 *
 * Why TCG: /dev/kvm here is a software nested mode that a stock kernel cannot use
 * (see the VM section of the test-environments reference), so everything is emulated
 * and every timeout in this tier is sized in minutes.
 */
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { run } from './exec.ts';

/** Memory and CPUs of every guest: fixed, because a saved machine resumes only as itself. */
export const GUEST_MEMORY_MIB = 2048;
export const GUEST_CPUS = 2;
/** The 9p tags: the repository (berth, its bundle, node_modules) and the build cache. */
export const SHARES = { berth: '/berth', cache: '/cache' } as const;

export interface MachineSpec {
  /** The image directory hack/vm/build-image.sh printed. */
  readonly image: string;
  /** The guest's disk: base.qcow2 at the golden boot, an overlay of it afterwards. */
  readonly disk: string;
  /** Host port forwarded to the guest's ssh on 127.0.0.1 (user-mode net, restrict=on). */
  readonly sshPort: number;
  /** The second NIC's backend: a tap on the host-only bridge, or none at the golden boot. */
  readonly tap?: string;
  readonly qmpSocket: string;
  readonly consoleLog: string;
  /** Resume from this saved state instead of booting. */
  readonly incoming?: string;
  readonly repoRoot: string;
  readonly cacheRoot: string;
}

/** qemu-system-x86_64's argv for a guest. */
export function qemuArgs(spec: MachineSpec): string[] {
  const net1 =
    spec.tap !== undefined
      ? `tap,id=n1,ifname=${spec.tap},script=no,downscript=no`
      : 'user,id=n1,restrict=on';
  return [
    '-name',
    'berth-vm',
    '-machine',
    'q35',
    '-accel',
    'tcg,thread=multi,tb-size=256',
    '-cpu',
    'max',
    '-m',
    String(GUEST_MEMORY_MIB),
    '-smp',
    String(GUEST_CPUS),
    '-nographic',
    '-no-reboot',
    '-kernel',
    join(spec.image, 'vmlinux'),
    '-initrd',
    join(spec.image, 'initrd.img'),
    '-append',
    'console=ttyS0 root=/dev/vda rw systemd.unified_cgroup_hierarchy=1 net.ifnames=0',
    '-drive',
    `file=${spec.disk},if=virtio,format=qcow2,cache=unsafe`,
    '-netdev',
    `user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:${spec.sshPort}-:22`,
    '-device',
    'virtio-net-pci,netdev=n0,mac=52:54:00:00:00:01',
    '-netdev',
    net1,
    // The snapshot fixes this MAC; each guest sets its own inside (vm.ts).
    '-device',
    'virtio-net-pci,netdev=n1,mac=52:54:00:00:01:01',
    '-virtfs',
    `local,path=${spec.repoRoot},mount_tag=berth,security_model=none,readonly=on`,
    '-virtfs',
    `local,path=${spec.cacheRoot},mount_tag=cache,security_model=none,readonly=on`,
    '-qmp',
    `unix:${spec.qmpSocket},server=on,wait=off`,
    '-serial',
    `file:${spec.consoleLog}`,
    '-monitor',
    'none',
    ...(spec.incoming !== undefined ? ['-incoming', `exec:cat ${spec.incoming}`] : []),
  ];
}

/** A QMP connection: one command at a time, events ignored. */
export class Qmp {
  readonly #socket: Socket;
  #buffer = '';
  #waiters: ((line: Record<string, unknown>) => void)[] = [];

  private constructor(socket: Socket) {
    this.#socket = socket;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.#buffer += chunk;
      let nl: number;
      while ((nl = this.#buffer.indexOf('\n')) >= 0) {
        const text = this.#buffer.slice(0, nl).trim();
        this.#buffer = this.#buffer.slice(nl + 1);
        if (text === '') continue;
        const msg = JSON.parse(text) as Record<string, unknown>;
        if ('event' in msg) continue;
        this.#waiters.shift()?.(msg);
      }
    });
    socket.on('error', () => undefined);
  }

  /** Connects (retrying while QEMU creates the socket) and negotiates capabilities. */
  static async open(path: string, timeoutMs = 60_000): Promise<Qmp> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const socket = await new Promise<Socket>((resolve, reject) => {
          const s = connect(path);
          s.once('connect', () => {
            resolve(s);
          });
          s.once('error', reject);
        });
        const qmp = new Qmp(socket);
        await qmp.#next(); // greeting
        await qmp.command('qmp_capabilities');
        return qmp;
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`Cannot reach QMP at ${path}`, { cause: err });
        await sleep(200);
      }
    }
  }

  #next(): Promise<Record<string, unknown>> {
    return new Promise((resolve) => {
      this.#waiters.push(resolve);
    });
  }

  async command(name: string, args?: Record<string, unknown>): Promise<unknown> {
    const reply = this.#next();
    this.#socket.write(JSON.stringify({ execute: name, ...(args && { arguments: args }) }) + '\n');
    const msg = await reply;
    if ('error' in msg) throw new Error(`QMP ${name} failed: ${JSON.stringify(msg['error'])}`);
    return msg['return'];
  }

  close(): void {
    this.#socket.destroy();
  }
}

/** Options every ssh call uses: the image's key, no host key bookkeeping (guests are clones). */
export function sshArgs(image: string, port: number): string[] {
  return [
    '-i',
    join(image, 'id_ed25519'),
    '-p',
    String(port),
    '-o',
    'StrictHostKeyChecking=no',
    '-o',
    'UserKnownHostsFile=/dev/null',
    '-o',
    'LogLevel=ERROR',
    '-o',
    'BatchMode=yes',
    '-o',
    'ConnectTimeout=20',
    '-o',
    'ServerAliveInterval=15',
    'root@127.0.0.1',
  ];
}

/** Runs a shell command in the guest as root; rejects on a non-zero exit. */
export async function sshRun(
  image: string,
  port: number,
  command: string,
  options: { input?: string; timeoutMs?: number; okCodes?: readonly number[] } = {},
): Promise<{ stdout: string; stderr: string; exitCode: number }> {
  return run('ssh', [...sshArgs(image, port), command], {
    timeoutMs: options.timeoutMs ?? 300_000,
    ...(options.input !== undefined && { input: options.input }),
    ...(options.okCodes !== undefined && { okCodes: options.okCodes }),
  });
}

/** Waits until the guest answers over ssh (a booting or resuming guest refuses at first). */
export async function waitForSsh(image: string, port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      await sshRun(image, port, 'true', { timeoutMs: 30_000 });
      return;
    } catch (err) {
      last = err;
      await sleep(1000);
    }
  }
  throw new Error(`Cannot reach the guest over ssh on 127.0.0.1:${port} in ${timeoutMs} ms`, {
    cause: last,
  });
}
