/**
 * Whether the host has swap on, as upstream's pkg/kubelet/util/swap reads it: /proc/swaps
 * has more than its header line. With failSwapOn (the default) the kubelet refuses to
 * start on such a host, since the memory limits and eviction assume no swap.
 */
import { readFile } from 'node:fs/promises';

/** Upstream's start-up error, word for word. */
export const SWAP_ON_MESSAGE =
  'running with swap on is not supported, please disable swap or set --fail-swap-on flag to false';

/** True when the content of /proc/swaps lists a swap area. */
export function swapOnAccordingTo(procSwaps: string): boolean {
  return procSwaps.trim().split('\n').length > 1;
}

/** Reads /proc/swaps; a host without it has no swap (as upstream assumes). */
export async function isSwapOn(path = '/proc/swaps'): Promise<boolean> {
  try {
    return swapOnAccordingTo(await readFile(path, 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}
