/**
 * A NodeStatusController for other managers' tests: the "API" Node lives in memory
 * (`stored`; set it to undefined to delete it), its status is built from the host info
 * and health given, as the real manager builds it (build.ts), posted by the same rule
 * (changed, or nodeStatusReportFrequency passed) and on the injected clock. No runtime:
 * the runtime version is fixed and the runtime always ready. Both pass contract.ts.
 */
import type { Node } from 'kubernetes-types/core/v1.js';
import type { Clock } from '../util/clock.ts';
import { buildNodeStatus, initialNode, statusFingerprint, type NodeStatusInput } from './build.ts';
import type { HostInfoProvider } from './host-info.ts';
import type { NodeStatusController } from './types.ts';

export interface FakeNodeStatusManagerOptions {
  readonly clock: Clock;
  readonly nodeName: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly host: HostInfoProvider;
  readonly maxPods: number;
  readonly updateFrequencyMs: number;
  readonly reportFrequencyMs: number;
  /** A message per failing health check; any makes the node NotReady. */
  readonly healthProblems: () => readonly string[];
}

export class FakeNodeStatusManager implements NodeStatusController {
  /** The Node as the "API" stores it (undefined: not registered, or deleted). */
  stored: Node | undefined;
  /** Status posts made. */
  posts = 0;
  /** When set, the next syncOnce rejects with it (then cleared). */
  failNext: Error | undefined;
  readonly #o: FakeNodeStatusManagerOptions;
  #local: Node | undefined;
  #lastPosted: string | undefined;
  #lastPostAt = 0;
  #uids = 0;
  readonly #registered = Promise.withResolvers<true>();

  constructor(options: FakeNodeStatusManagerOptions) {
    this.#o = options;
    this.#registered.promise.catch(() => undefined);
  }

  get node(): Node | undefined {
    return this.stored ?? this.#local;
  }

  async buildLocal(signal: AbortSignal): Promise<Node> {
    signal.throwIfAborted();
    this.#local = { ...this.#initial(), status: buildNodeStatus(undefined, await this.#input()) };
    return this.#local;
  }

  register(signal: AbortSignal): Promise<Node> {
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    this.stored ??= {
      ...this.#initial(),
      metadata: { ...this.#initial().metadata, uid: `node-uid-${String(++this.#uids)}` },
    };
    this.#lastPosted = undefined;
    this.#registered.resolve(true);
    return Promise.resolve(this.stored);
  }

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

  async syncOnce(signal: AbortSignal): Promise<boolean> {
    signal.throwIfAborted();
    const err = this.failNext;
    this.failNext = undefined;
    if (err !== undefined) throw err;
    const node = this.stored ?? (await this.register(signal));
    const status = buildNodeStatus(node.status, await this.#input());
    const fingerprint = statusFingerprint(status);
    const now = this.#o.clock.now();
    if (fingerprint === this.#lastPosted && now - this.#lastPostAt < this.#o.reportFrequencyMs)
      return false;
    this.stored = { ...node, status };
    this.posts++;
    this.#lastPosted = fingerprint;
    this.#lastPostAt = now;
    return true;
  }

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      // The real manager retries sooner after a failure; one period is enough here.
      await this.syncOnce(signal).catch(() => undefined);
      await this.#o.clock.sleep(this.#o.updateFrequencyMs, signal).catch(() => undefined);
    }
  }

  #initial(): Node {
    return initialNode({ nodeName: this.#o.nodeName, labels: this.#o.labels, taints: [] });
  }

  async #input(): Promise<NodeStatusInput> {
    const o = this.#o;
    const problems = o.healthProblems();
    return {
      nodeName: o.nodeName,
      capacity: await o.host.capacity(),
      systemInfo: await o.host.systemInfo(),
      maxPods: o.maxPods,
      containerRuntimeVersion: 'fake://0.0.0',
      nodeIPs: [],
      kubeletPort: 10250,
      evictionMemoryBytes: 0,
      evictionNodefsFraction: 0,
      notReadyReason: problems.length === 0 ? undefined : problems.join(', '),
      now: new Date(o.clock.now()),
    };
  }
}
