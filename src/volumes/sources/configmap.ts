/**
 * configMap volumes (upstream pkg/volume/configmap): every key of `data` and
 * `binaryData`, or only `items`; `defaultMode` and per-item modes; `optional`.
 */
import type { ConfigMap, ConfigMapVolumeSource, KeyToPath, Pod } from 'kubernetes-types/core/v1.js';
import type { ResolvedPayload } from '../types.ts';
import {
  DEFAULT_MODE,
  keyedPayload,
  notFoundError,
  PLUGIN_CONFIGMAP,
  readObject,
  type MutablePayload,
  type ObjectReader,
} from './payload.ts';

/** How a configMap is projected: shared by configMap volumes and projected sources. */
export interface ConfigMapProjectionOptions {
  readonly items?: readonly KeyToPath[] | undefined;
  readonly defaultMode: number;
  readonly optional: boolean;
}

/** The keys of a configMap as bytes: `data` as UTF-8, `binaryData` base64-decoded. */
export function configMapData(configMap: ConfigMap): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (const [key, value] of Object.entries(configMap.data ?? {})) {
    out.set(key, Buffer.from(value, 'utf8'));
  }
  for (const [key, value] of Object.entries(configMap.binaryData ?? {})) {
    out.set(key, Buffer.from(value, 'base64'));
  }
  return out;
}

/**
 * The files of configMap `name` (`undefined`: it does not exist). A missing configMap
 * is an empty payload when optional, else `configmap "<name>" not found`.
 */
export function configMapPayload(
  name: string,
  configMap: ConfigMap | undefined,
  options: ConfigMapProjectionOptions,
): MutablePayload {
  if (configMap === undefined) {
    if (options.optional) return new Map();
    throw notFoundError('configmap', name);
  }
  return keyedPayload(configMapData(configMap), {
    items: options.items,
    defaultMode: options.defaultMode,
    optional: options.optional,
    what: 'configMap',
    missingKeyMessage: 'configmap references non-existent config key',
  });
}

/** Resolves a configMap volume of `pod`. */
export async function resolveConfigMapVolume(
  pod: Pod,
  source: ConfigMapVolumeSource,
  objects: ObjectReader,
  signal: AbortSignal,
): Promise<ResolvedPayload> {
  const name = source.name ?? '';
  const namespace = pod.metadata?.namespace ?? 'default';
  const configMap = await readObject(objects, 'configmap', namespace, name, signal);
  const payload = configMapPayload(name, configMap, {
    items: source.items,
    defaultMode: source.defaultMode ?? DEFAULT_MODE,
    optional: source.optional === true,
  });
  return { payload, medium: 'disk', plugin: PLUGIN_CONFIGMAP };
}
