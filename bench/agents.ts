/**
 * The node agents the benchmark can measure. Each starts as its own, differently named
 * node of the shared cluster and is stopped before the next one starts. Adding one is
 * one entry in AGENTS (berth's goes next to upstream's once it can run as a node).
 */
import type { Cluster } from '../test/harness/cluster.ts';
import { startUpstreamKubelet } from '../test/harness/upstream-kubelet.ts';

export interface AgentStartOptions {
  /** The agent must admit at least this many pods (the batch phase's size). */
  readonly maxPods: number;
  readonly log: (message: string) => void;
}

export interface RunningAgent {
  /** The Node it registered; the benchmark binds pods to it with spec.nodeName. */
  readonly nodeName: string;
  /** Process whose CPU time and memory are measured; undefined: not measured. */
  readonly pid?: number;
  /** Stops the agent and removes its pods from the runtime; the cluster keeps running. */
  stop(): Promise<void>;
}

export interface Agent {
  /** Starts the agent as a new node of `cluster`; resolves once that Node is Ready. */
  start(cluster: Cluster, options: AgentStartOptions): Promise<RunningAgent>;
}

/** The upstream kubelet of the pinned Kubernetes release, with the harness's configuration. */
export const upstreamAgent: Agent = {
  async start(cluster, options) {
    const kubelet = await startUpstreamKubelet(cluster, {
      nodeName: 'bench-upstream',
      config: { maxPods: Math.max(110, options.maxPods + 10) },
      log: options.log,
    });
    return { nodeName: kubelet.nodeName, pid: kubelet.process.pid, stop: () => kubelet.stop() };
  },
};

/** Agents by the name `--agents` takes. */
export const AGENTS: Readonly<Record<string, Agent>> = {
  upstream: upstreamAgent,
};
