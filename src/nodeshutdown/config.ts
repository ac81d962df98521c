/**
 * Which priority groups the shutdown manager uses (upstream's NewManager and
 * newPodManager): shutdownGracePeriodByPodPriority when set and its gate is on, else
 * shutdownGracePeriod / shutdownGracePeriodCriticalPods as two groups. No groups: the
 * feature is off (shutdownGracePeriod 0, the default) and berth never touches D-Bus.
 */
import { migrateConfig } from './pod-manager.ts';
import type { ShutdownGracePeriodByPodPriority } from './types.ts';

export interface ShutdownConfig {
  readonly shutdownGracePeriodMs: number;
  readonly shutdownGracePeriodCriticalPodsMs: number;
  readonly shutdownGracePeriodByPodPriority: readonly ShutdownGracePeriodByPodPriority[];
  readonly featureGates: Readonly<Record<string, boolean | undefined>>;
}

/** Sorted low to high priority; empty when graceful shutdown is off. */
export function shutdownPeriods(c: ShutdownConfig): ShutdownGracePeriodByPodPriority[] {
  // Both gates are beta and on by default since v1.21 / v1.24.
  if (c.featureGates['GracefulNodeShutdown'] === false) return [];
  const byPriority = c.featureGates['GracefulNodeShutdownBasedOnPodPriority'] !== false;
  const periods =
    byPriority && c.shutdownGracePeriodByPodPriority.length > 0
      ? [...c.shutdownGracePeriodByPodPriority]
      : migrateConfig(c.shutdownGracePeriodMs, c.shutdownGracePeriodCriticalPodsMs);
  return periods.sort((a, b) => a.priority - b.priority);
}
