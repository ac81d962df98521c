/**
 * Housekeeping, each tick of the sync loop's housekeeping ticker (podHousekeepingPeriod,
 * 2 s by default; kubelet/sync-loop.ts): kill and remove runtime pods no longer bound to this node
 * (only once the pod source has completed its first list, so nothing is killed as an
 * orphan while berth does not yet know its pods), and garbage-collect dead containers
 * (keep the newest dead one per container, as upstream) and sandboxes no pod needs.
 */
import type { PodCgroups } from '../cm/pod-cgroups.ts';
import { cri, type CriClient } from '../cri/index.ts';
import {
  POD_NAME_LABEL,
  POD_NAMESPACE_LABEL,
  POD_TERMINATION_GRACE_PERIOD_ANNOTATION,
} from '../container/labels.ts';
import type { RelistPleg } from '../pleg/generic.ts';
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { PodWorkers } from '../podworkers/pod-workers.ts';
import type { Clock } from '../util/clock.ts';
import { isAborted } from '../util/errors.ts';
import type { UserNamespaceManager } from '../userns/types.ts';
import type { Logger } from '../util/logger.ts';
import type { VolumeManager } from '../volumes/types.ts';
import type { ContainerLogManager } from '../logs/types.ts';
import { removeContainer, type RemovableContainer } from '../kuberuntime/container-removal.ts';
import type { LogSymlinks } from '../kuberuntime/log-symlinks.ts';

/** A listed container with the pod it belongs to, from its labels. */
function removable(c: cri.Container): RemovableContainer {
  return {
    id: c.id,
    name: c.metadata?.name ?? '',
    podName: c.labels[POD_NAME_LABEL] ?? '',
    podNamespace: c.labels[POD_NAMESPACE_LABEL] ?? '',
  };
}

/** A container the runtime still has and that has not exited (its log may be rotating). */
function notExited(pleg: RelistPleg, id: string): boolean {
  for (const uid of pleg.uids()) {
    const c = pleg.get(uid).containers.find((x) => x.id.startsWith(id));
    if (c !== undefined) return c.state !== cri.ContainerState.CONTAINER_EXITED;
  }
  return false;
}

export interface HousekeepingOptions {
  readonly cri: CriClient;
  readonly pleg: RelistPleg;
  /** The merged pod sources: what is bound here, and whether every source has reported. */
  readonly source: { readonly synced: boolean; pods(): ReadonlyMap<string, Pod> };
  readonly podWorkers: PodWorkers;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Removes the directories and mounts of pods that are gone (after a restart too). */
  readonly volumes?: Pick<VolumeManager, 'cleanupOrphans'>;
  /** Removes the cgroups of pods that are gone. */
  readonly podCgroups?: Pick<PodCgroups, 'cleanupOrphans' | 'updateQos'>;
  /** Forgets the resource allocations of pods that are gone (upstream's RemoveOrphanedPods). */
  readonly allocations?: { removeOrphans(active: ReadonlySet<string>): void };
  /** Frees the user namespace ranges of pods that are gone (after a restart too). */
  readonly userns?: Pick<UserNamespaceManager, 'cleanupOrphanedPodUsernsAllocations'>;
  /** Caches keyed by runtime object that forget what the runtime no longer has. */
  readonly runtimeCaches?: readonly { prune(liveIds: ReadonlySet<string>): void }[];
  /** Back-offs whose idle entries are dropped (upstream's backOff.GC in housekeeping). */
  readonly backoffs?: readonly { gc(): void }[];
  readonly gcPeriodMs?: number;
  /** Rotated logs of removed containers (upstream's removeContainerLog). */
  readonly containerLogs?: Pick<ContainerLogManager, 'clean'>;
  /** /var/log/containers: links of removed containers go, dead ones are collected. */
  readonly logSymlinks?: LogSymlinks;
}

const { CONTAINER_EXITED } = cri.ContainerState;

export class Housekeeping {
  readonly #o: HousekeepingOptions;
  readonly #killing = new Set<string>();
  // -Infinity: the first pass collects at once, as upstream's wait.Until runs it first.
  #lastGc = Number.NEGATIVE_INFINITY;

  constructor(options: HousekeepingOptions) {
    this.#o = options;
  }

  /**
   * One housekeeping pass (upstream's HandlePodCleanups), run by the sync loop's
   * housekeeping tick: orphans, then every gcPeriodMs the garbage collection and the
   * QoS tier's shares. A failed pass is logged; the next tick tries again.
   */
  async handlePodCleanups(signal: AbortSignal): Promise<void> {
    try {
      await this.cleanupOrphans(signal);
      if (this.#o.clock.monotonic() - this.#lastGc >= (this.#o.gcPeriodMs ?? 60_000)) {
        this.#lastGc = this.#o.clock.monotonic();
        await this.garbageCollect(signal);
        // Upstream's periodic QoS update: the Burstable tier's shares follow its pods.
        await this.#o.podCgroups?.updateQos([...this.#o.source.pods().values()]);
      }
    } catch (err) {
      if (!isAborted(signal)) this.#o.logger.warn('Housekeeping failed', { error: String(err) });
    }
  }

