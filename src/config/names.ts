/**
 * Kubernetes name rules the kubelet's flags and configuration rely on: label keys and
 * values, DNS subdomains (node names), taints, IP addresses. Checks return a reason
 * string (or null when valid) so callers can say which flag or field is wrong.
 */
import { isIP } from 'node:net';

const DNS1123_LABEL = '[a-z0-9](?:[-a-z0-9]*[a-z0-9])?';
const DNS1123_SUBDOMAIN = new RegExp(`^${DNS1123_LABEL}(?:\\.${DNS1123_LABEL})*$`);
const QUALIFIED_NAME_PART = /^(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

/** Why `name` is not a DNS-1123 subdomain (node names, label prefixes), or null. */
export function checkDnsSubdomain(name: string): string | null {
  if (name.length > 253) return 'must be no more than 253 characters';
  if (!DNS1123_SUBDOMAIN.test(name)) {
    return "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
  }
  return null;
}

/** Why `key` is not a qualified name (`[prefix/]name`, as label and taint keys), or null. */
export function checkQualifiedName(key: string): string | null {
  const parts = key.split('/');
  if (parts.length > 2) return "a qualified name may contain at most one '/'";
  const name = parts.length === 2 ? (parts[1] ?? '') : key;
  if (parts.length === 2) {
    const prefix = parts[0] ?? '';
    if (prefix === '') return 'the prefix before "/" must not be empty';
    const why = checkDnsSubdomain(prefix);
    if (why !== null) return `prefix ${JSON.stringify(prefix)} ${why}`;
  }
  if (name === '') return 'the name part must not be empty';
  if (name.length > 63) return 'the name part must be no more than 63 characters';
  if (!QUALIFIED_NAME_PART.test(name)) {
    return "the name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
  }
  return null;
}

/** Why `value` is not a label value (empty is allowed), or null. */
export function checkLabelValue(value: string): string | null {
  if (value === '') return null;
  if (value.length > 63) return 'must be no more than 63 characters';
  if (!QUALIFIED_NAME_PART.test(value)) {
    return "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
  }
  return null;
}

// Labels a kubelet may set on its own Node (the NodeRestriction admission plugin refuses
// other kubernetes.io / k8s.io labels, so upstream rejects them at start-up instead).
const KUBELET_LABELS: ReadonlySet<string> = new Set([
  'kubernetes.io/hostname',
  'topology.kubernetes.io/zone',
  'topology.kubernetes.io/region',
  'failure-domain.beta.kubernetes.io/zone',
  'failure-domain.beta.kubernetes.io/region',
  'beta.kubernetes.io/instance-type',
  'node.kubernetes.io/instance-type',
  'kubernetes.io/os',
  'kubernetes.io/arch',
  'beta.kubernetes.io/os',
  'beta.kubernetes.io/arch',
]);
const KUBELET_LABEL_NAMESPACES = ['kubelet.kubernetes.io', 'node.kubernetes.io'] as const;

function labelNamespace(key: string): string {
  const slash = key.indexOf('/');
  return slash < 0 ? '' : key.slice(0, slash);
}

function inNamespace(ns: string, domain: string): boolean {
  return ns === domain || ns.endsWith(`.${domain}`);
}

/** True for a label in the kubernetes.io or k8s.io namespaces. */
export function isKubernetesLabel(key: string): boolean {
  const ns = labelNamespace(key);
  return inNamespace(ns, 'kubernetes.io') || inNamespace(ns, 'k8s.io');
}

/** True for a kubernetes.io label the kubelet is allowed to set on its Node. */
export function isKubeletLabel(key: string): boolean {
  if (KUBELET_LABELS.has(key)) return true;
  const ns = labelNamespace(key);
  return KUBELET_LABEL_NAMESPACES.some((allowed) => inNamespace(ns, allowed));
}

/**
 * Why a `--node-labels` pair is refused, or null. Besides the syntax, kubernetes.io and
 * k8s.io labels must be ones a kubelet may set on its own Node: the NodeRestriction
 * admission plugin would refuse the Node otherwise, so upstream fails at start-up.
 */
export function checkNodeLabel(key: string, value: string): string | null {
  const keyWhy = checkQualifiedName(key);
  if (keyWhy !== null) return `invalid label key ${JSON.stringify(key)}: ${keyWhy}`;
  const valueWhy = checkLabelValue(value);
  if (valueWhy !== null) return `invalid label value ${JSON.stringify(value)}: ${valueWhy}`;
  if (isKubernetesLabel(key) && !isKubeletLabel(key)) {
    return `label ${JSON.stringify(key)} is in the kubernetes.io/k8s.io namespace: only the prefixes ${KUBELET_LABEL_NAMESPACES.join(', ')} and the labels ${[...KUBELET_LABELS].sort().join(', ')} are allowed`;
  }
  return null;
}

/** Taint effects the API server accepts. */
export const TAINT_EFFECTS = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] as const;
export type TaintEffect = (typeof TAINT_EFFECTS)[number];

