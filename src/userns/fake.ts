/**
 * An in-memory user namespace manager for the runtime's and the pod sync's tests: the
 * same ranges, refusals and messages as the real one (contract.ts), with the pod
 * directories and runtime handlers held in memory.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { cri } from '../cri/index.ts';
import { handlerSupports } from './host.ts';
import { IdRanges } from './ranges.ts';
import {
  DEFAULT_IDS_PER_POD,
  UsernsError,
  nodeUserNamespace,
  podUserNamespace,
  unsupportedHandlerMessage,
  type KubeletMappings,
  type UserNamespaceManager,
} from './types.ts';

export interface FakeUsernsOptions {
  /** The runtime's handlers and whether each supports user namespaces; default { '': true }. */
  readonly handlers?: Readonly<Record<string, boolean>>;
  /** The kubelet's IDs; default upstream's (from idsPerPod to 2^32). */
  readonly mappings?: KubeletMappings;
  readonly maxPods?: number;
}

export class FakeUserNamespaceManager implements UserNamespaceManager {
  readonly #handlers: { name: string; features: { userNamespaces: boolean } }[];
  readonly #ranges: IdRanges | UsernsError;
  /** Pods with a directory: those given a range, until {@link removePodDir}. */
  readonly #dirs = new Set<string>();

  constructor(o: FakeUsernsOptions = {}) {
    this.#handlers = Object.entries(o.handlers ?? { '': true }).map(([name, userNamespaces]) => ({
      name,
      features: { userNamespaces },
    }));
    const mappings = o.mappings ?? {
      firstId: DEFAULT_IDS_PER_POD,
      length: 2 ** 32 - DEFAULT_IDS_PER_POD,
    };
    try {
      // Always the lowest free range, so tests can name it.
      this.#ranges = IdRanges.create(mappings, DEFAULT_IDS_PER_POD, o.maxPods ?? 110, () => 0);
    } catch (err) {
      this.#ranges = err as UsernsError;
    }
  }

  getOrCreateUserNamespaceMappings(
    pod: Pod,
    runtimeHandler: string,
    signal: AbortSignal,
  ): Promise<cri.UserNamespace> {
    signal.throwIfAborted();
    const uid = pod.metadata?.uid ?? '';
    if (pod.spec?.hostUsers !== false) return Promise.resolve(nodeUserNamespace());
    const message = unsupportedHandlerMessage(runtimeHandler);
    let supported: boolean;
    try {
      supported = handlerSupports(this.#handlers, runtimeHandler);
    } catch (err) {
      return Promise.reject(new UsernsError(`${message}: ${(err as Error).message}`));
    }
    if (!supported) return Promise.reject(new UsernsError(message));
    const ranges = this.#ranges;
    if (ranges instanceof UsernsError)
      return Promise.reject(new UsernsError(`kubelet mappings: ${ranges.message}`));
    const held = ranges.firstIdOf(uid);
    if (held !== undefined) return Promise.resolve(podUserNamespace(held, ranges.idsPerPod));
    try {
      const firstId = ranges.allocateOne(uid);
      this.#dirs.add(uid);
      return Promise.resolve(podUserNamespace(firstId, ranges.idsPerPod));
    } catch (err) {
      return Promise.reject(new UsernsError(`create user namespace: ${(err as Error).message}`));
    }
  }

  release(podUid: string): Promise<void> {
    if (!(this.#ranges instanceof UsernsError)) this.#ranges.release(podUid);
    return Promise.resolve();
  }

  cleanupOrphanedPodUsernsAllocations(
    active: ReadonlySet<string>,
    signal: AbortSignal,
  ): Promise<void> {
    signal.throwIfAborted();
    const ranges = this.#ranges;
    if (ranges instanceof UsernsError) return Promise.resolve();
    for (const uid of this.#dirs) if (!active.has(uid)) ranges.release(uid);
    for (const uid of ranges.uids()) if (!this.#dirs.has(uid)) ranges.release(uid);
    return Promise.resolve();
  }

  allocated(podUid: string): number | undefined {
    return this.#ranges instanceof UsernsError ? undefined : this.#ranges.firstIdOf(podUid);
  }

  /** What the volume clean-up does to a gone pod's directory. */
  removePodDir(podUid: string): void {
    this.#dirs.delete(podUid);
  }
}
