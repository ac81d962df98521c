/**
 * Registers the Node and keeps its status current: computes it every
 * nodeStatusUpdateFrequency, posts it when it changed or when nodeStatusReportFrequency
 * has passed since the last post. Failures are retried with jittered back-off and never
 * end the loop; a deleted Node is registered again.
 */
import type { Node, NodeRuntimeHandler, NodeStatus, Taint } from 'kubernetes-types/core/v1.js';
import type { ImageService, RuntimeService } from '../cri/index.ts';
import type { EventRecorder } from '../events/types.ts';
import { isAlreadyExists, isNotFound, NODES, type KubeClient } from '../kube/types.ts';
import { retryDelay } from '../util/backoff.ts';
import type { Clock } from '../util/clock.ts';
import { isAbortError, isAborted } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import {
  buildNodeStatus,
  initialNode,
  nodeFeatures,
  nodeImages,
  nodeRuntimeHandlers,
  statusFingerprint,
  type NodeFeatures,
  type NodeReserved,
  type NodeStatusInput,
} from './build.ts';
import type { HostInfoProvider } from './host-info.ts';
import type { NodeStatusController } from './types.ts';

export interface NodeStatusManagerOptions {
  readonly client: KubeClient;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly host: HostInfoProvider;
  readonly runtime: Pick<RuntimeService, 'version' | 'status'>;
  /** Lists the runtime's images for status.images. */
  readonly images: Pick<ImageService, 'listImages'>;
  /** nodeStatusMaxImages: how many images status.images names (-1: all). */
  readonly maxImages: number;
  readonly recorder: EventRecorder;
  readonly nodeName: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly taints: readonly Taint[];
  readonly providerID?: string;
  readonly nodeIPs: readonly string[];
  readonly kubeletPort: number;
  /** Node.status.declaredFeatures (nodestatus/build.ts `declaredFeatures`). */
  readonly declaredFeatures?: readonly string[];
  readonly maxPods: number;
  readonly updateFrequencyMs: number;
  readonly reportFrequencyMs: number;
  readonly evictionMemoryBytes: number;
  readonly evictionNodefsFraction: number;
  /** kubeReserved + systemReserved (absent: none). */
  readonly reserved?: NodeReserved;
  /** berth's own health: a message per failing check (PLEG, pod source, …). */
  readonly healthProblems: () => readonly string[];
  /** The eviction manager's pressure conditions now True (MemoryPressure, ...). */
  readonly pressure?: () => readonly string[];
  /**
   * The volume manager's attachable volumes mounted or being mounted: the
   * attach-detach controller never detaches a volume this list names.
   */
  readonly volumesInUse?: () => readonly string[];
}

/** The events upstream records when a pressure condition turns True / False. */
const PRESSURE_EVENTS: Readonly<Record<string, readonly [string, string]>> = {
  MemoryPressure: ['NodeHasInsufficientMemory', 'NodeHasSufficientMemory'],
  DiskPressure: ['NodeHasDiskPressure', 'NodeHasNoDiskPressure'],
  PIDPressure: ['NodeHasInsufficientPID', 'NodeHasSufficientPID'],
};

export class NodeStatusManager implements NodeStatusController {
  readonly #o: NodeStatusManagerOptions;
  #node: Node | undefined;
  #lastPosted: string | undefined;
  #lastPostAt = Number.NEGATIVE_INFINITY;
  #lastReady: boolean | undefined;
  /**
   * What the runtime last said of its handlers and features (CRI Status); kept when a
   * Status call fails, as upstream's runtimeState keeps them.
   */
  #handlers: readonly NodeRuntimeHandler[] | undefined;
  #features: NodeFeatures | undefined;
  /** The Node built locally before the API has one (upstream's initialNode). */
  #local: Node | undefined;
  readonly #registered = Promise.withResolvers<true>();

  constructor(options: NodeStatusManagerOptions) {
    this.#o = options;
    // Nobody may be waiting when berth stops before registering.
    this.#registered.promise.catch(() => undefined);
  }

  /**
   * The Node as last read or written (uid, podCIDR, labels); before the API has
   * answered, the one built by `buildLocal` (no UID), as upstream's getNodeAnyWay.
   */
  get node(): Node | undefined {
    return this.#node ?? this.#local;
  }

