/**
 * A static pod's identity, as upstream's kubelet derives it (pkg/kubelet/config
 * common.go): the manifest is decoded with the API's defaults, then
 *
 * - UID = FNV-1a-128 over the decoded Go pod (go-dump.ts), then `host:<node>` and
 *   `file:<path>` for a file, or `url:<url>` for the URL source; unless the
 *   manifest sets metadata.uid. The same manifest at the same path on the same node
 *   always gets the same UID, so a restarted berth adopts its containers, and any
 *   change to the pod is a new pod.
 * - name `<name>-<node, lower case>`, namespace `default` when unset, spec.nodeName,
 *   annotation kubernetes.io/config.hash = UID, a NoExecute "Exists" toleration (file
 *   source only), status.phase Pending.
 *
 * The merger (config.ts) adds kubernetes.io/config.source and config.seen.
 */
import type { Pod, PodSpec, PodStatus, Toleration } from 'kubernetes-types/core/v1.js';
import type { ObjectMeta } from 'kubernetes-types/meta/v1.js';
import { parseAllDocuments, type Document } from 'yaml';
import { Fnv128a } from './fnv.ts';
import { goDumpForHash } from './go-dump.ts';
import { GO_POD_TYPES } from './go-pod-types.ts';
import { parseGoQuantity, QuantityError } from './go-quantity.ts';
import { applyApiDefaults } from './pod-defaults.ts';

export const CONFIG_HASH_ANNOTATION = 'kubernetes.io/config.hash';
export const CONFIG_MIRROR_ANNOTATION = 'kubernetes.io/config.mirror';
export const CONFIG_SOURCE_ANNOTATION = 'kubernetes.io/config.source';
export const CONFIG_SEEN_ANNOTATION = 'kubernetes.io/config.seen';

/** Upstream's cap on a manifest (maxConfigLength, 10 MiB). */
export const MAX_MANIFEST_BYTES = 10 * 1024 * 1024;

export type StaticSourceKind = 'file' | 'http';

/** A manifest that cannot become a pod; the message says why, as upstream's words it. */
export class ManifestError extends Error {
  readonly code = 'BERTH_STATIC_POD_INVALID';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ManifestError';
  }
}

export interface DecodeOptions {
  readonly nodeName: string;
  /** The file's path or the URL: part of the UID. */
  readonly source: string;
  readonly kind: StaticSourceKind;
}

