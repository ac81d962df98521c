/**
 * The node agent a fault scenario runs against: berth (default) or, with
 * FAULTS_AGENT=upstream, the upstream kubelet in the same harness, so RELIABILITY.md
 * can put both side by side. Plus the observations every scenario makes: the node's
 * Ready condition and the pods' state in the API and in the runtime.
 */
import type { Lease } from 'kubernetes-types/coordination/v1.js';
import type { Node, Pod } from 'kubernetes-types/core/v1.js';
import { GrpcCriClient, cri } from '../../src/cri/index.ts';
import { join } from 'node:path';
import { startBerth } from '../harness/berth-node.ts';
import type { Cluster } from '../harness/cluster.ts';
import { getJson } from '../harness/kube-helpers.ts';
import { startUpstreamKubelet } from '../harness/upstream-kubelet.ts';

export type AgentKind = 'berth' | 'upstream';

export interface NodeAgent {
  readonly kind: AgentKind;
  readonly nodeName: string;
  readonly logFile: string;
  /** Its --root-dir (pods/<uid> below it). */
  readonly rootDir: string;
  /** The cgroup its pod cgroups are made under. */
  readonly cgroupRoot: string;
  /** The kubelet API's HTTPS port and the healthz port, on 127.0.0.1. */
  readonly port: number;
  readonly healthzPort: number;
  pid(): number;
  alive(): boolean;
  /** Orderly stop (pods keep running for berth; the upstream harness also removes them). */
  stop(): Promise<void>;
  /**
   * Stops the process alone (SIGKILL: a crash; SIGTERM: an orderly stop, pods kept) and
   * starts it again over the same root directory; resolves once it runs.
   */
  restart(how: 'kill' | 'term'): Promise<void>;
}

export function agentKind(): AgentKind {
  const raw = process.env['FAULTS_AGENT'] ?? 'berth';
  if (raw !== 'berth' && raw !== 'upstream')
    throw new Error(`Cannot use FAULTS_AGENT=${raw}: expected berth or upstream`);
  return raw;
}

/** What a scenario changes in either agent's setup. */
export interface AgentOptions {
  /** The kubeconfig it reaches the API server with (e.g. a fault proxy's). */
  readonly kubeconfig?: string;
  /** berth: --root-dir (upstream's is fixed: mount over `upstreamRootDir` instead). */
  readonly rootDir?: string;
  /** Hard eviction off (evictionHard: {}). */
  readonly noEviction?: boolean;
  /** staticPodPath: a directory of static pod manifests. */
  readonly staticPodPath?: string;
  /** berth only: its environment (e.g. NODE_OPTIONS for the inspector). */
  readonly env?: Readonly<Record<string, string>>;
}

/** The Node name each agent registers in `cluster`. */
export function agentNodeName(cluster: Cluster, kind: AgentKind): string {
  return kind === 'upstream' ? `upstream-${cluster.id}` : `berth-${cluster.id}`;
}

/** The upstream harness's root directory for the agent of `cluster` (it cannot be moved). */
export function upstreamRootDir(cluster: Cluster): string {
  return join(cluster.root, 'nodes', agentNodeName(cluster, 'upstream'), 'kubelet');
}