  /**
   * Builds the Node from this host alone (labels, taints, capacity, allocatable), so
   * static pods are admitted and the pod cgroups sized while the API server is
   * unreachable, or absent (standalone), as upstream's initialNode.
   */
  async buildLocal(signal: AbortSignal): Promise<Node> {
    const o = this.#o;
    const [capacity, systemInfo, version] = await Promise.all([
      o.host.capacity(),
      o.host.systemInfo(),
      o.runtime.version({}, { signal, timeoutMs: 5000 }).catch(() => undefined),
    ]);
    const base = initialNode({
      nodeName: o.nodeName,
      labels: o.labels,
      taints: o.taints,
      ...(o.providerID !== undefined && { providerID: o.providerID }),
    });
    const node: Node = {
      ...base,
      status: buildNodeStatus(undefined, {
        ...this.#statusInput(capacity, systemInfo, version, undefined),
        notReadyReason: undefined,
      }),
    };
    this.#local = node;
    return node;
  }

  /** Resolves once the Node was created or adopted in the API. */
  whenRegistered(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        reject(signal.reason as Error);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      void this.#registered.promise.then(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      });
    });
  }

  /** Creates the Node or adopts an existing one; retries until it succeeds or `signal` aborts. */
  async register(signal: AbortSignal): Promise<Node> {
    const { client, logger, clock, nodeName } = this.#o;
    for (let attempt = 0; ; attempt++) {
      try {
        const wanted = initialNode({
          nodeName,
          labels: this.#o.labels,
          taints: this.#o.taints,
          ...(this.#o.providerID !== undefined && { providerID: this.#o.providerID }),
        });
        try {
          this.#node = await client.create(NODES, wanted, { signal });
          logger.info('Successfully registered node', { node: nodeName });
        } catch (err) {
          if (!isAlreadyExists(err)) throw err;
          // Adopt: keep what others set, make sure our labels are there.
          this.#node = await client.patch<Node>(
            NODES,
            nodeName,
            { metadata: { labels: wanted.metadata?.labels } },
            'strategic',
            { signal },
          );
          logger.info('Node already registered, adopted it', { node: nodeName });
        }
        this.#lastPosted = undefined;
        this.#registered.resolve(true);
        return this.#node;
      } catch (err) {
        if (signal.aborted) throw err;
        const delay = retryDelay(attempt, 500, 7000);
        logger.warn('Unable to register node, will retry', {
          node: nodeName,
          error: String(err),
          retryInMs: Math.round(delay),
        });
        await clock.sleep(delay, signal);
      }
    }
  }

  async #notReadyReason(signal: AbortSignal): Promise<string | undefined> {
    const problems = [...this.#o.healthProblems()];
    try {
      const status = await this.#o.runtime.status({}, { signal, timeoutMs: 5000 });
      this.#handlers = nodeRuntimeHandlers(status.runtimeHandlers);
      this.#features = nodeFeatures(status.features);
      const conditions = status.status?.conditions ?? [];
      for (const type of ['RuntimeReady', 'NetworkReady']) {
        const c = conditions.find((x) => x.type === type);
        if (c?.status !== true) {
          const what =
            type === 'RuntimeReady'
              ? 'container runtime not ready'
              : 'container runtime network not ready';
          problems.push(
            `${what}: ${type}=false reason:${c?.reason ?? ''} message:${c?.message ?? 'not reported'}`,
          );
        }
      }
    } catch (err) {
      if (isAbortError(err) || signal.aborted) throw err;
      problems.push(`container runtime is down: ${String(err)}`);
    }
    return problems.length === 0 ? undefined : problems.join(', ');
  }

  /** status.images from the runtime; undefined (keep the last) when it cannot list them. */
  async #images(signal: AbortSignal) {
    try {
      const { images } = await this.#o.images.listImages({}, { signal, timeoutMs: 5000 });
      return nodeImages(
        images.map((i) => ({
          id: i.id,
          repoTags: i.repoTags,
          repoDigests: i.repoDigests,
          sizeBytes: Number(i.size),
        })),
        this.#o.maxImages,
      );
    } catch (err) {
      if (isAborted(signal)) throw err;
      this.#o.logger.warn('Error getting image list', { error: String(err) });
      return undefined;
    }
  }

  /** Computes the status and posts it if needed. Returns true when it posted. */
  async syncOnce(signal: AbortSignal): Promise<boolean> {
    const o = this.#o;
    if (this.#node === undefined) await this.register(signal);
    // Re-read the Node each round (as upstream does): it may have been deleted, and others
    // (the controller-manager) set fields such as spec.podCIDR.
    try {
      this.#node = await o.client.get<Node>(NODES, o.nodeName, { signal });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      o.logger.warn('Node object was deleted, registering it again', { node: o.nodeName });
      this.#node = undefined;
      this.#lastPosted = undefined;
      await this.register(signal);
    }
    const [capacity, systemInfo, version, images] = await Promise.all([
      o.host.capacity(),
      o.host.systemInfo(),
      o.runtime.version({}, { signal, timeoutMs: 5000 }).catch(() => undefined),
      o.maxImages === 0 ? undefined : this.#images(signal),
    ]);
    const notReadyReason = await this.#notReadyReason(signal);
    const previous: NodeStatus | undefined = this.#node?.status;
    const status = buildNodeStatus(previous, {
      ...this.#statusInput(capacity, systemInfo, version, previous),
      notReadyReason,
      ...(images !== undefined && { images }),
      ...(this.#handlers !== undefined && { runtimeHandlers: this.#handlers }),
      ...(this.#features !== undefined && { features: this.#features }),
    });
    const fingerprint = statusFingerprint(status);
    const due = o.clock.monotonic() - this.#lastPostAt >= o.reportFrequencyMs;
    if (fingerprint === this.#lastPosted && !due) return false;
    try {
      this.#node = await o.client.patch<Node>(NODES, o.nodeName, { status }, 'strategic', {
        subresource: 'status',
        signal,
      });
    } catch (err) {
      if (isNotFound(err)) {
        o.logger.warn('Node object was deleted, registering it again', { node: o.nodeName });
        this.#node = undefined;
        this.#lastPosted = undefined;
        await this.register(signal);
        this.#node = await o.client.patch<Node>(NODES, o.nodeName, { status }, 'strategic', {
          subresource: 'status',
          signal,
        });
      } else {
        throw err;
      }
    }
    this.#lastPosted = fingerprint;
    this.#lastPostAt = o.clock.monotonic();
    const ready = notReadyReason === undefined;
    if (ready !== this.#lastReady) {
      const target = { kind: 'Node' as const, name: o.nodeName, uid: o.nodeName };
      o.recorder.event(
        target,
        'Normal',
        ready ? 'NodeReady' : 'NodeNotReady',
        `Node ${o.nodeName} status is now: ${ready ? 'NodeReady' : 'NodeNotReady'}`,
      );
      this.#lastReady = ready;
    }
    this.#pressureEvents(status);
    return true;
  }

  #lastPressure = new Map<string, string>();

  /** Upstream's recordNodeStatusEvent when a pressure condition turns (NodeHasDiskPressure...). */
  #pressureEvents(status: NodeStatus): void {
    const o = this.#o;
    for (const c of status.conditions ?? []) {
      const events = PRESSURE_EVENTS[c.type];
      if (events === undefined) continue;
      const before = this.#lastPressure.get(c.type);
      this.#lastPressure.set(c.type, c.status);
      if (before === undefined || before === c.status) continue;
      const reason = c.status === 'True' ? events[0] : events[1];
      o.recorder.event(
        { kind: 'Node', name: o.nodeName, uid: o.nodeName },
        'Normal',
        reason,
        `Node ${o.nodeName} status is now: ${reason}`,
      );
    }
  }

  /** What every status is built from, but readiness and images. */
  #statusInput(
    capacity: Awaited<ReturnType<HostInfoProvider['capacity']>>,
    systemInfo: Awaited<ReturnType<HostInfoProvider['systemInfo']>>,
    version: { runtimeName: string; runtimeVersion: string } | undefined,
    previous: NodeStatus | undefined,
  ): Omit<NodeStatusInput, 'notReadyReason'> {
    const o = this.#o;
    return {
      nodeName: o.nodeName,
      capacity,
      systemInfo,
      maxPods: o.maxPods,
      containerRuntimeVersion:
        version === undefined
          ? (previous?.nodeInfo?.containerRuntimeVersion ?? '')
          : `${version.runtimeName}://${version.runtimeVersion}`,
      nodeIPs: o.nodeIPs,
      kubeletPort: o.kubeletPort,
      ...(o.declaredFeatures !== undefined && { declaredFeatures: o.declaredFeatures }),
      evictionMemoryBytes: o.evictionMemoryBytes,
      evictionNodefsFraction: o.evictionNodefsFraction,
      ...(o.reserved !== undefined && { reserved: o.reserved }),
      ...(o.pressure !== undefined && { pressure: o.pressure() }),
      ...(o.volumesInUse !== undefined && { volumesInUse: o.volumesInUse() }),
      now: new Date(o.clock.now()),
    };
  }

  /** The status loop; returns when `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    let failures = 0;
    while (!signal.aborted) {
      let wait = this.#o.updateFrequencyMs;
      try {
        await this.syncOnce(signal);
        failures = 0;
      } catch (err) {
        if (isAborted(signal)) return;
        failures++;
        wait = Math.min(wait, retryDelay(failures, 200, this.#o.updateFrequencyMs));
        this.#o.logger.warn('Error updating node status, will retry', {
          node: this.#o.nodeName,
          error: String(err),
          failures,
        });
      }
      await this.#o.clock.sleep(wait, signal).catch(() => undefined);
    }
  }
}
