/**
 * Until the volume manager exists, a pod that needs volumes cannot run correctly. It is
 * held in ContainerCreating with a FailedMount event that says so, instead of running
 * without its data (which would be silently wrong).
 */
import type { Pod } from 'kubernetes-types/core/v1.js';

/** The FailedMount message for the first volume berth cannot provide, or undefined. */
export function unsupportedVolumes(pod: Pod): string | undefined {
  const volume = pod.spec?.volumes?.[0];
  if (volume === undefined) return undefined;
  const kind = Object.keys(volume).find((k) => k !== 'name') ?? 'unknown';
  return `MountVolume.SetUp failed for volume "${volume.name}" : volume type "${kind}" is not supported by berth yet (set automountServiceAccountToken: false for pods without volumes)`;
}