export async function startAgent(
  cluster: Cluster,
  kind: AgentKind,
  options: AgentOptions = {},
): Promise<NodeAgent> {
  const nodeName = agentNodeName(cluster, kind);
  if (kind === 'upstream') {
    const kubelet = await startUpstreamKubelet(cluster, {
      nodeName,
      ...(options.kubeconfig !== undefined && { kubeconfig: options.kubeconfig }),
      config: {
        ...(options.noEviction === true && { evictionHard: {} }),
        ...(options.staticPodPath !== undefined && { staticPodPath: options.staticPodPath }),
      },
    });
    return {
      kind,
      nodeName,
      logFile: kubelet.process.logFile,
      rootDir: kubelet.rootDir,
      cgroupRoot: kubelet.cgroupRoot,
      port: kubelet.port,
      healthzPort: kubelet.healthzPort,
      pid: () => kubelet.process.pid,
      alive: () => kubelet.process.alive(),
      stop: () => kubelet.stop(),
      async restart(how) {
        if (how === 'kill') await kubelet.kill();
        else await kubelet.process.stop(30_000);
        await kubelet.restart();
      },
    };
  }
  let berth = await startBerth(cluster, {
    nodeName,
    ...(options.env !== undefined && { env: options.env }),
    extraArgs: [
      ...(options.kubeconfig !== undefined ? ['--kubeconfig', options.kubeconfig] : []),
      ...(options.rootDir !== undefined ? ['--root-dir', options.rootDir] : []),
    ],
    extraConfig: [
      ...(options.noEviction === true ? ['evictionHard: {}'] : []),
      ...(options.staticPodPath !== undefined ? [`staticPodPath: ${options.staticPodPath}`] : []),
    ],
  });
  return {
    kind,
    nodeName,
    logFile: berth.logFile,
    rootDir: options.rootDir ?? berth.dir,
    cgroupRoot: cluster.state.cgroupRoot,
    port: berth.port,
    healthzPort: berth.healthzPort,
    pid: () => berth.process.pid,
    alive: () => berth.process.alive(),
    stop: () => berth.stop(),
    async restart(how) {
      if (how === 'kill') await berth.kill();
      berth = await berth.restart();
    },
  };
}

/** The node's Ready condition status in the API ('True', 'False', 'Unknown' or undefined). */
export async function nodeReady(cluster: Cluster, nodeName: string): Promise<string | undefined> {
  const node = await getJson<Node>(cluster, ['get', 'node', nodeName]);
  return node?.status?.conditions?.find((c) => c.type === 'Ready')?.status;
}

/** Whether the node's Lease was renewed after `ms` (ms since the epoch). */
export async function leaseRenewedAfter(
  cluster: Cluster,
  node: string,
  ms: number,
): Promise<boolean> {
  const lease = await getJson<Lease>(cluster, ['-n', 'kube-node-lease', 'get', 'lease', node]);
  const renew = lease?.spec?.renewTime;
  return renew !== undefined && Date.parse(renew) > ms;
}

export async function podsOnNode(cluster: Cluster, nodeName: string): Promise<Pod[]> {
  const list = await getJson<{ items: Pod[] }>(cluster, [
    'get',
    'pods',
    '-A',
    '--field-selector',
    `spec.nodeName=${nodeName}`,
  ]);
  return list?.items ?? [];
}

/** One pod as the runtime sees it: its sandboxes and containers, by the kubelet's labels. */
export interface RuntimePod {
  readonly readySandboxes: string[];
  readonly sandboxes: number;
  readonly runningContainers: string[];
}

export async function runtimePods(socket: string): Promise<Map<string, RuntimePod>> {
  const client = new GrpcCriClient(socket, { defaultTimeoutMs: 15_000 });
  try {
    const [{ items }, { containers }] = await Promise.all([
      client.runtime.listPodSandbox({}),
      client.runtime.listContainers({}),
    ]);
    const byUid = new Map<string, RuntimePod>();
    const entry = (uid: string): RuntimePod => {
      let e = byUid.get(uid);
      if (e === undefined) {
        e = { readySandboxes: [], sandboxes: 0, runningContainers: [] };
        byUid.set(uid, e);
      }
      return e;
    };
    for (const s of items) {
      const uid = s.labels['io.kubernetes.pod.uid'] ?? s.metadata?.uid ?? '';
      const e = entry(uid);
      byUid.set(uid, { ...e, sandboxes: e.sandboxes + 1 });
      if (s.state === cri.PodSandboxState.SANDBOX_READY) entry(uid).readySandboxes.push(s.id);
    }
    for (const c of containers) {
      if (c.state !== cri.ContainerState.CONTAINER_RUNNING) continue;
      entry(c.labels['io.kubernetes.pod.uid'] ?? '').runningContainers.push(c.id);
    }
    return byUid;
  } finally {
    client.close();
  }
}

/** What a pod's containers look like in the API: id and restart count per container. */
export function containerIdentity(pod: Pod): string {
  return (pod.status?.containerStatuses ?? [])
    .map((c) => `${c.name}=${c.containerID ?? '-'}#${c.restartCount}`)
    .sort()
    .join(',');
}
