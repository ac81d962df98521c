/**
 * What a registered CSI driver tells the cluster about this node, as upstream's
 * nodeinfomanager (pkg/volume/csi/nodeinfomanager) writes it:
 * - the CSINode named like the node, owned by the Node (ownerReference with the Node's
 *   uid; one owned by an older Node of the same name is deleted and recreated), with
 *   spec.drivers[] {name, nodeID, topologyKeys, allocatable.count};
 * - the Node annotation csi.volume.kubernetes.io/nodeid (JSON driver -> node ID) and the
 *   driver's topology segments as Node labels (a label that already holds another value
 *   is a collision and fails the registration).
 *
 * The Node is changed with a merge patch of metadata only, carrying the resourceVersion
 * it was computed from: the node status manager writes status (its own subresource) and
 * its labels at registration with a strategic patch, so neither overwrites the other,
 * and a concurrent change to the annotation is a Conflict that is retried (upstream's
 * updateBackoff: 4 tries, 10 ms x5). One operation at a time (upstream's lock).
 */
import type { Node } from 'kubernetes-types/core/v1.js';
import type { CSINode, CSINodeDriver } from 'kubernetes-types/storage/v1.js';
import { CSINODES, isNotFound, NODES, type KubeClient } from '../kube/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';

export const ANNOTATION_NODE_ID = 'csi.volume.kubernetes.io/nodeid';
const MAX_INT32 = 2 ** 31 - 1;
/** Upstream's updateBackoff: 10 ms, x5, 4 steps (jitter left out: one writer per node). */
const BACKOFF_MS = [10, 50, 250, 1250] as const;

/** The node-info side of CSI registration (upstream's nodeinfomanager.Interface). */
export interface CsiNodeInfoManager {
  /** Creates the CSINode (empty) if missing and makes sure this Node owns it. */
  initialize(signal: AbortSignal): Promise<void>;
  installDriver(
    driverName: string,
    nodeId: string,
    maxVolumesPerNode: number,
    topology: Readonly<Record<string, string>>,
    signal: AbortSignal,
  ): Promise<void>;
  uninstallDriver(driverName: string, signal: AbortSignal): Promise<void>;
}