/** A node taint as the kubelet registers it (no timeAdded: the API server sets it). */
export interface Taint {
  readonly key: string;
  readonly value: string;
  readonly effect: TaintEffect;
}

function isTaintEffect(effect: string): effect is TaintEffect {
  return (TAINT_EFFECTS as readonly string[]).includes(effect);
}

/** Why a taint is invalid, or null. */
export function checkTaint(taint: {
  readonly key: string;
  readonly value?: string;
  readonly effect: string;
}): string | null {
  const keyWhy = checkQualifiedName(taint.key);
  if (keyWhy !== null) return `invalid taint key ${JSON.stringify(taint.key)}: ${keyWhy}`;
  const valueWhy = checkLabelValue(taint.value ?? '');
  if (valueWhy !== null) {
    return `invalid taint value ${JSON.stringify(taint.value ?? '')}: ${valueWhy}`;
  }
  if (!isTaintEffect(taint.effect)) {
    return `invalid taint effect ${JSON.stringify(taint.effect)}: expected one of ${TAINT_EFFECTS.join(', ')}`;
  }
  return null;
}

/**
 * Parses one taint in the flag syntax `key=value:Effect` or `key:Effect`.
 * @throws Error naming what is wrong.
 */
export function parseTaint(spec: string): Taint {
  const parts = spec.split(':');
  if (parts.length !== 2) {
    throw new Error(
      `invalid taint ${JSON.stringify(spec)}: expected key=value:Effect or key:Effect`,
    );
  }
  const kv = parts[0] ?? '';
  const effect = parts[1] ?? '';
  const eq = kv.indexOf('=');
  const key = eq < 0 ? kv : kv.slice(0, eq);
  const value = eq < 0 ? '' : kv.slice(eq + 1);
  const why = checkTaint({ key, value, effect });
  if (why !== null) throw new Error(why);
  // checkTaint proved the effect; narrow it for the type.
  return { key, value, effect: effect as TaintEffect };
}

/** Why `text` is not a literal IPv4 or IPv6 address, or null. */
export function checkIP(text: string): string | null {
  return isIP(text) === 0 ? `${JSON.stringify(text)} is not an IP address` : null;
}

/**
 * Parses `--node-ip`: one address, or two of different families (dual-stack). "0.0.0.0"
 * or "::" alone means "pick the default address of that family", as upstream.
 * @throws Error naming what is wrong.
 */
export function parseNodeIPs(text: string): readonly string[] {
  const ips = text.split(',').map((s) => s.trim());
  if (ips.length > 2) throw new Error('at most two addresses (one IPv4, one IPv6) may be given');
  for (const ip of ips) {
    const why = checkIP(ip);
    if (why !== null) throw new Error(why);
  }
  const [first, second] = ips;
  if (first !== undefined && second !== undefined) {
    if (isIP(first) === isIP(second)) {
      throw new Error('two addresses must be one IPv4 and one IPv6 (dual-stack)');
    }
    if (ips.some((ip) => ip === '0.0.0.0' || ip === '::')) {
      throw new Error('an unspecified address ("0.0.0.0" or "::") must be given alone');
    }
  }
  return ips;
}