export interface DecodedPod {
  readonly pod: Pod;
  /** Problems that do not stop the pod (unknown fields, ignored as upstream's decoder does). */
  readonly warnings: readonly string[];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const LEAF_TYPES = new Set(['resource.Quantity', 'intstr.IntOrString', 'v1.Time']);

/** The JSON names of a struct's fields and their types, embedded structs' included. */
function jsonFields(rest: readonly string[]): Map<string, string> {
  const fields = new Map<string, string>();
  for (const f of rest) {
    const [, json = '', ftype = ''] = f.split(',');
    if (json === '^') {
      const [, ...inner] = (GO_POD_TYPES[ftype] ?? '').split(';');
      for (const [k, v] of jsonFields(inner)) fields.set(k, v);
    } else if (json !== '') fields.set(json, ftype);
  }
  return fields;
}

/** The JSON kind of a value, in encoding/json's words. */
function jsonKind(v: unknown): string {
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return `number ${String(v)}`;
  if (typeof v === 'string') return 'string';
  return Array.isArray(v) ? 'array' : 'object';
}

const INT_KINDS = new Set(['int', 'int32', 'int64', 'uint', 'uint8', 'uint64']);

/** Whether encoding/json would take `v` for a leaf of this Go kind or special type. */
function fitsLeaf(type: string, kind: string, v: unknown): boolean {
  switch (type) {
    case 'resource.Quantity':
      return typeof v === 'string' || typeof v === 'number';
    case 'intstr.IntOrString':
      return typeof v === 'string' || (typeof v === 'number' && Number.isInteger(v));
    case 'v1.Time':
      return typeof v === 'string';
  }
  if (kind === 'string') return typeof v === 'string';
  if (kind === 'bool') return typeof v === 'boolean';
  if (INT_KINDS.has(kind)) return typeof v === 'number' && Number.isInteger(v);
  return true;
}

/** A quantity upstream's decoder would refuse (resource.Quantity's UnmarshalJSON). */
function checkQuantity(v: string | number, path: string): void {
  try {
    parseGoQuantity(v);
  } catch (err) {
    if (!(err instanceof QuantityError)) throw err;
    throw new ManifestError(`${path}: ${err.message}`, { cause: err });
  }
}

/** A Go type's zero value as JSON; null for nil (pointers, slices, maps) and leaves. */
function zeroOf(type: string): unknown {
  if (LEAF_TYPES.has(type)) return null;
  const [kind = ''] = (GO_POD_TYPES[type] ?? type).split(';');
  if (kind === 'struct') return {};
  if (kind === 'string') return '';
  if (kind === 'bool') return false;
  return INT_KINDS.has(kind) ? 0 : null;
}

/**
 * encoding/json's reading of null: a field set to null stays unset, and a null element
 * of a slice or map is its type's zero value (`containers: [null]` is one empty
 * container, which validation then refuses). Defaulting and validation see what
 * upstream's would, instead of failing on a null where an object belongs.
 */
function withGoNulls(v: unknown, type: string): unknown {
  const spec = GO_POD_TYPES[type];
  if (spec === undefined || v === null || typeof v !== 'object' || LEAF_TYPES.has(type)) return v;
  const [kind = '', ...rest] = spec.split(';');
  const elem = (e: unknown, t: string): unknown => (e === null ? zeroOf(t) : withGoNulls(e, t));
  if (kind === 'ptr') return withGoNulls(v, rest[0] ?? '');
  if (kind === 'slice') return Array.isArray(v) ? v.map((e) => elem(e, rest[0] ?? '')) : v;
  if (!isRecord(v)) return v;
  if (kind === 'map')
    return Object.fromEntries(Object.entries(v).map(([k, e]) => [k, elem(e, rest[1] ?? '')]));
  if (kind !== 'struct') return v;
  const fields = jsonFields(rest);
  const out: Record<string, unknown> = {};
  for (const [k, e] of Object.entries(v)) {
    const ftype = fields.get(k);
    if (e !== null) out[k] = ftype === undefined ? e : withGoNulls(e, ftype);
  }
  return out;
}

/**
 * Checks a decoded manifest against the Go types, as encoding/json would: a value of
 * the wrong JSON kind is an error (upstream rejects the manifest); a field the types
 * do not have is only reported (upstream's decoder drops it silently).
 * @throws ManifestError on the first value of the wrong kind.
 */
export function unknownFields(obj: unknown, type = 'core.Pod', path = ''): string[] {
  const spec = GO_POD_TYPES[type];
  if (spec === undefined || obj === null || obj === undefined) return [];
  const [kind = '', ...rest] = spec.split(';');
  if (kind === 'ptr') return unknownFields(obj, rest[0] ?? '', path);
  const wrong = (): ManifestError =>
    new ManifestError(
      `json: cannot unmarshal ${jsonKind(obj)} into Go struct field ${path} of type ${type}`,
    );
  if (LEAF_TYPES.has(type) || (kind !== 'slice' && kind !== 'map' && kind !== 'struct')) {
    if (!fitsLeaf(type, kind, obj)) throw wrong();
    if (type === 'resource.Quantity') checkQuantity(obj as string | number, path);
    return [];
  }
  if (kind === 'slice') {
    if (!Array.isArray(obj)) throw wrong();
    return obj.flatMap((e: unknown, i) => unknownFields(e, rest[0] ?? '', `${path}[${i}]`));
  }
  if (!isRecord(obj)) throw wrong();
  if (kind === 'map')
    return Object.entries(obj).flatMap(([k, v]) =>
      unknownFields(v, rest[1] ?? '', `${path}[${k}]`),
    );
  const fields = jsonFields(rest);
  if (type === 'core.Pod') {
    fields.set('apiVersion', 'string');
    fields.set('kind', 'string');
  }
  const out: string[] = [];
  for (const [k, v] of Object.entries(obj)) {
    const ftype = fields.get(k);
    const p = path === '' ? k : `${path}.${k}`;
    if (ftype === undefined) out.push(p);
    else out.push(...unknownFields(v, ftype, p));
  }
  return out;
}

/** The parts of upstream's ValidatePodCreate a node relies on, in its words. */
function validate(pod: Pod): void {
  const errs: string[] = [];
  const spec = pod.spec;
  const containers = spec?.containers ?? [];
  if (containers.length === 0) errs.push('spec.containers: Required value');
  const names = new Set<string>();
  const all = [
    ...(spec?.initContainers ?? []).map((c, i) => ({ c, path: `spec.initContainers[${i}]` })),
    ...containers.map((c, i) => ({ c, path: `spec.containers[${i}]` })),
  ];
  for (const { c, path } of all) {
    if (!isRecord(c)) {
      errs.push(`${path}: Invalid value: not an object`);
      continue;
    }
    if (typeof c.name !== 'string' || c.name === '') errs.push(`${path}.name: Required value`);
    else if (names.has(c.name)) errs.push(`${path}.name: Duplicate value: "${c.name}"`);
    else if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(c.name) || c.name.length > 63)
      errs.push(`${path}.name: Invalid value: "${c.name}": a lowercase RFC 1123 label`);
    else names.add(c.name);
    if (typeof c.image !== 'string' || c.image.trim() === '')
      errs.push(`${path}.image: Required value`);
  }
  const name = pod.metadata?.name ?? '';
  if (
    name.length > 253 ||
    !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(name)
  )
    errs.push(`metadata.name: Invalid value: "${name}": a lowercase RFC 1123 subdomain`);
  const volumes = new Set<string>();
  for (const [i, v] of (spec?.volumes ?? []).entries()) {
    if (!v.name) errs.push(`spec.volumes[${i}].name: Required value`);
    else if (volumes.has(v.name))
      errs.push(`spec.volumes[${i}].name: Duplicate value: "${v.name}"`);
    else volumes.add(v.name);
  }
  if (errs.length > 0) throw new ManifestError(`invalid pod: [${errs.join(', ')}]`);
}

