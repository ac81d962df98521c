/**
 * Pod admission: the checks upstream's kubelet runs on every new pod before it starts
 * anything (pkg/kubelet/lifecycle predicate.go). The scheduler normally guarantees them,
 * but pods bound by spec.nodeName, static pods and races (two pods scheduled on stale
 * information) reach the node anyway; a pod that does not fit is rejected (phase Failed)
 * instead of overcommitting the node. Pure: the caller supplies the node and the pods
 * already admitted.
 */
import type {
  Node,
  NodeSelectorRequirement,
  NodeSelectorTerm,
  Pod,
  Taint,
  Toleration,
} from 'kubernetes-types/core/v1.js';
import { addRequests, podRequests } from '../container/pod-requests.ts';
import { milliCpu, parseQuantity } from '../util/quantity.ts';
import { appArmorRejection } from './apparmor.ts';
import { forbiddenSysctl } from './sysctls.ts';
import type { PodAdmitResult } from './types.ts';

export type { PodAdmitResult } from './types.ts';

export interface AdmissionInput {
  readonly pod: Pod;
  /** The node as last read or written (labels, taints, allocatable). */
  readonly node: Node;
  /** Pods admitted earlier and not yet terminal. */
  readonly active: readonly Pod[];
  /** allowedUnsafeSysctls of the KubeletConfiguration. */
  readonly allowedUnsafeSysctls?: readonly string[];
  /** Whether the host enforces AppArmor (pods that ask for it are refused otherwise). */
  readonly appArmorEnabled?: boolean;
}

const ADMIT: PodAdmitResult = { admit: true };

function reject(reason: string, message: string): PodAdmitResult {
  return { admit: false, reason, message };
}

function predicate(name: string, description: string): PodAdmitResult {
  return reject(name, `Predicate ${name} failed: ${description}`);
}

/** Static (file, http) pods carry their source in this annotation; API pods say "api". */
export function isStaticPod(pod: Pod): boolean {
  const source = pod.metadata?.annotations?.['kubernetes.io/config.source'];
  return source !== undefined && source !== 'api';
}

/** Upstream's SystemCriticalPriority (2 * 10^9): system-cluster-critical and above. */
const SYSTEM_CRITICAL_PRIORITY = 2_000_000_000;

/**
 * kubetypes.IsCriticalPod: static pods, mirror pods and pods with a system-critical
 * priority (system-node-critical, system-cluster-critical). Upstream never rejects one
 * for lack of resources: it evicts lower-priority pods to make room. berth has no such
 * eviction yet, so a critical pod is admitted over the node's allocatable instead.
 */
export function isCriticalPod(pod: Pod): boolean {
  if (isStaticPod(pod)) return true;
  if (pod.metadata?.annotations?.['kubernetes.io/config.mirror'] !== undefined) return true;
  const priority = pod.spec?.priority;
  return priority != null && priority >= SYSTEM_CRITICAL_PRIORITY;
}

function insufficient(resource: string, requested: number, used: number, capacity: number) {
  return reject(
    `OutOf${resource}`,
    `Node didn't have enough resource: ${resource}, requested: ${requested}, used: ${used}, capacity: ${capacity}`,
  );
}

function fits(input: AdmissionInput): PodAdmitResult {
  const alloc = input.node.status?.allocatable ?? {};
  const pods = alloc['pods'] === undefined ? Infinity : Math.floor(parseQuantity(alloc['pods']));
  if (input.active.length + 1 > pods) return insufficient('pods', 1, input.active.length, pods);
  const want = podRequests(input.pod);
  const used = input.active
    .map(podRequests)
    .reduce(addRequests, { cpu: 0, memory: 0, ephemeral: 0 });
  const capacity = {
    cpu: alloc['cpu'] === undefined ? Infinity : milliCpu(alloc['cpu']),
    memory: alloc['memory'] === undefined ? Infinity : Math.floor(parseQuantity(alloc['memory'])),
    ephemeral:
      alloc['ephemeral-storage'] === undefined
        ? Infinity
        : Math.floor(parseQuantity(alloc['ephemeral-storage'])),
  };
  if (want.cpu > 0 && want.cpu > capacity.cpu - used.cpu)
    return insufficient('cpu', want.cpu, used.cpu, capacity.cpu);
  if (want.memory > 0 && want.memory > capacity.memory - used.memory)
    return insufficient('memory', want.memory, used.memory, capacity.memory);
  if (want.ephemeral > 0 && want.ephemeral > capacity.ephemeral - used.ephemeral)
    return insufficient('ephemeral-storage', want.ephemeral, used.ephemeral, capacity.ephemeral);
  return ADMIT;
}

