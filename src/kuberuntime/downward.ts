/**
 * Downward API values for env (`valueFrom.fieldRef` / `resourceFieldRef`) and for
 * downwardAPI volumes, as upstream's kubelet computes them (podFieldSelectorRuntimeValue,
 * fieldpath.ExtractFieldPathAsString, resource.ExtractContainerResourceValue).
 *
 * Env may read metadata.name/namespace/uid, one label or annotation, spec.nodeName,
 * spec.serviceAccountName and the host and pod IPs; volumes read metadata only, but
 * also all labels or annotations at once. A container without a cpu, memory or
 * ephemeral-storage limit reports the pod-level limit (cpu, memory) or else the node's
 * allocatable instead (defaultPodLimitsForDownwardAPI): the most it could ever use.
 */
import type { Container, Pod, ResourceRequirements } from 'kubernetes-types/core/v1.js';
import type { DownwardResolver } from '../volumes/types.ts';
import { BerthError } from '../util/errors.ts';
import { parseQuantity } from '../util/quantity.ts';

export type DownwardErrorCode =
  | 'BERTH_DOWNWARD_UNSUPPORTED_FIELD'
  | 'BERTH_DOWNWARD_INVALID_SUBSCRIPT'
  | 'BERTH_DOWNWARD_NO_HOST_IP'
  | 'BERTH_DOWNWARD_CONTAINER_NOT_FOUND'
  | 'BERTH_DOWNWARD_INVALID_QUANTITY';

/** A fieldRef or resourceFieldRef berth cannot resolve (CreateContainerConfigError). */
export class DownwardError extends BerthError {
  override readonly code: DownwardErrorCode;
  constructor(code: DownwardErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.code = code;
  }
}

/** The node's allocatable resources as quantities. */
export interface NodeAllocatable {
  readonly cpu: string;
  readonly memory: string;
  readonly 'ephemeral-storage'?: string;
}

export interface HostDownwardResolverOptions {
  /** The node's IPs, preferred family first (status.hostIP is the first). */
  hostIPs(): readonly string[];
  /** The pod's IPs in the node's family order (status.podIP is the first). */
  podIPs(pod: Pod): readonly string[];
  nodeAllocatable(): NodeAllocatable;
}

/** Splits `path['key']` into path and key (fieldpath.SplitMaybeSubscriptedPath). */
export function splitSubscript(fieldPath: string): { path: string; key?: string } {
  if (!fieldPath.endsWith("']")) return { path: fieldPath };
  const inner = fieldPath.slice(0, -2);
  const at = inner.indexOf("['");
  if (at <= 0) return { path: fieldPath };
  return { path: inner.slice(0, at), key: inner.slice(at + 2) };
}

const NAME_PART = /^[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$/;

/** Upstream's IsQualifiedName: `[prefix/]name`, name <= 63, prefix a DNS subdomain. */
export function isQualifiedName(value: string): boolean {
  const parts = value.split('/');
  if (parts.length > 2) return false;
  const name = parts.length === 2 ? (parts[1] ?? '') : value;
  if (parts.length === 2) {
    const prefix = parts[0] ?? '';
    if (prefix.length === 0 || prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix)) return false;
  }
  return name.length > 0 && name.length <= 63 && NAME_PART.test(name);
}

const ESCAPES: Readonly<Record<string, string>> = {
  '\x07': '\\a',
  '\b': '\\b',
  '\f': '\\f',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\v': '\\v',
  '"': '\\"',
  '\\': '\\\\',
};
// Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols and ASCII space.
const PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;

/** A Go `%q` rendering of `s` (strconv.Quote), as downward API volume files show maps. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const escaped = ESCAPES[ch];
    if (escaped !== undefined) {
      out += escaped;
      continue;
    }
    const cp = ch.codePointAt(0) ?? 0;
    if (cp >= 0xd800 && cp <= 0xdfff) {
      // A lone surrogate is not UTF-8; Go's JSON decoding has already made it U+FFFD.
      out += '\ufffd';
    } else if (PRINTABLE.test(ch)) {
      out += ch;
    } else if (cp < 0x20 || cp === 0x7f) {
      out += `\\x${cp.toString(16).padStart(2, '0')}`;
    } else if (cp < 0x10000) {
      out += `\\u${cp.toString(16).padStart(4, '0')}`;
    } else {
      out += `\\U${cp.toString(16).padStart(8, '0')}`;
    }
  }
  return `${out}"`;
}

/** All entries as `key="value"` lines sorted by key, no final newline (fieldpath.FormatMap). */
export function formatMap(m: Readonly<Record<string, string>> | undefined): string {
  const keys = Object.keys(m ?? {}).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return keys.map((k) => `${k}=${goQuote(m?.[k] ?? '')}`).join('\n');
}

function unsupported(fieldPath: string): DownwardError {
  return new DownwardError(
    'BERTH_DOWNWARD_UNSUPPORTED_FIELD',
    `unsupported fieldPath: ${fieldPath}`,
  );
}

