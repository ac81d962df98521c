/**
 * The node status controller as start-up, the plugin wiring and node shutdown use it
 * (upstream's Kubelet registerWithAPIServer, syncNodeStatus and getNodeAnyWay, with the
 * nodestatus setters behind them). NodeStatusManager (manager.ts) posts to the API and
 * reads the runtime; FakeNodeStatusManager (fake.ts) keeps the Node in memory; both
 * pass contract.ts.
 */
import type { Node } from 'kubernetes-types/core/v1.js';

export interface NodeStatusController {
  /**
   * The Node as last read or written; before the API has answered, the one `buildLocal`
   * made (upstream's getNodeAnyWay); undefined before either.
   */
  readonly node: Node | undefined;
  /** Builds the Node from this host alone (upstream's initialNode), registering nothing. */
  buildLocal(signal: AbortSignal): Promise<Node>;
  /** Creates the Node or adopts an existing one; retries until it succeeds or `signal` aborts. */
  register(signal: AbortSignal): Promise<Node>;
  /** Resolves once the Node was created or adopted; rejects when `signal` aborts first. */
  whenRegistered(signal: AbortSignal): Promise<void>;
  /**
   * Registers the Node if needed (again, when it was deleted), computes its status and
   * posts it when it changed or nodeStatusReportFrequency has passed. True when it
   * posted; rejects when the API does.
   */
  syncOnce(signal: AbortSignal): Promise<boolean>;
  /** syncOnce every nodeStatusUpdateFrequency (sooner after a failure) until `signal` aborts; never rejects. */
  run(signal: AbortSignal): Promise<void>;
}
