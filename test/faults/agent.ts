/**
 * The node agent a fault scenario runs against: berth (default) or, with
 * FAULTS_AGENT=upstream, the upstream kubelet in the same harness, so RELIABILITY.md
 * can put both side by side. Plus the observations every scenario makes: the node's
 * Ready condition and the pods' state in the API and in the runtime.
 */
import type { Node, Pod } from 'kubernetes-types/core/v1.js';
import { GrpcCriClient, cri } from '../../src/cri/index.ts';
import { startBerth, type BerthNodeOptions } from '../harness/berth-node.ts';
import type { Cluster } from '../harness/cluster.ts';
import { getJson } from '../harness/kube-helpers.ts';
import { startUpstreamKubelet } from '../harness/upstream-kubelet.ts';

export type AgentKind = 'berth' | 'upstream';

export interface NodeAgent {
  readonly kind: AgentKind;
  readonly nodeName: string;
  readonly logFile: string;
  pid(): number;
  /** Orderly stop (pods keep running for berth; the upstream harness also removes them). */
  stop(): Promise<void>;
}

export function agentKind(): AgentKind {
  const raw = process.env['FAULTS_AGENT'] ?? 'berth';
  if (raw !== 'berth' && raw !== 'upstream')
    throw new Error(`Cannot use FAULTS_AGENT=${raw}: expected berth or upstream`);
  return raw;
}

export async function startAgent(
  cluster: Cluster,
  kind: AgentKind,
  berthOptions: BerthNodeOptions = {},
): Promise<NodeAgent> {
  if (kind === 'upstream') {
    const kubelet = await startUpstreamKubelet(cluster, { nodeName: `upstream-${cluster.id}` });
    return {
      kind,
      nodeName: kubelet.nodeName,
      logFile: kubelet.process.logFile,
      pid: () => kubelet.process.pid,
      stop: () => kubelet.stop(),
    };
  }
  const berth = await startBerth(cluster, berthOptions);
  return {
    kind,
    nodeName: berth.nodeName,
    logFile: berth.logFile,
    pid: () => berth.process.pid,
    stop: () => berth.stop(),
  };
}

/** The node's Ready condition status in the API ('True', 'False', 'Unknown' or undefined). */
export async function nodeReady(cluster: Cluster, nodeName: string): Promise<string | undefined> {
  const node = await getJson<Node>(cluster, ['get', 'node', nodeName]);
  return node?.status?.conditions?.find((c) => c.type === 'Ready')?.status;
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
