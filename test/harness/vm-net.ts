/**
 * The VM tier's network on the host: one host-only bridge per test run with the host's
 * address on it, and one tap per guest enslaved to it. Nothing is routed off the
 * machine: no NAT, no forwarding sysctl is touched, the guests' other NIC is QEMU's
 * user-mode network with restrict=on (ssh from the host only).
 */
import { run } from './exec.ts';

export interface VmNetwork {
  readonly bridge: string;
  /** e.g. "10.89.17": the host is .1, guest i is .(10 + i). */
  readonly prefix: string;
  readonly hostIp: string;
}

/** A free 10.89.x.0/24 (not on any interface of this machine). */
async function pickPrefix(): Promise<string> {
  const { stdout } = await run('ip', ['-o', '-4', 'addr', 'show']);
  for (let i = 0; i < 50; i++) {
    const prefix = `10.89.${1 + Math.floor(Math.random() * 250)}`;
    if (!stdout.includes(` ${prefix}.`)) return prefix;
  }
  throw new Error('Cannot pick a VM subnet: every 10.89.x.0/24 tried is in use on this machine');
}

/** Creates the bridge `bvm<id>` with the host's address, up. */
export async function createVmNetwork(id: string): Promise<VmNetwork> {
  const bridge = `bvm${id}`;
  const prefix = await pickPrefix();
  await run('ip', ['link', 'add', bridge, 'type', 'bridge']);
  await run('ip', ['addr', 'add', `${prefix}.1/24`, 'dev', bridge]);
  await run('ip', ['link', 'set', bridge, 'up']);
  return { bridge, prefix, hostIp: `${prefix}.1` };
}

/** A tap for one guest, on the bridge, up. */
export async function createTap(network: VmNetwork, tap: string): Promise<void> {
  await run('ip', ['tuntap', 'add', 'dev', tap, 'mode', 'tap']);
  await run('ip', ['link', 'set', tap, 'master', network.bridge]);
  await run('ip', ['link', 'set', tap, 'up']);
}

/** Deletes links that exist (taps, then the bridge); missing ones are fine. */
export async function deleteLinks(names: readonly string[]): Promise<void> {
  for (const name of names) {
    await run('ip', ['link', 'del', name], { okCodes: [0, 1] });
  }
}

/** Which of `names` still exist as links. */
export async function existingLinks(names: readonly string[]): Promise<string[]> {
  const { stdout } = await run('ip', ['-o', 'link', 'show']);
  const present = new Set(
    stdout
      .split('\n')
      .map((l) => /^\d+: ([^:@]+)/.exec(l)?.[1])
      .filter((n): n is string => n !== undefined),
  );
  return names.filter((n) => present.has(n));
}
