/**
 * Patch application for the fake client: RFC 7386 JSON merge patch, RFC 6902 JSON
 * patch, and a strategic merge patch that knows the merge keys of the core/v1 lists
 * the kubelet patches (containers and their statuses by name, conditions by type, …)
 * and the `$patch`, `$retainKeys`, `$setElementOrder/…` and
 * `$deleteFromPrimitiveList/…` directives. Lists it does not know are replaced, as a
 * JSON merge patch would. Field names decide the merge key regardless of the parent
 * type, which holds for the core types berth touches.
 */
import { isDeepStrictEqual } from 'node:util';
import { BerthError } from '../util/errors.ts';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/** A patch that cannot be applied (the fake answers 422 Invalid). */
export class PatchError extends BerthError {
  constructor(message: string) {
    super('BERTH_KUBE_BAD_PATCH', message);
  }
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function clone<T>(value: T): T {
  return structuredClone(value);
}

/** RFC 7386: objects merge recursively, null deletes, everything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return clone(patch);
  const out: JsonObject = isObject(target) ? clone(target) : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) Reflect.deleteProperty(out, key);
    else out[key] = mergePatch(out[key], value) as Json;
  }
  return out;
}

/** Merge keys of strategic-merge lists (field name → key); [] marks a merged set of primitives. */
const MERGE_KEYS: Readonly<Record<string, string>> = {
  containers: 'name',
  initContainers: 'name',
  ephemeralContainers: 'name',
  containerStatuses: 'name',
  initContainerStatuses: 'name',
  ephemeralContainerStatuses: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  volumeDevices: 'devicePath',
  env: 'name',
  imagePullSecrets: 'name',
  conditions: 'type',
  addresses: 'type',
  taints: 'key',
  ownerReferences: 'uid',
  podIPs: 'ip',
  hostIPs: 'ip',
  hostAliases: 'ip',
  resourceClaims: 'name',
  resizePolicy: 'resourceName',
  volumesAttached: 'name',
  topologySpreadConstraints: 'topologyKey',
};
const PRIMITIVE_SETS: ReadonlySet<string> = new Set(['finalizers']);

function mergeKeyFor(field: string, items: readonly Json[]): string | undefined {
  // Container ports merge by containerPort, service ports by port.
  if (field === 'ports') {
    return items.some((i) => isObject(i) && 'containerPort' in i) ? 'containerPort' : 'port';
  }
  return MERGE_KEYS[field];
}

function mergeList(field: string, original: Json, patch: Json[]): Json[] {
  const current = Array.isArray(original) ? clone(original) : [];
  if (patch.some((i) => isObject(i) && i['$patch'] === 'replace')) {
    return patch.filter((i) => !(isObject(i) && i['$patch'] === 'replace')).map(clone);
  }
  if (PRIMITIVE_SETS.has(field)) {
    const out = [...current];
    for (const item of patch) if (!out.includes(item)) out.push(clone(item));
    return out;
  }
  const key = mergeKeyFor(field, [...current, ...patch]);
  if (key === undefined || !patch.every(isObject)) return patch.map(clone);
  const out = current;
  for (const item of patch) {
    const index = out.findIndex((o) => isObject(o) && o[key] === item[key]);
    if (item['$patch'] === 'delete') {
      if (index >= 0) out.splice(index, 1);
    } else if (index >= 0) {
      out[index] = strategicMergePatch(out[index], item) as Json;
    } else {
      out.push(strategicMergePatch({}, item) as Json);
    }
  }
  return out;
}

function orderList(list: Json[], order: Json, key: string | undefined): Json[] {
  if (!Array.isArray(order)) return list;
  const id = (item: Json): Json =>
    key !== undefined && isObject(item) ? (item[key] ?? null) : item;
  const wanted = order.map((o) => id(o));
  const rank = (item: Json): number => {
    const at = wanted.findIndex((w) => isDeepStrictEqual(w, id(item)));
    return at < 0 ? wanted.length : at;
  };
  return list
    .map((item, index) => ({ item, index }))
    .sort((a, b) => rank(a.item) - rank(b.item) || a.index - b.index)
    .map((e) => e.item);
}

/**
 * Kubernetes strategic merge patch (the subset described at the top of this file).
 * Throws PatchError for an unknown `$patch` directive.
 */
export function strategicMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return clone(patch);
  const directive = patch['$patch'];
  if (directive === 'replace') {
    const rest = clone(patch);
    delete rest['$patch'];
    return rest;
  }
  if (directive !== undefined && directive !== 'merge' && directive !== 'delete') {
    throw new PatchError(
      `Cannot apply a strategic merge patch as $patch ${JSON.stringify(directive)} is unknown`,
    );
  }
  const out: JsonObject = isObject(target) ? clone(target) : {};
  for (const [field, value] of Object.entries(patch)) {
    if (field === '$patch' || field === '$retainKeys' || field.startsWith('$setElementOrder/')) {
      continue;
    }
    if (field.startsWith('$deleteFromPrimitiveList/')) {
      const name = field.slice('$deleteFromPrimitiveList/'.length);
      const list = out[name];
      if (Array.isArray(list) && Array.isArray(value)) {
        out[name] = list.filter((item) => !value.includes(item));
      }
      continue;
    }
    if (value === null) {
      Reflect.deleteProperty(out, field);
    } else if (isObject(value) && value['$patch'] === 'delete') {
      Reflect.deleteProperty(out, field);
    } else if (Array.isArray(value)) {
      out[field] = mergeList(field, out[field] ?? null, value);
    } else {
      out[field] = strategicMergePatch(out[field], value) as Json;
    }
  }
  for (const [field, order] of Object.entries(patch)) {
    if (!field.startsWith('$setElementOrder/')) continue;
    const name = field.slice('$setElementOrder/'.length);
    const list = out[name];
    if (Array.isArray(list)) out[name] = orderList(list, order, mergeKeyFor(name, list));
  }
  const retain = patch['$retainKeys'];
  if (Array.isArray(retain)) {
    for (const key of Object.keys(out)) if (!retain.includes(key)) Reflect.deleteProperty(out, key);
  }
  return out;
}

function unescapePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) {
    throw new PatchError(`Cannot apply a JSON patch as path "${pointer}" does not start with /`);
  }
  return pointer
    .slice(1)
    .split('/')
    .map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'));
}

function parentOf(doc: Json, parts: readonly string[], pointer: string): Json {
  let current = doc;
  for (const part of parts.slice(0, -1)) {
    const next: Json | undefined = Array.isArray(current)
      ? current[Number(part)]
      : isObject(current)
        ? current[part]
        : undefined;
    if (next === undefined) {
      throw new PatchError(`Cannot apply a JSON patch as path "${pointer}" does not exist`);
    }
    current = next;
  }
  return current;
}

function read(doc: Json, pointer: string): Json {
  const parts = unescapePointer(pointer);
  if (parts.length === 0) return doc;
  const parent = parentOf(doc, parts, pointer);
  const last = parts[parts.length - 1] ?? '';
  const value = Array.isArray(parent)
    ? parent[Number(last)]
    : isObject(parent)
      ? parent[last]
      : undefined;
  if (value === undefined) {
    throw new PatchError(`Cannot apply a JSON patch as path "${pointer}" does not exist`);
  }
  return value;
}

function write(doc: Json, pointer: string, value: Json | undefined, insert: boolean): Json {
  const parts = unescapePointer(pointer);
  if (parts.length === 0) {
    if (value === undefined)
      throw new PatchError('Cannot apply a JSON patch that removes the root');
    return value;
  }
  const parent = parentOf(doc, parts, pointer);
  const last = parts[parts.length - 1] ?? '';
  if (Array.isArray(parent)) {
    const index = last === '-' ? parent.length : Number(last);
    if (!Number.isInteger(index) || index < 0 || index > parent.length) {
      throw new PatchError(`Cannot apply a JSON patch as index in "${pointer}" is out of range`);
    }
    if (value === undefined) parent.splice(index, 1);
    else if (insert) parent.splice(index, 0, value);
    else parent[index] = value;
  } else if (isObject(parent)) {
    if (value === undefined) {
      if (!(last in parent))
        throw new PatchError(`Cannot remove "${pointer}" as it does not exist`);
      Reflect.deleteProperty(parent, last);
    } else {
      parent[last] = value;
    }
  } else {
    throw new PatchError(
      `Cannot apply a JSON patch as the parent of "${pointer}" is not a container`,
    );
  }
  return doc;
}

/** RFC 6902: add, remove, replace, move, copy, test. */
export function jsonPatch(target: unknown, operations: unknown): unknown {
  if (!Array.isArray(operations)) {
    throw new PatchError('Cannot apply a JSON patch as it is not an array of operations');
  }
  let doc = clone(target) as Json;
  for (const raw of operations as unknown[]) {
    if (!isObject(raw) || typeof raw['op'] !== 'string' || typeof raw['path'] !== 'string') {
      throw new PatchError(`Cannot apply JSON patch operation ${JSON.stringify(raw)}`);
    }
    const { op, path } = raw;
    const from = typeof raw['from'] === 'string' ? raw['from'] : '';
    const value = raw['value'] === undefined ? undefined : clone(raw['value']);
    switch (op) {
      case 'add':
        doc = write(doc, path, value ?? null, true);
        break;
      case 'remove':
        doc = write(doc, path, undefined, false);
        break;
      case 'replace':
        read(doc, path);
        doc = write(doc, path, value ?? null, false);
        break;
      case 'move': {
        const moved = read(doc, from);
        doc = write(doc, from, undefined, false);
        doc = write(doc, path, moved, true);
        break;
      }
      case 'copy':
        doc = write(doc, path, clone(read(doc, from)), true);
        break;
      case 'test':
        if (!isDeepStrictEqual(read(doc, path), value ?? null)) {
          throw new PatchError(`Cannot apply a JSON patch as the test of "${path}" failed`);
        }
        break;
      default:
        throw new PatchError(`Cannot apply a JSON patch as operation "${op}" is unknown`);
    }
  }
  return doc;
}
