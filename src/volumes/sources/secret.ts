/**
 * secret volumes (upstream pkg/volume/secret): every key of `data` (base64-decoded), or
 * only `items`; `defaultMode` and per-item modes; `optional`. Secrets live on tmpfs.
 */
import type { KeyToPath, Pod, Secret, SecretVolumeSource } from 'kubernetes-types/core/v1.js';
import type { ResolvedPayload } from '../types.ts';
import {
  DEFAULT_MODE,
  keyedPayload,
  notFoundError,
  PLUGIN_SECRET,
  readObject,
  type MutablePayload,
  type ObjectReader,
} from './payload.ts';

/** How a secret is projected: shared by secret volumes and projected sources. */
export interface SecretProjectionOptions {
  readonly items?: readonly KeyToPath[] | undefined;
  readonly defaultMode: number;
  readonly optional: boolean;
}

/** The keys of a secret as bytes (`data` is base64 on the wire). */
export function secretData(secret: Secret): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (const [key, value] of Object.entries(secret.data ?? {})) {
    out.set(key, Buffer.from(value, 'base64'));
  }
  return out;
}

/**
 * The files of secret `name` (`undefined`: it does not exist). A missing secret is an
 * empty payload when optional, else `secret "<name>" not found`.
 */
export function secretPayload(
  name: string,
  secret: Secret | undefined,
  options: SecretProjectionOptions,
): MutablePayload {
  if (secret === undefined) {
    if (options.optional) return new Map();
    throw notFoundError('secret', name);
  }
  return keyedPayload(secretData(secret), {
    items: options.items,
    defaultMode: options.defaultMode,
    optional: options.optional,
    what: 'secret',
    missingKeyMessage: 'references non-existent secret key',
  });
}

/** Resolves a secret volume of `pod`. */
export async function resolveSecretVolume(
  pod: Pod,
  source: SecretVolumeSource,
  objects: ObjectReader,
  signal: AbortSignal,
): Promise<ResolvedPayload> {
  const name = source.secretName ?? '';
  const namespace = pod.metadata?.namespace ?? 'default';
  const secret = await readObject(objects, 'secret', namespace, name, signal);
  const payload = secretPayload(name, secret, {
    items: source.items,
    defaultMode: source.defaultMode ?? DEFAULT_MODE,
    optional: source.optional === true,
  });
  return { payload, medium: 'memory', plugin: PLUGIN_SECRET };
}