export interface KubeCsiNodeInfoManagerOptions {
  readonly client: KubeClient;
  readonly nodeName: string;
  readonly clock: Clock;
  readonly logger: Logger;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The JSON driver -> node ID map of the annotation; throws upstream's error when it is not JSON. */
function nodeIdMap(node: Node): Record<string, string> {
  const raw = node.metadata?.annotations?.[ANNOTATION_NODE_ID] ?? '';
  if (raw === '') return {};
  try {
    const parsed = JSON.parse(raw) as unknown;
    if (parsed === null) return {};
    if (typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
    return { ...(parsed as Record<string, string>) };
  } catch (err) {
    throw new Error(
      `failed to parse node's "${ANNOTATION_NODE_ID}" annotation value (${JSON.stringify(raw)}) err=${messageOf(err)}`,
      { cause: err },
    );
  }
}

/** Go's json.Marshal of a map sorts its keys; the annotation reads the same as upstream's. */
function marshalSorted(map: Record<string, string>): string {
  const sorted: Record<string, string> = {};
  for (const key of Object.keys(map).sort()) sorted[key] = map[key] ?? '';
  return JSON.stringify(sorted);
}

/** The API serves an empty driver list as null (a Go nil slice without omitempty). */
function driversOf(csiNode: CSINode): CSINodeDriver[] {
  return (csiNode.spec as Partial<CSINode['spec']> | undefined)?.drivers ?? [];
}

function sameKeys(a: readonly string[] | undefined, b: readonly string[]): boolean {
  const left = new Set(a ?? []);
  return left.size === new Set(b).size && b.every((k) => left.has(k));
}

export class KubeCsiNodeInfoManager implements CsiNodeInfoManager {
  readonly #o: KubeCsiNodeInfoManagerOptions;
  #nodeUid: string | undefined;
  #lock: Promise<void> = Promise.resolve();

  constructor(options: KubeCsiNodeInfoManagerOptions) {
    this.#o = options;
  }

  /** Runs `fn` after every earlier operation ended (upstream's nim.lock). */
  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#lock.then(fn);
    this.#lock = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /** Tries `fn` up to 4 times with upstream's back-off; the error names every failure. */
  async #retry(what: string, signal: AbortSignal, fn: () => Promise<void>): Promise<void> {
    const errors: string[] = [];
    for (let i = 0; ; i++) {
      try {
        await fn();
        return;
      } catch (err) {
        signal.throwIfAborted();
        errors.push(messageOf(err));
        const delay = BACKOFF_MS[i];
        if (delay === undefined) {
          throw new Error(
            `error updating ${what}: timed out waiting for the condition; caused by: [${errors.join(', ')}]`,
            { cause: err },
          );
        }
        await this.#o.clock.sleep(delay, signal);
      }
    }
  }

  initialize(signal: AbortSignal): Promise<void> {
    return this.#serial(() =>
      this.#retry('CSINode', signal, async () => {
        await this.#ownedCsiNode(signal);
      }),
    );
  }

  installDriver(
    driverName: string,
    nodeId: string,
    maxVolumesPerNode: number,
    topology: Readonly<Record<string, string>>,
    signal: AbortSignal,
  ): Promise<void> {
    if (nodeId === '') {
      return Promise.reject(
        new Error('error adding CSI driver node info: driverNodeID must not be empty'),
      );
    }
    return this.#serial(async () => {
      try {
        await this.#retry('node', signal, () =>
          this.#patchNode(signal, (node) => {
            const ids = nodeIdMap(node);
            const annotation =
              ids[driverName] === nodeId
                ? undefined
                : marshalSorted({ ...ids, [driverName]: nodeId });
            const labels: Record<string, string> = {};
            for (const [key, value] of Object.entries(topology)) {
              const current = node.metadata?.labels?.[key];
              if (current !== undefined && current !== value) {
                throw new Error(
                  `detected topology value collision: driver reported "${key}":"${value}" but existing label is "${key}":"${current}"`,
                );
              }
              if (current === undefined) labels[key] = value;
            }
            if (annotation === undefined && Object.keys(labels).length === 0) return undefined;
            return {
              ...(annotation !== undefined && {
                annotations: { [ANNOTATION_NODE_ID]: annotation },
              }),
              ...(Object.keys(labels).length > 0 && { labels }),
            };
          }),
        );
      } catch (err) {
        throw new Error(`error updating Node object with CSI driver node info: ${messageOf(err)}`, {
          cause: err,
        });
      }
      try {
        await this.#retry('CSINode', signal, () =>
          this.#installInCsiNode(driverName, nodeId, maxVolumesPerNode, topology, signal),
        );
      } catch (err) {
        throw new Error(
          `error updating CSINode object with CSI driver node info: ${messageOf(err)}`,
          { cause: err },
        );
      }
    });
  }

  uninstallDriver(driverName: string, signal: AbortSignal): Promise<void> {
    return this.#serial(async () => {
      try {
        await this.#retry('CSINode', signal, async () => {
          let csiNode: CSINode;
          try {
            csiNode = await this.#o.client.get<CSINode>(CSINODES, this.#o.nodeName, { signal });
          } catch (err) {
            if (isNotFound(err)) return;
            throw err;
          }
          const drivers = driversOf(csiNode);
          if (!drivers.some((d) => d.name === driverName)) return;
          await this.#o.client.update<CSINode>(
            CSINODES,
            this.#o.nodeName,
            {
              ...csiNode,
              spec: { ...csiNode.spec, drivers: drivers.filter((d) => d.name !== driverName) },
            },
            { signal },
          );
        });
      } catch (err) {
        throw new Error(`error uninstalling CSI driver from CSINode object ${messageOf(err)}`, {
          cause: err,
        });
      }
      try {
        await this.#retry('node', signal, () =>
          this.#patchNode(signal, (node) => {
            const ids = nodeIdMap(node);
            if (!(driverName in ids)) return undefined;
            const rest = Object.fromEntries(Object.entries(ids).filter(([k]) => k !== driverName));
            const value = Object.keys(rest).length === 0 ? null : marshalSorted(rest);
            return { annotations: { [ANNOTATION_NODE_ID]: value } };
          }),
        );
      } catch (err) {
        throw new Error(`error removing CSI driver node info from Node object ${messageOf(err)}`, {
          cause: err,
        });
      }
    });
  }

  /**
   * Reads the Node, asks `change` for the metadata to merge (undefined: nothing to do)
   * and patches it with the read resourceVersion as precondition.
   */
  async #patchNode(
    signal: AbortSignal,
    change: (node: Node) => Record<string, unknown> | undefined,
  ): Promise<void> {
    const node = await this.#o.client.get<Node>(NODES, this.#o.nodeName, { signal });
    const metadata = change(node);
    if (metadata === undefined) return;
    await this.#o.client.patch<Node>(
      NODES,
      this.#o.nodeName,
      { metadata: { ...metadata, resourceVersion: node.metadata?.resourceVersion } },
      'merge',
      { signal },
    );
  }

  async #readNodeUid(signal: AbortSignal): Promise<string> {
    if (this.#nodeUid !== undefined) return this.#nodeUid;
    const node = await this.#o.client.get<Node>(NODES, this.#o.nodeName, { signal });
    const uid = node.metadata?.uid;
    if (uid === undefined || uid === '') throw new Error(`node "${this.#o.nodeName}" has no uid`);
    this.#nodeUid = uid;
    return uid;
  }

  /** The CSINode, created if missing; one owned by another Node uid is deleted (and this try fails). */
  async #ownedCsiNode(signal: AbortSignal): Promise<CSINode> {
    const { client, nodeName } = this.#o;
    const uid = await this.#readNodeUid(signal);
    let csiNode: CSINode;
    try {
      csiNode = await client.get<CSINode>(CSINODES, nodeName, { signal });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      return client.create<CSINode>(
        CSINODES,
        {
          apiVersion: 'storage.k8s.io/v1',
          kind: 'CSINode',
          metadata: {
            name: nodeName,
            ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: nodeName, uid }],
          },
          spec: { drivers: [] },
        },
        { signal },
      );
    }
    const owner = csiNode.metadata?.ownerReferences?.find((r) => r.kind === 'Node');
    const owned = csiNode.metadata?.ownerReferences?.some(
      (r) => r.kind === 'Node' && r.name === nodeName && r.uid === uid,
    );
    if (owned !== true) {
      this.#o.logger.info('Existing CSINode is owned by a different node, cleaning up', {
        csiNode: nodeName,
        oldNodeID: owner?.uid ?? '',
        newNodeID: uid,
      });
      await client.delete(CSINODES, nodeName, { signal });
      throw new Error(
        `CSINode "${nodeName}" was owned by different node (oldNodeID="${owner?.uid ?? ''}", newNodeID="${uid}"), deleted it`,
      );
    }
    return csiNode;
  }

  async #installInCsiNode(
    driverName: string,
    nodeId: string,
    maxVolumesPerNode: number,
    topology: Readonly<Record<string, string>>,
    signal: AbortSignal,
  ): Promise<void> {
    const csiNode = await this.#ownedCsiNode(signal);
    const topologyKeys = Object.keys(topology).sort();
    const current = driversOf(csiNode);
    const existing = current.find((d) => d.name === driverName);
    const count = Math.min(maxVolumesPerNode, MAX_INT32);
    const keepCount =
      maxVolumesPerNode <= 0
        ? existing?.allocatable?.count === undefined
        : existing?.allocatable?.count === count;
    if (
      existing !== undefined &&
      existing.nodeID === nodeId &&
      sameKeys(existing.topologyKeys, topologyKeys) &&
      (keepCount || maxVolumesPerNode < 0)
    ) {
      return;
    }
    if (maxVolumesPerNode < 0) {
      this.#o.logger.error('Invalid attach limit value cannot be added to CSINode object', {
        driver: driverName,
        maxVolumesPerNode,
      });
    }
    const driver: CSINodeDriver = {
      name: driverName,
      nodeID: nodeId,
      topologyKeys,
      ...(maxVolumesPerNode > 0 && { allocatable: { count } }),
    };
    await this.#o.client.update<CSINode>(
      CSINODES,
      this.#o.nodeName,
      {
        ...csiNode,
        spec: {
          ...csiNode.spec,
          drivers: [...current.filter((d) => d.name !== driverName), driver],
        },
      },
      { signal },
    );
  }
}
