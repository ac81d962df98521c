/**
 * The status manager: keeps the newest computed status of each pod and writes it to
 * the pod's status subresource when it differs from what the API has. Writes carry the
 * pod UID as a precondition, so a status never lands on a new pod of the same name.
 * Per pod, at most one write is in flight; newer statuses coalesce. Failed writes are
 * retried by the periodic sync (every 10 s, as upstream's batch sync).
 */
import type {
  Pod,
  PodCondition,
  PodStatus,
  ResourceRequirements,
} from 'kubernetes-types/core/v1.js';
import { inNamespace, isConflict, isNotFound, PODS, type KubeClient } from '../kube/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import { KUBELET_CONDITIONS } from './generate.ts';
import { RESIZE_CONDITIONS } from './resize-conditions.ts';
import type { PodStatusManager, TerminalStatusAmendment } from './types.ts';

export interface StatusManagerOptions {
  readonly client: KubeClient;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly syncPeriodMs?: number;
  /**
   * Where a static pod's status goes (upstream's TranslatePodUID): its mirror pod's
   * UID; null while it has no mirror (the write waits); undefined for other pods.
   */
  readonly target?: (pod: Pod) => { readonly uid: string } | null | undefined;
}

interface Entry {
  pod: Pod;
  status: PodStatus;
  /** JSON of what the API is known to have. */
  sent: string | undefined;
  /** The UID of the API object `sent` describes (a static pod's: its mirror's). */
  sentTo: string;
  /** The status last written, whose resize conditions a later write may have to delete. */
  lastSent?: PodStatus;
  writing: boolean;
}

/** What decides whether a write is needed: the status without timestamps that churn. */
function fingerprint(status: PodStatus): string {
  return JSON.stringify({
    ...status,
    conditions: status.conditions?.map((c) => ({ ...c, lastProbeTime: undefined })),
  });
}

/** Conditions berth writes; every other type belongs to another controller. */
const OWN_CONDITIONS = new Set([...KUBELET_CONDITIONS, 'PodScheduled']);

/**
 * The strategic merge patch of a status, as upstream's kubelet writes it: conditions
 * merge by type and only the kubelet's own are sent, so a readiness gate or
 * DisruptionTarget another controller set meanwhile is neither dropped nor overwritten
 * with the older value berth last read; a resize condition the API still has
 * (`before`) but the status no longer carries is deleted. The IP lists are replaced whole (a recreated
 * sandbox's IP must not be added next to the old one); the container status lists are
 * atomic in the API already.
 */
export function statusPatch(status: PodStatus, before?: PodStatus): Record<string, unknown> {
  const replace = { $patch: 'replace' };
  const terminal = status.phase === 'Succeeded' || status.phase === 'Failed';
  return {
    ...status,
    ...(status.conditions !== undefined && {
      conditions: [
        ...status.conditions.filter(
          (c) => OWN_CONDITIONS.has(c.type) || (terminal && isKubeletDisruption(c)),
        ),
        // A resize condition the API has and that no longer holds is removed
        // (conditions merge by type).
        ...RESIZE_CONDITIONS.filter(
          (t) =>
            before?.conditions?.some((c) => c.type === t) === true &&
            !status.conditions?.some((c) => c.type === t),
        ).map((type) => ({ type, $patch: 'delete' })),
      ],
    }),
    ...(status.podIPs !== undefined && { podIPs: [...status.podIPs, replace] }),
    ...(status.hostIPs !== undefined && { hostIPs: [...status.hostIPs, replace] }),
    // A resource the allocation no longer has must not linger in the merged map: it is
    // sent as null (a `$patch: replace` directive in this map is dropped by the API
    // server when the field is new: the status kept no allocatedResources at all).
    ...allocatedPatch(status, before),
    ...resourcesPatch(status, before),
  };
}

type ResourceList = Readonly<Record<string, string>>;

function allocatedOf(status: PodStatus | undefined): ResourceList | undefined {
  return (status as { allocatedResources?: Record<string, string> } | undefined)
    ?.allocatedResources;
}

