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

/** The part of berth's Backoff the plan reads (keys from {@link containerBackoffKey}). */
export interface BackoffReader {
  inBackoff(key: string): boolean;
  /** Ms until the key may be tried again. */
  remaining(key: string): number;
  /** The key's whole current delay, for the message; `remaining` is used without it. */
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

/** The back-off key of a pod's container: `${podUid}_${containerName}`. */
export function containerBackoffKey(podUid: string, containerName: string): string {
  return `${podUid}_${containerName}`;
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
 * spec changed (say `kubectl set image` to fix the crash) is never held back. Upstream
 * gets the last one by putting the image in its back-off key; berth's key stays
 * `${uid}_${name}` so that the sync loop can record failures without the spec.
 */
export function holdBackCrashLooping(
  names: readonly string[],
  { pod, status, now, backoff }: CrashLoopInput,
  waiting: Record<string, WaitingContainer>,
): string[] {
  const uid = pod.metadata?.uid ?? status.uid;
  return names.filter((name) => {
    const key = containerBackoffKey(uid, name);
    if (!crashedWithCurrentSpec(pod, status, name) || !backoff.inBackoff(key)) return true;
    const remaining = backoff.remaining(key);
    const delay = backoff.current?.(key) ?? remaining;
    waiting[name] = {
      reason: 'CrashLoopBackOff',
      message: `back-off ${formatGoDuration(delay)} restarting failed container=${name} pod=${podDescription(pod, status)}`,
      retryAt: now + remaining,
    };
    return false;
  });
}

function crashedWithCurrentSpec(pod: Pod, status: RuntimePodStatus, name: string): boolean {
  let crashed: RuntimeContainer | undefined;
  for (const c of status.containers) {
    if (c.name !== name || c.state !== 'exited') continue;
    if (crashed === undefined || c.createdAt > crashed.createdAt) crashed = c;
  }
  if (crashed === undefined) return false;
  const container = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].find(
    (c) => c.name === name,
  );
  return container === undefined || sameContainerHash(crashed.hash, hashContainer(container));
}
