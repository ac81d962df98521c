/**
 * The node agents the benchmark can measure. Each starts as its own, differently named
 * node of the shared cluster and is stopped before the next one starts. Adding one is
 * one entry in AGENTS.
 */
import { join } from 'node:path';
import type { Cluster } from '../test/harness/cluster.ts';
import { startBerth } from '../test/harness/berth-node.ts';
import { eventually } from '../test/harness/kube-helpers.ts';
import { startUpstreamKubelet } from '../test/harness/upstream-kubelet.ts';
import { clearSandboxes } from './runtimes.ts';

export interface AgentStartOptions {
  /** The agent must admit at least this many pods (the batch phase's size). */
  readonly maxPods: number;
  readonly log: (message: string) => void;
  /** The runtime it drives (default: the cluster's containerd). */
  readonly runtimeSocket?: string;
  /** Log verbosity (default: the agent's usual); 4 logs the lines start-trace.ts reads. */
  readonly verbosity?: number;
}

export interface RunningAgent {
  /** The Node it registered; the benchmark binds pods to it with spec.nodeName. */
  readonly nodeName: string;
  /** Process whose CPU time and memory are measured; undefined: not measured. */
  readonly pid?: number;
  /** The agent's log file. */
  readonly logFile?: string;
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
      ...(options.runtimeSocket !== undefined && { runtimeSocket: options.runtimeSocket }),
      ...(options.verbosity !== undefined && { verbosity: options.verbosity }),
    });
    return {
      nodeName: kubelet.nodeName,
      pid: kubelet.process.pid,
      logFile: join(kubelet.dir, 'kubelet.log'),
      stop: () => kubelet.stop(),
    };
  },
};

/** berth, started as a node process exactly as the e2e tests run it. */
export const berthAgent: Agent = {
  async start(cluster, options) {
    const nodeName = 'bench-berth';
    const runtimeSocket = options.runtimeSocket ?? cluster.runtime.socket;
    const berth = await startBerth(cluster, {
      nodeName,
      runtimeSocket,
      // Its own cgroup, as the upstream kubelet has: side by side, neither agent's
      // kubepods gets a larger CPU share than the other's.
      cgroupRoot: `${cluster.state.cgroupRoot}/${nodeName}`,
      extraConfig: [`maxPods: ${String(Math.max(110, options.maxPods + 10))}`],
      ...(options.verbosity !== undefined && { extraArgs: ['--v', String(options.verbosity)] }),
    });
    await eventually(
      'the berth node to be Ready',
      async () => {
        const out = await cluster
          .kubectl([
            'get',
            'node',
            nodeName,
            '-o',
            'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
          ])
          .catch(() => '');
        return out.trim() === 'True' ? true : undefined;
      },
      60_000,
    );
    options.log(`berth is Ready as ${nodeName}`);
    return {
      nodeName,
      pid: berth.process.pid,
      logFile: berth.logFile,
      async stop() {
        await berth.stop();
        // Leave the runtime empty for the next agent: berth keeps pods running on stop.
        await clearSandboxes(runtimeSocket);
        await cluster.kubectl(['delete', 'node', nodeName, '--wait=false']).catch(() => '');
      },
    };
  },
};

/** Agents by the name `--agents` takes. */
/** Agents started and not yet stopped, so an interrupted run can stop them first. */
const running = new Set<RunningAgent>();

/** `agent`, with what it starts tracked until it is stopped. */
function tracked(agent: Agent): Agent {
  return {
    async start(cluster, options) {
      const started = await agent.start(cluster, options);
      const entry: RunningAgent = {
        ...started,
        stop: async () => {
          running.delete(entry);
          await started.stop();
        },
      };
      running.add(entry);
      return entry;
    },
  };
}

/**
 * Stops every agent still running (an interrupted run). Before the cluster: an agent
 * left running restarts its pods while the runtime is torn down under it.
 */
export async function stopRunningAgents(log: (message: string) => void): Promise<void> {
  for (const agent of [...running]) {
    await agent.stop().catch((err: unknown) => {
      log(`stopping ${agent.nodeName}: ${String(err)}`);
    });
  }
}

export const AGENTS: Readonly<Record<string, Agent>> = {
  upstream: tracked(upstreamAgent),
  berth: tracked(berthAgent),
};