/** metadata.* fields, the part volumes and env share (ExtractFieldPathAsString). */
function metadataField(pod: Pod, fieldPath: string, use: 'env' | 'volume'): string {
  const meta = pod.metadata ?? {};
  const { path, key } = splitSubscript(fieldPath);
  if (key !== undefined) {
    if (path !== 'metadata.labels' && path !== 'metadata.annotations') {
      throw new DownwardError(
        'BERTH_DOWNWARD_UNSUPPORTED_FIELD',
        `fieldPath ${JSON.stringify(fieldPath)} does not support subscript`,
      );
    }
    // Annotation keys are checked case-insensitively, as upstream does.
    const checked = path === 'metadata.annotations' ? key.toLowerCase() : key;
    if (!isQualifiedName(checked)) {
      throw new DownwardError(
        'BERTH_DOWNWARD_INVALID_SUBSCRIPT',
        `invalid key subscript in ${fieldPath}: ${JSON.stringify(key)} is not a qualified name`,
      );
    }
    const map = (path === 'metadata.labels' ? meta.labels : meta.annotations) ?? {};
    // hasOwn: `constructor` is a valid label key and must not reach Object.prototype.
    return Object.hasOwn(map, key) ? (map[key] ?? '') : '';
  }
  switch (fieldPath) {
    case 'metadata.name':
      return meta.name ?? '';
    case 'metadata.namespace':
      return meta.namespace ?? '';
    case 'metadata.uid':
      return meta.uid ?? '';
    case 'metadata.labels':
    case 'metadata.annotations':
      // The API allows the whole map only in volumes: env values are single strings.
      if (use === 'env') throw unsupported(fieldPath);
      return formatMap(fieldPath === 'metadata.labels' ? meta.labels : meta.annotations);
    default:
      throw unsupported(fieldPath);
  }
}

function findContainer(pod: Pod, name: string): Container | undefined {
  return (
    pod.spec?.containers.find((c) => c.name === name) ??
    pod.spec?.initContainers?.find((c) => c.name === name)
  );
}

function quantity(text: string, what: string): number {
  try {
    return parseQuantity(text);
  } catch (err) {
    throw new DownwardError(
      'BERTH_DOWNWARD_INVALID_QUANTITY',
      `Cannot read ${what} as a quantity: current value is ${JSON.stringify(text)}`,
      { cause: err },
    );
  }
}

// Quantity.Value() and MilliValue() round up to whole units; the epsilon absorbs
// binary floating point noise ("0.3" * 1000 is 300.00000000000006).
const ceilUnits = (v: number): number => Math.ceil(v - 1e-9);
const integer = (v: number): string => (Number.isFinite(v) ? BigInt(v).toString() : String(v));

const MERGED = ['cpu', 'memory', 'ephemeral-storage'] as const;

/** spec.resources.limits (pod-level resources), newer than the kubernetes-types in use. */
function podLevelLimits(pod: Pod): Readonly<Record<string, string>> | undefined {
  const spec = pod.spec as { resources?: ResourceRequirements } | undefined;
  return spec?.resources?.limits;
}

/** Resolves downward API fields from the pod, the node's IPs and its allocatable. */
export class HostDownwardResolver implements DownwardResolver {
  readonly #o: HostDownwardResolverOptions;

  constructor(options: HostDownwardResolverOptions) {
    this.#o = options;
  }

  podField(pod: Pod, fieldPath: string, use: 'env' | 'volume'): string {
    if (use === 'volume') return metadataField(pod, fieldPath, use);
    switch (fieldPath) {
      case 'spec.nodeName':
        return pod.spec?.nodeName ?? '';
      case 'spec.serviceAccountName':
        return pod.spec?.serviceAccountName ?? '';
      case 'status.hostIP':
        return this.#hostIPs()[0] ?? '';
      case 'status.hostIPs':
        return this.#hostIPs().join(',');
      case 'status.podIP':
        return this.#o.podIPs(pod)[0] ?? '';
      case 'status.podIPs':
        return this.#o.podIPs(pod).join(',');
      default:
        return metadataField(pod, fieldPath, use);
    }
  }

  resourceField(pod: Pod, containerName: string, resource: string, divisor?: string): string {
    const container = findContainer(pod, containerName);
    if (container === undefined) {
      throw new DownwardError(
        'BERTH_DOWNWARD_CONTAINER_NOT_FOUND',
        `container ${containerName} not found`,
      );
    }
    const dot = resource.indexOf('.');
    const kind = resource.slice(0, dot);
    const name = resource.slice(dot + 1);
    if (
      dot === -1 ||
      (kind !== 'limits' && kind !== 'requests') ||
      !(MERGED.some((m) => m === name) || name.startsWith('hugepages-'))
    ) {
      throw new DownwardError(
        'BERTH_DOWNWARD_UNSUPPORTED_FIELD',
        `unsupported container resource : ${resource}`,
      );
    }
    const text =
      kind === 'limits' ? this.#limit(pod, container, name) : container.resources?.requests?.[name];
    const value = text === undefined ? 0 : quantity(text, resource);
    const div = divisor === undefined ? 0 : quantity(divisor, `the divisor of ${resource}`);
    if (name === 'cpu') {
      const divMilli = div === 0 ? 1000 : ceilUnits(div * 1000);
      return integer(Math.ceil(ceilUnits(value * 1000) / divMilli));
    }
    const divUnits = div === 0 ? 1 : ceilUnits(div);
    return integer(Math.ceil(ceilUnits(value) / divUnits));
  }

  #limit(pod: Pod, container: Container, name: string): string | undefined {
    const limit = container.resources?.limits?.[name];
    const merged = MERGED.find((m) => m === name);
    if (merged === undefined) return limit; // hugepages always have a limit
    if (limit !== undefined && quantity(limit, `limits.${name}`) !== 0) return limit;
    // Pod-level limits (cpu and memory only) bound every container before the node does.
    const podLimit = podLevelLimits(pod)?.[name];
    if ((name === 'cpu' || name === 'memory') && podLimit !== undefined) {
      if (quantity(podLimit, `pod limits.${name}`) !== 0) return podLimit;
    }
    return this.#o.nodeAllocatable()[merged] ?? limit;
  }

  #hostIPs(): readonly string[] {
    const ips = this.#o.hostIPs();
    if (ips.length === 0) {
      throw new DownwardError(
        'BERTH_DOWNWARD_NO_HOST_IP',
        'Cannot resolve status.hostIP: the node has no IP address yet',
      );
    }
    return ips;
  }
}