function requirementMatches(
  r: NodeSelectorRequirement,
  value: (key: string) => string | undefined,
): boolean {
  const v = value(r.key);
  const values = r.values ?? [];
  switch (r.operator) {
    case 'In':
      return v !== undefined && values.includes(v);
    case 'NotIn':
      return v === undefined || !values.includes(v);
    case 'Exists':
      return v !== undefined;
    case 'DoesNotExist':
      return v === undefined;
    case 'Gt':
    case 'Lt': {
      const [bound] = values;
      if (v === undefined || bound === undefined) return false;
      const [a, b] = [Number.parseInt(v, 10), Number.parseInt(bound, 10)];
      if (!Number.isFinite(a) || !Number.isFinite(b)) return false;
      return r.operator === 'Gt' ? a > b : a < b;
    }
    default:
      // An operator this version does not know matches nothing, as upstream.
      return false;
  }
}

function termMatches(term: NodeSelectorTerm, node: Node): boolean {
  const exprs = term.matchExpressions ?? [];
  const fields = term.matchFields ?? [];
  // An empty term selects no node.
  if (exprs.length === 0 && fields.length === 0) return false;
  const labels = node.metadata?.labels ?? {};
  return (
    exprs.every((r) => requirementMatches(r, (k) => labels[k])) &&
    fields.every((r) =>
      requirementMatches(r, (k) => (k === 'metadata.name' ? node.metadata?.name : undefined)),
    )
  );
}

/** nodeSelector and requiredDuringSchedulingIgnoredDuringExecution node affinity. */
export function nodeAffinityMatches(pod: Pod, node: Node): boolean {
  const labels = node.metadata?.labels ?? {};
  for (const [k, v] of Object.entries(pod.spec?.nodeSelector ?? {})) {
    if (labels[k] !== v) return false;
  }
  const required = pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  if (required === undefined) return true;
  return required.nodeSelectorTerms.some((t) => termMatches(t, node));
}

export function tolerates(t: Toleration, taint: Taint): boolean {
  if (t.effect !== undefined && t.effect !== '' && t.effect !== taint.effect) return false;
  if (t.key !== undefined && t.key !== '' && t.key !== taint.key) return false;
  // An empty key with Exists tolerates every taint.
  if (t.operator === 'Exists') return true;
  return (t.value ?? '') === (taint.value ?? '');
}

function untoleratedNoExecute(pod: Pod, node: Node): Taint | undefined {
  const tolerations = pod.spec?.tolerations ?? [];
  return (node.spec?.taints ?? []).find(
    (taint) => taint.effect === 'NoExecute' && !tolerations.some((t) => tolerates(t, taint)),
  );
}

interface HostPortKey {
  readonly ip: string;
  readonly protocol: string;
  readonly port: number;
}

function hostPorts(pod: Pod): HostPortKey[] {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].flatMap((c) =>
    (c.ports ?? [])
      .filter((p) => p.hostPort !== undefined && p.hostPort > 0)
      .map((p) => ({
        ip: p.hostIP === undefined || p.hostIP === '' ? '0.0.0.0' : p.hostIP,
        protocol: p.protocol ?? 'TCP',
        port: p.hostPort ?? 0,
      })),
  );
}

function portsConflict(a: HostPortKey, b: HostPortKey): boolean {
  if (a.port !== b.port || a.protocol !== b.protocol) return false;
  return a.ip === b.ip || a.ip === '0.0.0.0' || b.ip === '0.0.0.0';
}

/** Upstream's order: OS, sysctls, then resources, node affinity, node name, host ports, taints. */
export function admitPod(input: AdmissionInput): PodAdmitResult {
  const { pod, node } = input;
  const selectorOs = pod.spec?.nodeSelector?.['kubernetes.io/os'];
  const nodeOs = node.metadata?.labels?.['kubernetes.io/os'] ?? 'linux';
  if (selectorOs !== undefined && selectorOs !== nodeOs)
    return reject(
      'PodOSSelectorNodeLabelDoesNotMatch',
      "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
    );
  const os = pod.spec?.os?.name;
  if (os !== undefined && os !== 'linux')
    return reject('PodOSNotSupported', "Failed to admit pod as the OS field doesn't match node OS");
  const sysctl = forbiddenSysctl(pod, input.allowedUnsafeSysctls ?? []);
  if (sysctl !== undefined) return reject('SysctlForbidden', sysctl);
  const fit = fits(input);
  if (!fit.admit && !isCriticalPod(pod)) return fit;
  if (!nodeAffinityMatches(pod, node))
    return predicate('NodeAffinity', "node(s) didn't match Pod's node affinity/selector");
  const nodeName = pod.spec?.nodeName;
  if (nodeName !== undefined && nodeName !== '' && nodeName !== node.metadata?.name)
    return predicate('NodeName', "node(s) didn't match the requested node name");
  const used = input.active.flatMap(hostPorts);
  if (hostPorts(pod).some((p) => used.some((u) => portsConflict(p, u))))
    return predicate('NodePorts', "node(s) didn't have free ports for the requested pod ports");
  if (!isStaticPod(pod) && untoleratedNoExecute(pod, node) !== undefined)
    return predicate('TaintToleration', "node(s) had taints that the pod didn't tolerate");
  const appArmor = appArmorRejection(pod, input.appArmorEnabled ?? false);
  if (appArmor !== undefined) return reject('AppArmor', appArmor);
  return ADMIT;
}
