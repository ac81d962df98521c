/**
 * Stops the node's pods for a shutdown, by priority group (upstream's podManager in
 * nodeshutdown_manager.go): groups from low to high priority, each given its own share
 * of the grace period. A group's pods are all asked to stop at once; the next group
 * starts when they have all stopped or the share is over, whichever comes first.
 */
import type { Pod, PodCondition, PodStatus } from 'kubernetes-types/core/v1.js';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import {
  NODE_SHUTDOWN_MESSAGE,
  NODE_SHUTDOWN_REASON,
  type KillPodFunc,
  type ShutdownGracePeriodByPodPriority,
} from './types.ts';

/** scheduling.DefaultPriorityWhenNoDefaultClassExists and SystemCriticalPriority. */
const DEFAULT_PRIORITY = 0;
const SYSTEM_CRITICAL_PRIORITY = 2_000_000_000;

/**
 * Upstream's migrateConfig: shutdownGracePeriod and shutdownGracePeriodCriticalPods as
 * two groups (ordinary pods get the difference, critical pods the rest); none when the
 * feature is off (period 0) or the periods make no sense.
 */
export function migrateConfig(
  shutdownGracePeriodMs: number,
  criticalPodsMs: number,
): ShutdownGracePeriodByPodPriority[] {
  if (shutdownGracePeriodMs === 0) return [];
  const defaultPriority = shutdownGracePeriodMs - criticalPodsMs;
  if (defaultPriority < 0) return [];
  const criticalPriority = shutdownGracePeriodMs - defaultPriority;
  if (criticalPriority < 0) return [];
  // Whole seconds, as upstream's int64(d / time.Second).
  return [
    { priority: DEFAULT_PRIORITY, shutdownGracePeriodSeconds: Math.trunc(defaultPriority / 1000) },
    {
      priority: SYSTEM_CRITICAL_PRIORITY,
      shutdownGracePeriodSeconds: Math.trunc(criticalPriority / 1000),
    },
  ];
}

export interface PodShutdownGroup extends ShutdownGracePeriodByPodPriority {
  readonly pods: Pod[];
}

/**
 * Upstream's groupByPriority over periods sorted low to high: a pod joins the highest
 * group whose priority is at most its own; pods below the lowest join the lowest.
 */
export function groupByPriority(
  periods: readonly ShutdownGracePeriodByPodPriority[],
  pods: readonly Pod[],
): PodShutdownGroup[] {
  const groups: PodShutdownGroup[] = periods.map((p) => ({ ...p, pods: [] }));
  if (groups.length === 0) return groups;
  for (const pod of pods) {
    const priority = pod.spec?.priority ?? 0;
    let index = groups.findIndex((g) => g.priority >= priority);
    if (index === -1) index = groups.length - 1;
    else if (index > 0 && (groups[index]?.priority ?? 0) > priority) index--;
    groups[index]?.pods.push(pod);
  }
  return groups;
}

/** The sum of every group's share (what logind's delay must allow), in seconds. */
export function periodRequestedSeconds(
  periods: readonly ShutdownGracePeriodByPodPriority[],
): number {
  return periods.reduce((sum, p) => sum + p.shutdownGracePeriodSeconds, 0);
}

/**
 * The status a pod stopped for a shutdown ends with (upstream's status function): Failed
 * unless it already succeeded, reason Terminated, and the DisruptionTarget condition.
 */
export function shutdownStatus(status: PodStatus, now: string, generation?: number): PodStatus {
  const previous = status.conditions?.find((c) => c.type === 'DisruptionTarget');
  const condition: PodCondition = {
    type: 'DisruptionTarget',
    status: 'True',
    reason: 'TerminationByKubelet',
    message: NODE_SHUTDOWN_MESSAGE,
    lastTransitionTime: previous?.status === 'True' ? (previous.lastTransitionTime ?? now) : now,
    ...(generation !== undefined && { observedGeneration: generation }),
  };
  return {
    ...status,
    phase: status.phase === 'Succeeded' ? 'Succeeded' : 'Failed',
    reason: NODE_SHUTDOWN_REASON,
    message: NODE_SHUTDOWN_MESSAGE,
    conditions: [
      ...(status.conditions ?? []).filter((c) => c.type !== 'DisruptionTarget'),
      condition,
    ],
  };
}

function podName(pod: Pod): string {
  return `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
}

export interface PodKillerOptions {
  /** Sorted by priority, low to high. */
  readonly periods: readonly ShutdownGracePeriodByPodPriority[];
  readonly killPod: KillPodFunc;
  readonly clock: Clock;
  readonly logger: Logger;
}

/** Stops `pods` group by group; resolves when the last group is done or `signal` aborts. */
export async function killPods(
  o: PodKillerOptions,
  pods: readonly Pod[],
  signal: AbortSignal,
): Promise<void> {
  for (const group of groupByPriority(o.periods, pods)) {
    if (signal.aborted) return;
    // No pods in this range: do not wait out its share.
    if (group.pods.length === 0) continue;
    const share = new AbortController();
    const groupSignal = AbortSignal.any([signal, share.signal]);
    const kills = group.pods.map(async (pod) => {
      let grace = group.shutdownGracePeriodSeconds;
      const own = pod.spec?.terminationGracePeriodSeconds;
      // A pod asking for less than its group's share gets what it asked for.
      if (own != null && own <= grace) grace = own;
      o.logger.debug('Shutdown manager killing pod with gracePeriod', {
        pod: podName(pod),
        gracePeriod: grace,
      });
      try {
        await o.killPod(
          pod,
          grace,
          (status) =>
            shutdownStatus(status, new Date(o.clock.now()).toISOString(), pod.metadata?.generation),
          groupSignal,
        );
        o.logger.debug('Shutdown manager finished killing pod', { pod: podName(pod) });
      } catch (err) {
        o.logger.debug('Shutdown manager failed killing pod', {
          pod: podName(pod),
          err: String(err),
        });
      }
    });
    const timer = o.clock
      .sleep(group.shutdownGracePeriodSeconds * 1000, groupSignal)
      .then(() => 'timeout' as const)
      .catch(() => 'aborted' as const);
    const outcome = await Promise.race([Promise.all(kills).then(() => 'done' as const), timer]);
    share.abort();
    if (outcome === 'done') {
      o.logger.debug('Done waiting for all pods in group to terminate', {
        gracePeriod: group.shutdownGracePeriodSeconds,
        priority: group.priority,
      });
    } else if (outcome === 'timeout') {
      o.logger.debug('Shutdown manager pod killing time out', {
        gracePeriod: group.shutdownGracePeriodSeconds,
        priority: group.priority,
      });
    }
  }
}
