/**
 * Creates and deletes mirror pods (upstream's pkg/kubelet/pod mirror_client.go): the
 * API's read-only copy of a static pod, so the cluster sees what the node runs. The
 * copy carries the static pod's annotations plus kubernetes.io/config.mirror (its
 * config hash) and, as the NodeRestriction admission plugin requires, a controller
 * owner reference to the Node (name and UID).
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import {
  inNamespace,
  isAlreadyExists,
  isConflict,
  isNotFound,
  PODS,
  type KubeClient,
} from '../kube/types.ts';
import type { Logger } from '../util/logger.ts';
import { CONFIG_HASH_ANNOTATION, CONFIG_MIRROR_ANNOTATION } from '../podsource/static-pod.ts';

export interface MirrorClientOptions {
  readonly client: KubeClient;
  readonly nodeName: string;
  /** The Node's UID; undefined until the node is registered. */
  readonly nodeUID: () => string | undefined;
  readonly logger: Logger;
}

export class MirrorPodError extends Error {
  readonly code = 'BERTH_MIRROR_POD';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MirrorPodError';
  }
}

/** The mirror pod the API should hold for `pod` (a static pod). */
export function mirrorPodOf(pod: Pod, nodeName: string, nodeUID: string): Pod {
  const meta = pod.metadata ?? {};
  const hash = meta.annotations?.[CONFIG_HASH_ANNOTATION] ?? '';
  // The server assigns UID, resourceVersion and creationTimestamp of its own.
  const rest = { ...meta };
  delete rest.uid;
  delete rest.resourceVersion;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    ...pod,
    metadata: {
      ...rest,
      annotations: { ...meta.annotations, [CONFIG_MIRROR_ANNOTATION]: hash },
      ownerReferences: [
        { apiVersion: 'v1', kind: 'Node', name: nodeName, uid: nodeUID, controller: true },
      ],
    },
  };
}

export class MirrorClient {
  readonly #o: MirrorClientOptions;

  constructor(options: MirrorClientOptions) {
    this.#o = options;
  }

  /** Creates the mirror of `pod`; one already there with the same hash is success. */
  async create(pod: Pod, signal: AbortSignal): Promise<void> {
    const nodeUID = this.#o.nodeUID();
    if (nodeUID === undefined || nodeUID === '')
      throw new MirrorPodError(
        `Cannot create a mirror pod: UID unset for node ${this.#o.nodeName}`,
      );
    const mirror = mirrorPodOf(pod, this.#o.nodeName, nodeUID);
    const ns = mirror.metadata?.namespace ?? 'default';
    try {
      await this.#o.client.create<Pod>(inNamespace(PODS, ns), mirror, { signal });
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      const existing = await this.#o.client.get<Pod>(
        inNamespace(PODS, ns),
        mirror.metadata?.name ?? '',
        { signal },
      );
      const want = mirror.metadata?.annotations?.[CONFIG_MIRROR_ANNOTATION];
      // One on its way out (just deleted) is not the mirror: the next round makes it.
      if (
        existing.metadata?.annotations?.[CONFIG_MIRROR_ANNOTATION] !== want ||
        existing.metadata?.deletionTimestamp != null
      )
        throw err;
    }
  }

  /**
   * Deletes a mirror pod at once (grace 0), only if it still has `uid` when given.
   * False when it was already gone or is now another pod, as upstream.
   */
  async delete(
    namespace: string,
    name: string,
    uid: string | undefined,
    signal: AbortSignal,
  ): Promise<boolean> {
    this.#o.logger.info('Deleting a mirror pod', { pod: `${namespace}/${name}`, podUID: uid });
    try {
      await this.#o.client.delete(inNamespace(PODS, namespace), name, {
        gracePeriodSeconds: 0,
        ...(uid !== undefined && { preconditions: { uid } }),
        signal,
      });
      return true;
    } catch (err) {
      if (isNotFound(err) || isConflict(err)) return false;
      throw err;
    }
  }
}
