/**
 * CRI hugepage limits of a container, as upstream sets them: one limit for every page
 * size the node has, 0 unless the container's limits name that size, so a container
 * cannot use pages it did not ask for.
 */
import type { Container } from 'kubernetes-types/core/v1.js';
import { cri } from '../cri/index.ts';
import { parseQuantity } from '../util/quantity.ts';

const PREFIX = 'hugepages-';
const UNITS = ['B', 'KB', 'MB', 'GB', 'TB', 'PB'] as const;

/** A page size in bytes as the runtime's cgroup files name it: 2097152 -> "2MB". */
export function pageSizeName(bytes: number): string {
  let size = bytes;
  let unit = 0;
  while (size >= 1024 && size % 1024 === 0 && unit < UNITS.length - 1) {
    size /= 1024;
    unit++;
  }
  return `${size}${UNITS[unit] ?? 'B'}`;
}

/**
 * The limits for `container`; `nodeSizes` are the node's hugepages-<size> resource
 * names (from its capacity). A size that does not parse is left out, as upstream does.
 */
export function hugepageLimits(
  container: Container,
  nodeSizes: readonly string[],
): cri.HugepageLimit[] {
  const limits = new Map<string, bigint>();
  const sizeOf = (resource: string): string | undefined => {
    if (!resource.startsWith(PREFIX)) return undefined;
    try {
      const bytes = parseQuantity(resource.slice(PREFIX.length));
      return bytes > 0 && Number.isInteger(bytes) ? pageSizeName(bytes) : undefined;
    } catch {
      return undefined;
    }
  };
  for (const resource of nodeSizes) {
    const size = sizeOf(resource);
    if (size !== undefined) limits.set(size, 0n);
  }
  // Limits only: the API requires hugepage requests to equal limits.
  for (const [resource, quantity] of Object.entries(container.resources?.limits ?? {})) {
    const size = sizeOf(resource);
    if (size === undefined) continue;
    limits.set(size, BigInt(Math.floor(parseQuantity(quantity))));
  }
  return [...limits].map(([pageSize, limit]) => ({ pageSize, limit }));
}
