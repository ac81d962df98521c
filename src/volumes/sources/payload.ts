/**
 * Shared pieces of the content-volume payload builders: upstream plugin names and
 * default modes, the path check every pod-supplied file name goes through, and the
 * not-found errors shaped as upstream's watch-based object cache reports them.
 */
import type { ConfigMap, KeyToPath, Secret } from 'kubernetes-types/core/v1.js';
import { VolumeError, type Payload, type PayloadFile } from '../types.ts';

/** Upstream plugin directory names (kubernetes.io/<plugin> escaped for disk). */
export const PLUGIN_CONFIGMAP = 'kubernetes.io~configmap';
export const PLUGIN_SECRET = 'kubernetes.io~secret';
export const PLUGIN_DOWNWARD_API = 'kubernetes.io~downward-api';
export const PLUGIN_PROJECTED = 'kubernetes.io~projected';

/**
 * The apiserver defaults defaultMode to 0644 for configMap, secret, downwardAPI and
 * projected volumes; berth applies the same default for pods that reach it without
 * API defaulting (static pods, tests).
 */
export const DEFAULT_MODE = 0o644;

/** A payload under construction. */
export type MutablePayload = Map<string, PayloadFile>;

// Linux PATH_MAX and NAME_MAX, as upstream's atomic writer checks them.
const MAX_PATH = 4096;
const MAX_ELEMENT = 255;

/**
 * Checks a relative path inside a volume as upstream's API validation and atomic writer
 * do: not empty, not absolute, no `..` element, not starting with `..` (the writer's
 * own `..data` and timestamped directories start with `..`). Throws VolumeError.
 */
export function checkPayloadPath(path: string, what: string): void {
  const refuse = (reason: string): never => {
    throw new VolumeError(
      'BERTH_VOLUME_PATH_ESCAPE',
      `Cannot use ${what} path ${JSON.stringify(path)}: ${reason}`,
    );
  };
  if (path === '') refuse('must not be empty');
  if (path.includes('\0')) refuse('must not contain a NUL byte');
  if (path.startsWith('/')) refuse('must be a relative path');
  if (path.startsWith('..')) refuse("must not start with '..'");
  const elements = path.split('/');
  if (elements.includes('..')) refuse("must not contain '..'");
  if (path.length > MAX_PATH) {
    throw new VolumeError(
      'BERTH_VOLUME_INVALID',
      `Cannot use ${what} path: it is ${path.length} characters long, the limit is ${MAX_PATH}`,
    );
  }
  if (elements.some((e) => e.length > MAX_ELEMENT)) {
    throw new VolumeError(
      'BERTH_VOLUME_INVALID',
      `Cannot use ${what} path ${JSON.stringify(path)}: an element is longer than ${MAX_ELEMENT} characters`,
    );
  }
}

/** The mode bits of a file: the item's mode, else the volume's default (masked to 0777). */
export function fileMode(itemMode: number | undefined, defaultMode: number): number {
  return (itemMode ?? defaultMode) & 0o777;
}

/** The missing-object error, shaped as upstream's `configmap "x" not found`. */
export function notFoundError(kind: 'configmap' | 'secret', name: string): VolumeError {
  return new VolumeError('BERTH_VOLUME_SOURCE_NOT_FOUND', `${kind} "${name}" not found`);
}

/**
 * Builds the files of a keyed object (configMap or secret data): every key, or only
 * `items` (each to its `path`, with its own mode). A missing item key is skipped when
 * the source is optional, else an error `<missingKeyMessage>: <key>`.
 */
export function keyedPayload(
  data: ReadonlyMap<string, Buffer>,
  options: {
    readonly items: readonly KeyToPath[] | undefined;
    readonly defaultMode: number;
    readonly optional: boolean;
    readonly what: string;
    readonly missingKeyMessage: string;
  },
): MutablePayload {
  const out: MutablePayload = new Map();
  const items = options.items ?? [];
  if (items.length === 0) {
    for (const [key, value] of data) {
      checkPayloadPath(key, `${options.what} key`);
      out.set(key, { data: value, mode: fileMode(undefined, options.defaultMode) });
    }
    return out;
  }
  for (const item of items) {
    const value = data.get(item.key);
    if (value === undefined) {
      if (options.optional) continue;
      throw new VolumeError(
        'BERTH_VOLUME_SOURCE_ERROR',
        `${options.missingKeyMessage}: ${item.key}`,
      );
    }
    checkPayloadPath(item.path, `${options.what} item`);
    out.set(item.path, { data: value, mode: fileMode(item.mode, options.defaultMode) });
  }
  return out;
}

/**
 * Merges `from` into `into`, refusing a path another source already wrote, or one that
 * would be both a file and a directory (API validation's "conflicting duplicate paths").
 */
export function mergePayload(into: MutablePayload, from: Payload, volume: string): void {
  for (const [path, file] of from) {
    const clash =
      into.has(path) ||
      [...into.keys()].some((p) => p.startsWith(`${path}/`) || path.startsWith(`${p}/`));
    if (clash) {
      throw new VolumeError(
        'BERTH_VOLUME_INVALID',
        `Cannot project ${JSON.stringify(path)} into volume ${volume}: conflicting duplicate paths`,
      );
    }
    into.set(path, file);
  }
}

/** The kinds of objects content volumes read. */
export type ObjectKind = 'configmap' | 'secret';

/** The object type of a kind: ConfigMap or Secret. */
export type KindObject<K extends ObjectKind> = K extends 'configmap' ? ConfigMap : Secret;

/**
 * Reads configMaps and secrets for volumes (object-cache.ts, or a fake in tests).
 * Resolves undefined when the object does not exist.
 */
export interface ObjectReader {
  get<K extends ObjectKind>(
    kind: K,
    namespace: string,
    name: string,
    signal: AbortSignal,
  ): Promise<KindObject<K> | undefined>;
}

/**
 * Reads one object for a volume; a failure other than "not found" (Forbidden, the API
 * unreachable) becomes a VolumeError that names the object. Aborts pass through.
 */
export async function readObject<K extends ObjectKind>(
  objects: ObjectReader,
  kind: K,
  namespace: string,
  name: string,
  signal: AbortSignal,
): Promise<(K extends 'configmap' ? ConfigMap : Secret) | undefined> {
  try {
    return await objects.get(kind, namespace, name, signal);
  } catch (err) {
    if (signal.aborted || err instanceof VolumeError) throw err;
    const message = err instanceof Error ? err.message : String(err);
    throw new VolumeError(
      'BERTH_VOLUME_SOURCE_ERROR',
      `Couldn't get ${kind} ${namespace}/${name}: ${message}`,
      { cause: err },
    );
  }
}
