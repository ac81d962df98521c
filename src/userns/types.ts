/**
 * The user namespace manager (upstream pkg/kubelet/userns): gives each pod with
 * `hostUsers: false` its own range of host IDs, `idsPerPod` long (65536 by default),
 * mapped to 0..idsPerPod-1 inside the pod, for both UIDs and GIDs.
 *
 * The ranges are carved from the kubelet's IDs: the subordinate IDs of the user
 * "kubelet" (/etc/subuid and /etc/subgid) when that user exists, otherwise every ID from
 * idsPerPod up (upstream's default; range 0 is never handed out: it holds root). A pod's
 * range is written to `<pod dir>/userns` in upstream's JSON, so a restarted kubelet (or
 * upstream's, on the same root directory) finds every range still in use, and freed
 * when the pod is terminated or, after a restart, by the orphan clean-up.
 *
 * The UserNamespacesSupport gate is GA and locked on in v1.37 (config validation refuses
 * turning it off), so every pod's CRI namespace options carry a user namespace mode:
 * NODE for hostUsers unset or true, POD with the mappings for false.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import { cri } from '../cri/index.ts';
import { BerthError } from '../util/errors.ts';

/** Upstream's DefaultKubeletUserNamespacesIDsPerPod; also the unit a range must be a multiple of. */
export const DEFAULT_IDS_PER_POD = 65536;

/** The name of the file in the pod directory that holds the pod's mappings (upstream's). */
export const MAPPINGS_FILE = 'userns';

/** The user whose subordinate IDs the kubelet hands out (upstream's kubeletUser). */
export const KUBELET_USER = 'kubelet';

/** The IDs the kubelet may hand out: `[firstId, firstId + length)`. */
export interface KubeletMappings {
  readonly firstId: number;
  readonly length: number;
}

/** The manager's view of the kubelet (upstream's userNsPodsManager). */
export interface UsernsHost {
  /** The pod's directory (`<rootDir>/pods/<uid>`), whether or not it exists. */
  podDir(uid: string): string;
  /** The UIDs that have a pod directory; an empty list when the pods directory is missing. */
  listPodsFromDisk(): Promise<string[]>;
  /**
   * Whether the runtime handler ('' for the default) reports user namespace support in
   * the CRI Status (its runtime_handlers features): false when the runtime lists no
   * handlers (too old to say), an error naming the handler when it is not listed.
   */
  handlerSupportsUserNamespaces(runtimeHandler: string, signal: AbortSignal): Promise<boolean>;
  /** The kubelet's IDs (subid.ts: from /etc/subuid and /etc/subgid, or upstream's default). */
  kubeletMappings(idsPerPod: number): Promise<KubeletMappings>;
  /** The kubelet's maxPods: the kubelet's IDs must hold a range for each. */
  readonly maxPods: number;
}

/** upstream's UsernsManager, as the runtime and the pod sync use it. */
export interface UserNamespaceManager {
  /**
   * The pod's CRI user namespace (upstream's GetOrCreateUserNamespaceMappings): NODE mode
   * for hostUsers unset or true; for false, the pod's recorded range or a newly allocated
   * (and recorded) one, once the pod's runtime handler is known to support user
   * namespaces. Refusals and allocation failures are {@link UsernsError}s in upstream's
   * words.
   */
  getOrCreateUserNamespaceMappings(
    pod: Pod,
    runtimeHandler: string,
    signal: AbortSignal,
  ): Promise<cri.UserNamespace>;
  /** The pod is terminated: its range is free again and its mappings file removed. */
  release(podUid: string): Promise<void>;
  /**
   * Frees the ranges of pods that are neither in `active` nor on disk any more
   * (upstream's CleanupOrphanedPodUsernsAllocations, run by housekeeping).
   */
  cleanupOrphanedPodUsernsAllocations(
    active: ReadonlySet<string>,
    signal: AbortSignal,
  ): Promise<void>;
  /** The first host ID of the pod's range, if it holds one. */
  allocated(podUid: string): number | undefined;
}

/** Why a pod cannot get a user namespace (the message is upstream's). */
export class UsernsError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('BERTH_USERNS', message, options);
  }
}

/** The refusal for a handler without user namespace support, worded as upstream's. */
export function unsupportedHandlerMessage(runtimeHandler: string): string {
  return runtimeHandler === ''
    ? "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
    : `can't set \`spec.hostUsers: false\`, RuntimeClass handler "${runtimeHandler}" does not support user namespaces`;
}

/** The CRI user namespace of a pod in the node's (host's) user namespace. */
export function nodeUserNamespace(): cri.UserNamespace {
  return { mode: cri.NamespaceMode.NODE, uids: [], gids: [] };
}

/** The CRI user namespace of a pod whose IDs 0..length-1 are host IDs from `firstId`. */
export function podUserNamespace(firstId: number, length: number): cri.UserNamespace {
  const mapping = { hostId: firstId, containerId: 0, length };
  return { mode: cri.NamespaceMode.POD, uids: [mapping], gids: [{ ...mapping }] };
}
