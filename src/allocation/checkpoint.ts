/**
 * The checkpoint file of a {@link ResourceState}, byte-compatible with upstream's
 * (pkg/kubelet/allocation/state/checkpoint.go through checkpointmanager), so a node can
 * switch between the upstream kubelet and berth without losing a pending resize:
 *
 *   {"data":"<PodResourceCheckpointInfo as JSON>","checksum":<uint32>}
 *
 * `data` is Go's encoding/json of `{"entries":{<uid>:{"ContainerResources":{...},
 * "PodLevelResources":...,"EmptyDirVolumeLimits":null}}}` (map keys sorted, struct
 * fields in declaration order, the entries object left out when empty), and the
 * checksum is FNV-32a over go-spew's `%#v` of that string, which prints `(string)`
 * and the string itself (upstream's checksum.New through dump.ForHash).
 *
 * A file whose checksum does not match is refused, as upstream refuses it, since it
 * says what was admitted: guessing could run a pod at a size nobody admitted.
 */
import type { ResourceRequirements } from 'kubernetes-types/core/v1.js';
import { AllocationError, type PodResourceInfo } from './types.ts';

export const ALLOCATED_PODS_STATE_FILE = 'allocated_pods_state';
export const ACTUATED_PODS_STATE_FILE = 'actuated_pods_state';

const FNV32_OFFSET = 0x811c9dc5;
const FNV32_PRIME = 0x01000193;

/** Upstream's checksum of a checkpoint's data string. */
export function checkpointChecksum(data: string): number {
  let hash = FNV32_OFFSET;
  for (const byte of new TextEncoder().encode(`(string)${data}`)) {
    hash ^= byte;
    hash = Math.imul(hash, FNV32_PRIME) >>> 0;
  }
  return hash >>> 0;
}

/** A string as Go's encoding/json writes it (HTML characters and U+2028/9 escaped). */
export function goString(value: string): string {
  return JSON.stringify(value.toWellFormed()).replace(/[<>&\u2028\u2029]/g, (ch) => {
    return `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`;
  });
}

/** A map as Go writes it: keys sorted by their bytes. */
function goMap<T>(map: Readonly<Record<string, T>>, value: (v: T) => string): string {
  const keys = Object.keys(map).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${keys.map((k) => `${goString(k)}:${value(map[k] as T)}`).join(',')}}`;
}

function resourceList(list: Readonly<Record<string, string>>): string {
  return goMap(list, goString);
}

/** v1.ResourceRequirements as Go's JSON: limits, requests, claims, each omitted when empty. */
export function requirementsJson(r: ResourceRequirements): string {
  const parts: string[] = [];
  if (r.limits !== undefined && Object.keys(r.limits).length > 0)
    parts.push(`"limits":${resourceList(r.limits)}`);
  if (r.requests !== undefined && Object.keys(r.requests).length > 0)
    parts.push(`"requests":${resourceList(r.requests)}`);
  if (r.claims !== undefined && r.claims.length > 0) {
    // v1.ResourceClaim: name, and request (DRA, newer than kubernetes-types) when set.
    const claim = (c: { name: string; request?: string }): string =>
      `{"name":${goString(c.name)}${c.request !== undefined && c.request !== '' ? `,"request":${goString(c.request)}` : ''}}`;
    parts.push(`"claims":[${r.claims.map(claim).join(',')}]`);
  }
  return `{${parts.join(',')}}`;
}

/** The `data` string of a checkpoint holding `entries`. */
export function encodeCheckpointData(entries: ReadonlyMap<string, PodResourceInfo>): string {
  if (entries.size === 0) return '{}';
  const byUid: Record<string, PodResourceInfo> = Object.fromEntries(entries);
  const entry = (info: PodResourceInfo): string =>
    `{"ContainerResources":${goMap(info.containerResources, requirementsJson)},` +
    `"PodLevelResources":${info.podLevelResources === undefined ? 'null' : requirementsJson(info.podLevelResources)},` +
    `"EmptyDirVolumeLimits":null}`;
  return `{"entries":${goMap(byUid, entry)}}`;
}

/** The whole file. */
export function encodeCheckpoint(entries: ReadonlyMap<string, PodResourceInfo>): string {
  const data = encodeCheckpointData(entries);
  return `{"data":${goString(data)},"checksum":${checkpointChecksum(data)}}`;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function stringMap(v: unknown, where: string): Record<string, string> | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isRecord(v)) throw new AllocationError(`Cannot read ${where}: not an object`);
  const out: Record<string, string> = {};
  for (const [k, q] of Object.entries(v)) {
    if (typeof q !== 'string')
      throw new AllocationError(`Cannot read ${where}.${k}: quantity is ${JSON.stringify(q)}`);
    out[k] = q;
  }
  return out;
}

function decodeRequirements(v: unknown, where: string): ResourceRequirements {
  if (!isRecord(v)) throw new AllocationError(`Cannot read ${where}: not an object`);
  const limits = stringMap(v['limits'], `${where}.limits`);
  const requests = stringMap(v['requests'], `${where}.requests`);
  const claims = Array.isArray(v['claims'])
    ? (v['claims'] as unknown[]).filter(isRecord).map((c) => ({
        name: typeof c['name'] === 'string' ? c['name'] : '',
        ...(typeof c['request'] === 'string' && { request: c['request'] }),
      }))
    : undefined;
  return {
    ...(limits !== undefined && { limits }),
    ...(requests !== undefined && { requests }),
    ...(claims !== undefined && claims.length > 0 && { claims }),
  };
}

/**
 * Parses a checkpoint file; throws {@link AllocationError} when it is not one, or its
 * checksum does not match its data (upstream's CorruptCheckpointError).
 */
export function decodeCheckpoint(text: string): Map<string, PodResourceInfo> {
  let file: unknown;
  try {
    file = JSON.parse(text);
  } catch (err) {
    throw new AllocationError('Cannot read the checkpoint: not JSON', { cause: err });
  }
  if (!isRecord(file) || typeof file['data'] !== 'string' || typeof file['checksum'] !== 'number')
    throw new AllocationError('Cannot read the checkpoint: no data and checksum');
  const actual = checkpointChecksum(file['data']);
  if (actual !== file['checksum'])
    throw new AllocationError(
      `Cannot read the checkpoint: checksum mismatch: expected ${file['checksum']}, actual ${actual}`,
    );
  let data: unknown;
  try {
    data = JSON.parse(file['data']);
  } catch (err) {
    throw new AllocationError('Cannot read the checkpoint data: not JSON', { cause: err });
  }
  const out = new Map<string, PodResourceInfo>();
  const entries = isRecord(data) ? data['entries'] : undefined;
  if (entries === undefined || entries === null) return out;
  if (!isRecord(entries)) throw new AllocationError('Cannot read the checkpoint entries');
  for (const [uid, raw] of Object.entries(entries)) {
    if (!isRecord(raw)) throw new AllocationError(`Cannot read the checkpoint entry of ${uid}`);
    const containers: Record<string, ResourceRequirements> = {};
    const cr = raw['ContainerResources'];
    if (isRecord(cr)) {
      for (const [name, r] of Object.entries(cr)) {
        containers[name] = decodeRequirements(r, `${uid}.ContainerResources.${name}`);
      }
    }
    const pl = raw['PodLevelResources'];
    out.set(uid, {
      containerResources: containers,
      ...(pl !== undefined &&
        pl !== null && { podLevelResources: decodeRequirements(pl, `${uid}.PodLevelResources`) }),
    });
  }
  return out;
}