  async cleanupOrphans(signal: AbortSignal): Promise<void> {
    const { source, pleg, podWorkers } = this.#o;
    if (!source.synced) return;
    const known = new Set(podWorkers.known());
    const bound = source.pods();
    for (const uid of pleg.uids()) {
      if (known.has(uid) || bound.has(uid) || this.#killing.has(uid)) continue;
      const snapshot = pleg.get(uid);
      const anything =
        snapshot.containers.some((c) => c.state !== CONTAINER_EXITED) ||
        snapshot.sandboxes.length > 0 ||
        snapshot.containers.length > 0;
      if (!anything) continue;
      this.#killing.add(uid);
      try {
        await this.#killOrphan(uid, signal);
      } finally {
        this.#killing.delete(uid);
      }
    }
    const volumes = this.#o.volumes;
    const cgroups = this.#o.podCgroups;
    const { allocations, userns } = this.#o;
    if (![volumes, cgroups, allocations, userns].some((x) => x !== undefined)) return;
    // Only pods nothing refers to any more: not bound, no worker, nothing in the runtime.
    const active = new Set([...known, ...bound.keys(), ...this.#killing]);
    for (const uid of pleg.uids()) {
      const snapshot = pleg.get(uid);
      if (snapshot.containers.length > 0 || snapshot.sandboxes.length > 0) active.add(uid);
    }
    const removed = (await volumes?.cleanupOrphans(active, signal)) ?? [];
    if (removed.length > 0)
      this.#o.logger.info('Cleaned up the volumes and directories of deleted pods', {
        podUIDs: removed,
      });
    const cgroupsRemoved = (await cgroups?.cleanupOrphans(active)) ?? [];
    if (cgroupsRemoved.length > 0)
      this.#o.logger.info('Removed the cgroups of deleted pods', { podUIDs: cgroupsRemoved });
    allocations?.removeOrphans(active);
    await userns?.cleanupOrphanedPodUsernsAllocations(active, signal);
  }

  async #killOrphan(uid: string, signal: AbortSignal): Promise<void> {
    const { cri: client, pleg, logger } = this.#o;
    const snapshot = pleg.get(uid);
    const name = snapshot.sandboxes[0]?.metadata;
    logger.info('Killing orphaned pod: not bound to this node any more', {
      podUID: uid,
      pod: `${name?.namespace ?? ''}/${name?.name ?? ''}`,
    });
    await Promise.all(
      snapshot.containers
        .filter((c) => c.state !== CONTAINER_EXITED)
        .map((c) => {
          const grace = Number(c.annotations[POD_TERMINATION_GRACE_PERIOD_ANNOTATION] ?? '2');
          return client.runtime.stopContainer(
            { containerId: c.id, timeout: BigInt(Number.isFinite(grace) ? Math.max(2, grace) : 2) },
            { signal },
          );
        }),
    );
    for (const c of snapshot.containers)
      await removeContainer(this.#o, removable(c), signal).catch(() => undefined);
    for (const s of snapshot.sandboxes) {
      await client.runtime.stopPodSandbox({ podSandboxId: s.id }, { signal });
      await client.runtime.removePodSandbox({ podSandboxId: s.id }, { signal });
    }
    await pleg.relist(signal);
  }

  /** Dead containers beyond the newest per (pod, container name); old empty sandboxes. */
  /**
   * `allOfTerminatedPods`: eviction's node-level reclaim (upstream's
   * DeleteAllUnusedContainers, evictNonDeletedPods): a pod that has terminated, or that
   * no worker knows once every source has reported, loses every dead container.
   */
  async garbageCollect(
    signal: AbortSignal,
    opts: { readonly allOfTerminatedPods?: boolean } = {},
  ): Promise<void> {
    const { cri: client, pleg, podWorkers, source } = this.#o;
    let removed = 0;
    for (const uid of pleg.uids()) {
      const snapshot = pleg.get(uid);
      const state = podWorkers.state(uid);
      const all =
        opts.allOfTerminatedPods === true &&
        source.synced &&
        (state === undefined || state === 'terminated');
      const seen = new Set<string>();
      for (const c of snapshot.containers) {
        // Containers are newest first: the first dead one per name is kept.
        const name = c.metadata?.name ?? '';
        if (c.state !== CONTAINER_EXITED) continue;
        if (!all && !seen.has(name)) {
          seen.add(name);
          continue;
        }
        await removeContainer(this.#o, removable(c), signal).catch(() => undefined);
        removed++;
      }
      // Sandboxes are newest first too: the newest stays for the pod's next sync.
      for (const s of snapshot.sandboxes.slice(1)) {
        if (s.state === cri.PodSandboxState.SANDBOX_READY) continue;
        if (snapshot.containers.some((c) => c.podSandboxId === s.id)) continue;
        await client.runtime
          .removePodSandbox({ podSandboxId: s.id }, { signal })
          .catch(() => undefined);
        removed++;
      }
    }
    if (removed > 0) await pleg.relist(signal);
    // Links whose log went with a container berth did not remove (upstream's container GC).
    await this.#o.logSymlinks?.removeDead((id) => Promise.resolve(notExited(pleg, id)));
    this.#pruneCaches();
  }

  /** Every per-object cache shrinks back to what the runtime still has. */
  #pruneCaches(): void {
    const { pleg } = this.#o;
    const live = new Set<string>();
    for (const uid of pleg.uids()) {
      const snapshot = pleg.get(uid);
      for (const c of snapshot.containers) live.add(c.id);
      for (const s of snapshot.sandboxes) live.add(s.id);
    }
    for (const cache of this.#o.runtimeCaches ?? []) cache.prune(live);
    for (const backoff of this.#o.backoffs ?? []) backoff.gc();
  }
}