function resourcesOf(status: PodStatus | undefined): ResourceRequirements | undefined {
  return (status as { resources?: ResourceRequirements } | undefined)?.resources;
}

/** `now` with every key only `before` has set to null (deleted by the merge). */
function listPatch(
  now: ResourceList | undefined,
  before: ResourceList | undefined,
): Record<string, string | null> | undefined {
  const gone = Object.keys(before ?? {}).filter((k) => now?.[k] === undefined);
  if (now === undefined && gone.length === 0) return undefined;
  return { ...Object.fromEntries(gone.map((k) => [k, null])), ...now };
}

function allocatedPatch(
  status: PodStatus,
  before: PodStatus | undefined,
): { allocatedResources?: Record<string, string | null> } {
  const list = listPatch(allocatedOf(status), allocatedOf(before));
  return list === undefined ? {} : { allocatedResources: list };
}

/** status.resources: its requests and limits merge like allocatedResources. */
function resourcesPatch(status: PodStatus, before: PodStatus | undefined) {
  const now = resourcesOf(status);
  const was = resourcesOf(before);
  if (now === undefined) return {};
  const requests = listPatch(now.requests, was?.requests);
  const limits = listPatch(now.limits, was?.limits);
  return {
    resources: {
      ...now,
      ...(requests !== undefined && { requests }),
      ...(limits !== undefined && { limits }),
    },
  };
}

/**
 * A DisruptionTarget the kubelet itself set (node shutdown, eviction). Upstream's status
 * manager sends it only with the terminal phase, once no container can still run; one
 * another controller set is never sent back.
 */
function isKubeletDisruption(c: PodCondition): boolean {
  return c.type === 'DisruptionTarget' && c.reason === 'TerminationByKubelet';
}

/** Amends a pod's terminal status (upstream's KillPodOptions.PodStatusFunc). */
export type { TerminalStatusAmendment } from './types.ts';

export class StatusManager implements PodStatusManager {
  readonly #o: StatusManagerOptions;
  readonly #entries = new Map<string, Entry>();
  readonly #amendments = new Map<string, TerminalStatusAmendment>();
  readonly #inflight = new Set<Promise<void>>();

  constructor(options: StatusManagerOptions) {
    this.#o = options;
  }

  /** The status last set for `uid` (what berth believes), if any. */
  get(uid: string): PodStatus | undefined {
    return this.#entries.get(uid)?.status;
  }

  /** Records the status of `pod` and writes it soon if the API lacks it. */
  set(pod: Pod, given: PodStatus): void {
    const uid = pod.metadata?.uid ?? '';
    const amend = this.#amendments.get(uid);
    const terminal = given.phase === 'Succeeded' || given.phase === 'Failed';
    const status = amend !== undefined && terminal ? amend(given) : given;
    const entry = this.#entries.get(uid);
    if (entry === undefined) {
      const apiStatus = pod.status === undefined ? undefined : fingerprint(pod.status);
      this.#entries.set(uid, { pod, status, sent: apiStatus, sentTo: uid, writing: false });
    } else {
      entry.pod = pod;
      entry.status = status;
    }
    this.#flush(uid);
  }

  /** Writes the pod's status now if the API lacks it (a static pod's mirror was made). */
  resend(uid: string): void {
    this.#flush(uid);
  }

  /**
   * Every terminal status set for `uid` from now on passes through `amend` (the reason,
   * message and DisruptionTarget of a pod the kubelet kills), so the pod sync's later
   * statuses keep them and the API sees them with the terminal phase in one write.
   */
  amendTerminal(uid: string, amend: TerminalStatusAmendment): void {
    this.#amendments.set(uid, amend);
  }

  /** Forgets a pod whose object is gone. */
  remove(uid: string): void {
    this.#entries.delete(uid);
    this.#amendments.delete(uid);
  }

