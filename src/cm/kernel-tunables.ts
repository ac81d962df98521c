/**
 * protectKernelDefaults: upstream's setupKernelTunables in "error" mode. The kubelet
 * relies on six kernel settings (overcommit always, the OOM killer instead of a
 * panic, reboot 10 s after a panic, panic on oops, root key quotas sized for a
 * container per key); with protectKernelDefaults the node's operator promises they are
 * set, and the kubelet refuses to start when one is not instead of changing it.
 *
 * With protectKernelDefaults false upstream writes them; berth does not touch the
 * host's sysctls (ARCHITECTURE.md, deliberate differences).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Upstream's desired values (k8s.io/component-helpers node/util/sysctl), in its order. */
export const KERNEL_TUNABLES: readonly (readonly [string, number])[] = [
  ['vm/overcommit_memory', 1],
  ['vm/panic_on_oom', 0],
  ['kernel/panic', 10],
  ['kernel/panic_on_oops', 1],
  ['kernel/keys/root_maxkeys', 1_000_000],
  ['kernel/keys/root_maxbytes', 25_000_000],
];

/**
 * One line per setting that differs or cannot be read, in upstream's words
 * ("invalid kernel flag: vm/overcommit_memory, expected value: 1, actual value: 0").
 */
export async function kernelTunableProblems(sysctlRoot = '/proc/sys'): Promise<string[]> {
  const problems: string[] = [];
  for (const [flag, expected] of KERNEL_TUNABLES) {
    let text: string;
    try {
      text = await readFile(join(sysctlRoot, flag), 'utf8');
    } catch (err) {
      problems.push(`open ${join(sysctlRoot, flag)}: ${(err as Error).message}`);
      continue;
    }
    const actual = Number.parseInt(text.trim(), 10);
    if (actual !== expected)
      problems.push(
        `invalid kernel flag: ${flag}, expected value: ${String(expected)}, actual value: ${Number.isNaN(actual) ? text.trim() : String(actual)}`,
      );
  }
  return problems;
}

/** Upstream's aggregate error text: one error alone, several in brackets. */
export function kernelTunablesMessage(problems: readonly string[]): string {
  const joined = problems.length === 1 ? (problems[0] ?? '') : `[${problems.join(', ')}]`;
  return `Failed to start ContainerManager: ${joined}`;
}