/** podutil.HasAPIObjectReference: what a pod without an API server could never resolve. */
function apiObjectReference(pod: Pod): string | undefined {
  const spec = pod.spec;
  if (spec === undefined) return undefined;
  if (spec.serviceAccountName) return 'serviceaccounts';
  const containers = [...(spec.initContainers ?? []), ...spec.containers];
  if ((spec.imagePullSecrets ?? []).length > 0) return 'secrets';
  for (const c of containers) {
    for (const e of c.envFrom ?? []) {
      if (e.secretRef !== undefined) return 'secrets';
      if (e.configMapRef !== undefined) return 'configmaps';
    }
    for (const e of c.env ?? []) {
      if (e.valueFrom?.secretKeyRef !== undefined) return 'secrets';
      if (e.valueFrom?.configMapKeyRef !== undefined) return 'configmaps';
    }
  }
  if ((spec.resourceClaims ?? []).length > 0) return 'resourceclaims';
  for (const v of spec.volumes ?? []) {
    if (v.configMap !== undefined) return 'configmaps (via configmap volumes)';
    if (v.secret !== undefined) return 'secrets (via secret volumes)';
    if (v.csi !== undefined) return 'csidrivers (via CSI volumes)';
    if (v.persistentVolumeClaim !== undefined) return 'persistentvolumeclaims';
    if (v.ephemeral !== undefined) return 'persistentvolumeclaims (via ephemeral volumes)';
    for (const s of v.projected?.sources ?? []) {
      if (s.configMap !== undefined) return 'configmaps (via projected volumes)';
      if (s.secret !== undefined) return 'secrets (via projected volumes)';
      if (s.serviceAccountToken !== undefined) return 'serviceaccounts (via projected volumes)';
      if (s.clusterTrustBundle !== undefined) return 'clustertrustbundles';
    }
  }
  return undefined;
}

/**
 * The document as plain values. yaml throws bare errors here for an alias bomb, an
 * alias without its anchor or a bad merge key: each is a bad manifest, worded as
 * upstream's YAML library words it where it has a word for it.
 */
function toPlain(doc: Document): unknown {
  try {
    return doc.toJS({ maxAliasCount: 100 }) as unknown;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const anchor = /^Unresolved alias .*: (.*)$/.exec(message)?.[1];
    const why = message.startsWith('Excessive alias count')
      ? 'document contains excessive aliasing'
      : anchor !== undefined
        ? `unknown anchor '${anchor}' referenced`
        : message;
    throw new ManifestError(`error converting YAML to JSON: yaml: ${why}`, { cause: err });
  }
}

/**
 * Parses a YAML or JSON manifest into a plain object, with YAML 1.1's scalars (yes/no
 * are booleans, 0644 is octal) as upstream's YAML library reads them. Like upstream,
 * only the first document counts; berth also says when more were ignored.
 */
export function parseManifest(data: string): { obj: unknown; warnings: string[] } {
  const docs = parseAllDocuments(data, { version: '1.1', uniqueKeys: false });
  if (!Array.isArray(docs)) return { obj: null, warnings: [] };
  const first = docs[0];
  if (first === undefined || first.contents === null)
    throw new ManifestError("Object 'Kind' is missing in empty manifest");
  const err = first.errors[0];
  if (err !== undefined) throw new ManifestError(`error converting YAML to JSON: ${err.message}`);
  const ignored = docs.slice(1).filter((d) => d.contents !== null).length;
  return {
    obj: toPlain(first),
    warnings:
      ignored === 0 ? [] : [`only the first YAML document is read: ${ignored} more ignored`],
  };
}