  #flush(uid: string): void {
    const entry = this.#entries.get(uid);
    if (entry === undefined || entry.writing) return;
    const target = this.#target(uid, entry.pod);
    if (target === null) return;
    if (fingerprint(entry.status) === entry.sent && entry.sentTo === target) return;
    entry.writing = true;
    const attempted = entry.status;
    const p = this.#write(uid, target, entry).then((written) => {
      entry.writing = false;
      this.#inflight.delete(p);
      // A newer status may have arrived while writing. A failed write is not retried
      // at once but by the batch sync (run), as upstream's syncBatch does: against an
      // API server that keeps failing, an immediate retry was a loop with no pause
      // (with the fake client, one that starved the event loop).
      const newer = entry.status !== attempted;
      if (this.#entries.get(uid) === entry && (written || newer)) this.#flush(uid);
    });
    this.#inflight.add(p);
  }

  /** The UID whose API object holds the pod's status; null: none yet. */
  #target(uid: string, pod: Pod): string | null {
    const t = this.#o.target?.(pod);
    return t === undefined ? uid : t === null ? null : t.uid;
  }

  /** Patches the status; false when it was not written (it is retried by the batch sync). */
  async #write(uid: string, target: string, entry: Entry): Promise<boolean> {
    const status = entry.status;
    const meta = entry.pod.metadata ?? {};
    const log = this.#o.logger.child({
      pod: `${meta.namespace ?? ''}/${meta.name ?? ''}`,
      podUID: uid,
    });
    try {
      const updated = await this.#o.client.patch<Pod>(
        inNamespace(PODS, meta.namespace ?? 'default'),
        meta.name ?? '',
        {
          metadata: { uid: target },
          // The API's copy may be older than what berth wrote last: both are "before".
          status: statusPatch(status, {
            conditions: [
              ...(entry.pod.status?.conditions ?? []),
              ...(entry.lastSent?.conditions ?? []),
            ],
            ...{
              allocatedResources: {
                ...allocatedOf(entry.pod.status),
                ...allocatedOf(entry.lastSent),
              },
              resources: {
                requests: {
                  ...resourcesOf(entry.pod.status)?.requests,
                  ...resourcesOf(entry.lastSent)?.requests,
                },
                limits: {
                  ...resourcesOf(entry.pod.status)?.limits,
                  ...resourcesOf(entry.lastSent)?.limits,
                },
              },
            },
          }),
        },
        'strategic',
        { subresource: 'status' },
      );
      entry.sent = fingerprint(status);
      entry.sentTo = target;
      entry.lastSent = status;
      // A mirror pod is not the pod berth runs: keep the static pod.
      if (target === uid) entry.pod = updated;
      log.debug('Status for pod updated successfully', { phase: status.phase });
      return true;
    } catch (err) {
      if ((isNotFound(err) || isConflict(err)) && target !== uid) {
        // The mirror pod went away or was replaced: the next mirror gets the status.
        log.debug('Mirror pod changed, status waits for the new one', { error: String(err) });
        return false;
      }
      if (isNotFound(err) || isConflict(err)) {
        // The pod is gone, or the name now belongs to another UID: nothing to write.
        log.debug('Pod no longer exists, dropping its status', { error: String(err) });
        this.#entries.delete(uid);
        return false;
      }
      log.warn('Failed to update status for pod', { error: String(err) });
      return false;
    }
  }

  /** Rewrites every status the API may lack (the batch sync). */
  async run(signal: AbortSignal): Promise<void> {
    const period = this.#o.syncPeriodMs ?? 10_000;
    while (!signal.aborted) {
      await this.#o.clock.sleep(period, signal).catch(() => undefined);
      for (const uid of this.#entries.keys()) this.#flush(uid);
    }
    await Promise.allSettled([...this.#inflight]);
  }

  /** Waits for writes in flight (tests, shutdown). */
  async drain(): Promise<void> {
    while (this.#inflight.size > 0) await Promise.allSettled([...this.#inflight]);
  }
}
