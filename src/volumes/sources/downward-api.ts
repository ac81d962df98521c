/**
 * downwardAPI volumes (upstream pkg/volume/downwardapi): each item is a pod field
 * (fieldRef) or a container resource (resourceFieldRef) written to its path. The
 * values come from the injected DownwardResolver, so env and volumes agree.
 */
import type {
  DownwardAPIVolumeFile,
  DownwardAPIVolumeSource,
  Pod,
} from 'kubernetes-types/core/v1.js';
import { VolumeError, type DownwardResolver, type ResolvedPayload } from '../types.ts';
import {
  checkPayloadPath,
  DEFAULT_MODE,
  fileMode,
  PLUGIN_DOWNWARD_API,
  type MutablePayload,
} from './payload.ts';

function valueOf(pod: Pod, item: DownwardAPIVolumeFile, downward: DownwardResolver): string {
  const field = item.fieldRef;
  const resource = item.resourceFieldRef;
  try {
    if (field !== undefined) return downward.podField(pod, field.fieldPath, 'volume');
    if (resource !== undefined) {
      // API validation requires containerName for volumes (env may omit it).
      const container = resource.containerName ?? '';
      if (container === '') {
        throw new Error('resourceFieldRef.containerName is required in a volume');
      }
      return downward.resourceField(pod, container, resource.resource, resource.divisor);
    }
  } catch (err) {
    const what = field?.fieldPath ?? resource?.resource ?? '';
    const message = err instanceof Error ? err.message : String(err);
    throw new VolumeError('BERTH_VOLUME_INVALID', `Unable to extract field ${what}: ${message}`, {
      cause: err,
    });
  }
  throw new VolumeError(
    'BERTH_VOLUME_INVALID',
    `Cannot project downward API item ${JSON.stringify(item.path)}: it has neither fieldRef nor resourceFieldRef`,
  );
}

/** The files of downward API `items` of `pod`. */
export function downwardApiPayload(
  pod: Pod,
  items: readonly DownwardAPIVolumeFile[],
  defaultMode: number,
  downward: DownwardResolver,
): MutablePayload {
  const out: MutablePayload = new Map();
  for (const item of items) {
    checkPayloadPath(item.path, 'downwardAPI item');
    const value = valueOf(pod, item, downward);
    out.set(item.path, {
      data: Buffer.from(value, 'utf8'),
      mode: fileMode(item.mode, defaultMode),
    });
  }
  return out;
}

/** Resolves a downwardAPI volume of `pod`. */
export function resolveDownwardApiVolume(
  pod: Pod,
  source: DownwardAPIVolumeSource,
  downward: DownwardResolver,
): ResolvedPayload {
  const payload = downwardApiPayload(
    pod,
    source.items ?? [],
    source.defaultMode ?? DEFAULT_MODE,
    downward,
  );
  return { payload, medium: 'disk', plugin: PLUGIN_DOWNWARD_API };
}
