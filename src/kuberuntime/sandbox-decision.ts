/**
 * Whether a pod needs a new sandbox (upstream's PodSandboxChanged). Only the newest
 * sandbox counts; older ones are garbage for the container GC.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { RuntimePodStatus } from '../container/pod-status.ts';

/** Why a new sandbox is needed; the wording is the sync loop's to turn into events. */
export type SandboxChangeReason =
  | 'no sandbox'
  | 'multiple ready sandboxes'
  | 'sandbox not ready'
  | 'network namespace changed'
  | 'no pod IP';

/** The outcome of {@link decideSandbox}. */
export interface SandboxDecision {
  readonly create: boolean;
  /** The attempt the next sandbox gets, or the current sandbox's when kept. */
  readonly attempt: number;
  /** The newest sandbox, when there is one. */
  readonly sandboxId: string | undefined;
  readonly reason: SandboxChangeReason | undefined;
}

/** Decides whether `pod` keeps its newest sandbox. */
export function decideSandbox(pod: Pod, status: RuntimePodStatus): SandboxDecision {
  const newest = status.sandboxes[0];
  if (newest === undefined) {
    return { create: true, attempt: 0, sandboxId: undefined, reason: 'no sandbox' };
  }
  const replace = (reason: SandboxChangeReason): SandboxDecision => ({
    create: true,
    attempt: newest.attempt + 1,
    sandboxId: newest.id,
    reason,
  });
  const ready = status.sandboxes.filter((s) => s.state === 'ready').length;
  // Two ready sandboxes mean two network namespaces for one pod: start over cleanly.
  if (ready > 1) return replace('multiple ready sandboxes');
  if (newest.state !== 'ready') return replace('sandbox not ready');
  const hostNetwork = pod.spec?.hostNetwork === true;
  // The checks below need PodSandboxStatus; a listed-only sandbox skips them.
  if (newest.network !== undefined) {
    if (newest.network !== (hostNetwork ? 'node' : 'pod')) {
      return replace('network namespace changed');
    }
    // A pod-network sandbox without an IP cannot serve the pod (CNI failed half-way).
    if (!hostNetwork && (newest.ip === undefined || newest.ip === '')) return replace('no pod IP');
  }
  return { create: false, attempt: newest.attempt, sandboxId: newest.id, reason: undefined };
}