/** The UID upstream derives for a decoded, defaulted pod (before its name is changed). */
export function staticPodUID(pod: Pod, o: DecodeOptions): string {
  const h = new Fnv128a().write(goDumpForHash(pod as unknown as Record<string, unknown>));
  if (o.kind === 'file') h.write(`host:${o.nodeName}`).write(`file:${o.source}`);
  else h.write(`url:${o.source}`);
  return h.hex();
}

const NO_EXECUTE_TOLERATION: Toleration = { operator: 'Exists', effect: 'NoExecute' };

/** Decodes one pod object (already parsed) into the static pod berth runs. */
export function staticPodFromObject(
  obj: unknown,
  o: DecodeOptions,
  parseWarnings: readonly string[] = [],
): DecodedPod {
  if (!isRecord(obj)) throw new ManifestError("couldn't parse as pod: not an object");
  const kind = obj['kind'];
  const apiVersion = obj['apiVersion'];
  if (typeof kind !== 'string' || kind === '')
    throw new ManifestError(`Object 'Kind' is missing in '${JSON.stringify(obj).slice(0, 200)}'`);
  if (typeof apiVersion !== 'string' || apiVersion === '')
    throw new ManifestError(
      `Object 'apiVersion' is missing in '${JSON.stringify(obj).slice(0, 200)}'`,
    );
  if (apiVersion !== 'v1' || kind !== 'Pod')
    throw new ManifestError(`no kind "${kind}" is registered for version "${apiVersion}"`);
  const warnings = [...parseWarnings, ...unknownFields(obj).map((p) => `unknown field "${p}"`)];
  const copy = withGoNulls(structuredClone(obj), 'core.Pod') as Record<string, unknown>;
  delete copy['status'];
  const rawMeta = copy['metadata'];
  const rawName = isRecord(rawMeta) ? rawMeta['name'] : undefined;
  if (typeof rawName !== 'string' || rawName === '')
    throw new ManifestError('invalid pod: name is needed for the pod');
  const rawSpec = copy['spec'];
  if (!isRecord(rawSpec) || !Array.isArray(rawSpec['containers']))
    copy['spec'] = { ...(isRecord(rawSpec) ? rawSpec : {}), containers: [] };
  const pod = copy as unknown as Pod & { metadata: ObjectMeta; spec: PodSpec; status?: PodStatus };
  applyApiDefaults(pod);
  const meta = pod.metadata;
  const uid = meta.uid !== undefined && meta.uid !== '' ? meta.uid : staticPodUID(pod, o);
  pod.metadata = {
    ...meta,
    uid,
    name: `${rawName}-${o.nodeName.toLowerCase()}`,
    namespace: meta.namespace === undefined || meta.namespace === '' ? 'default' : meta.namespace,
    annotations: { ...meta.annotations, [CONFIG_HASH_ANNOTATION]: uid },
  };
  pod.spec.nodeName = o.nodeName;
  if (o.kind === 'file') {
    const tolerations = pod.spec.tolerations ?? [];
    const same = tolerations.some(
      (t) =>
        t.operator === 'Exists' &&
        t.effect === 'NoExecute' &&
        !t.key &&
        !t.value &&
        t.tolerationSeconds == null,
    );
    if (!same) pod.spec.tolerations = [...tolerations, { ...NO_EXECUTE_TOLERATION }];
  }
  pod.status = { phase: 'Pending' };
  validate(pod);
  const ref = apiObjectReference(pod);
  if (ref !== undefined) throw new ManifestError(`static pods may not reference ${ref}`);
  return { pod, warnings };
}

/** Decodes a manifest file's (or URL's) bytes holding one pod. */
export function decodeStaticPod(data: string, o: DecodeOptions): DecodedPod {
  const { obj, warnings } = parseManifest(data);
  return staticPodFromObject(obj, o, warnings);
}

/** The URL source also takes a v1 PodList. */
export function decodeStaticPods(data: string, o: DecodeOptions): DecodedPod[] {
  const { obj, warnings } = parseManifest(data);
  if (isRecord(obj) && obj['kind'] === 'PodList' && obj['apiVersion'] === 'v1') {
    const items: unknown[] = Array.isArray(obj['items']) ? (obj['items'] as unknown[]) : [];
    return items.map((item) =>
      staticPodFromObject(isRecord(item) ? { apiVersion: 'v1', kind: 'Pod', ...item } : item, o),
    );
  }
  return [staticPodFromObject(obj, o, warnings)];
}

/** Whether a pod from the API is a mirror pod (upstream's kubetypes.IsMirrorPod). */
export function isMirrorPod(pod: Pod): boolean {
  return pod.metadata?.annotations?.[CONFIG_MIRROR_ANNOTATION] !== undefined;
}

/** `<namespace>/<name>`, the key two pods must never share on a node. */
export function podFullName(pod: Pod): string {
  return `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
}
