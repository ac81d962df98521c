/**
 * CrashLoopBackOff as the plan sees it: which containers to hold back this round and
 * what their waiting state says. The delays themselves live in berth's Backoff
 * (src/util/backoff.ts: 10 s doubling to 300 s, reset after 10 min without a crash);
 * the sync loop records a failure there each time it restarts an exited container.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import { formatGoDuration } from '../config/duration.ts';
import { podDescription } from '../container/format.ts';
import { hashContainer, sameContainerHash } from '../container/container-hash.ts';
import type { RuntimeContainer, RuntimePodStatus } from '../container/pod-status.ts';
import { specContainer } from './pod-sandbox.ts';

/** The part of berth's Backoff the plan reads (keys from {@link containerBackoffKey}). */
export interface BackoffReader {
  /** Ms until the key may be tried again. */
  remaining(key: string): number;
  /**
   * The key's whole current delay, counted from the container's exit (upstream's
   * IsInBackOffSince); without it `remaining` (from the last restart) is used.
   */
  current?(key: string): number;
}

/** Why a container that should run is not being started this round. */
export type WaitingReason = 'CrashLoopBackOff';

/** A container held back this round, as its waiting state should show. */
export interface WaitingContainer {
  readonly reason: WaitingReason;
  /** Upstream's wording: `back-off 20s restarting failed container=main pod=name_ns(uid)`. */
  readonly message: string;
  /** When (ms since the epoch) the container may start: resync the pod then. */
  readonly retryAt: number;
}

/**
 * The back-off key of a pod's container: `${podUid}_${containerName}_${image}`. The image
 * is part of it as in upstream's GetBackoffKey, so a container whose image was changed
 * (say `kubectl set image` to fix the crash) starts a fresh back-off.
 */
export function containerBackoffKey(podUid: string, containerName: string, image: string): string {
  return `${podUid}_${containerName}_${image}`;
}

/** What {@link holdBackCrashLooping} reads besides the names. */
export interface CrashLoopInput {
  readonly pod: Pod;
  readonly status: RuntimePodStatus;
  readonly now: number;
  readonly backoff: BackoffReader;
}

/**
 * `names` without the containers still backing off, each of which gets an entry in
 * `waiting`. Only a container whose newest exited instance ran the current spec is in
 * a crash loop: a first start, a restart after an unknown state, or a start after the
 * spec changed is never held back.
 */
export function holdBackCrashLooping(
  names: readonly string[],
  { pod, status, now, backoff }: CrashLoopInput,
  waiting: Record<string, WaitingContainer>,
): string[] {
  const uid = pod.metadata?.uid ?? status.uid;
  return names.filter((name) => {
    const key = containerBackoffKey(uid, name, specContainer(pod, name)?.image ?? '');
    const crashed = crashedWithCurrentSpec(pod, status, name);
    if (crashed === undefined) return true;
    // The delay set at the last restart, counted from the exit that followed it.
    const current = backoff.current?.(key) ?? 0;
    const remaining =
      (current > 0 ? remainingSinceExit(crashed, current, now) : undefined) ??
      backoff.remaining(key);
    if (remaining <= 0) return true;
    const delay = current > 0 ? current : remaining;
    waiting[name] = {
      reason: 'CrashLoopBackOff',
      message: `back-off ${formatGoDuration(delay)} restarting failed container=${name} pod=${podDescription(pod, status)}`,
      retryAt: now + remaining,
    };
    return false;
  });
}

/**
 * Upstream's IsInBackOffSince(key, finishedAt): the delay runs from when the container
 * exited, not from when it was last started, so a container that ran for a while still
 * waits the whole delay after its exit. Capped at the delay, so a wall clock stepped
 * back does not hold a container for the step as well.
 */
function remainingSinceExit(
  crashed: RuntimeContainer,
  delay: number,
  now: number,
): number | undefined {
  if (crashed.finishedAt === undefined) return undefined;
  return Math.min(delay, Math.max(0, crashed.finishedAt + delay - now));
}

/** The newest exited instance of `name`, when it ran the current spec (else undefined). */
function crashedWithCurrentSpec(
  pod: Pod,
  status: RuntimePodStatus,
  name: string,
): RuntimeContainer | undefined {
  let crashed: RuntimeContainer | undefined;
  for (const c of status.containers) {
    if (c.name !== name || c.state !== 'exited') continue;
    if (crashed === undefined || c.createdAt > crashed.createdAt) crashed = c;
  }
  if (crashed === undefined) return undefined;
  const container = specContainer(pod, name);
  return container === undefined || sameContainerHash(crashed.hash, hashContainer(container))
    ? crashed
    : undefined;
}
