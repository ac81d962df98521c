/**
 * A container's volumeDevices as CRI devices, as upstream's makeBlockVolumes: each names a
 * block volume of the pod; the host path is the pod's symlink to the device (the runtime
 * resolves it), the container path the devicePath, read-only volumes get "r" and the
 * others "mrw".
 */
import type { Container } from 'kubernetes-types/core/v1.js';
import * as path from 'node:path';
import { cri } from '../cri/index.ts';
import { VolumeError, type PodVolumes } from './types.ts';

/** The CRI devices for `container`'s volumeDevices. Throws VolumeError (CreateContainerConfigError). */
export function containerDevices(container: Container, volumes: PodVolumes): cri.Device[] {
  const out: cri.Device[] = [];
  for (const device of container.volumeDevices ?? []) {
    if (!path.isAbsolute(device.devicePath)) {
      throw new VolumeError(
        'BERTH_VOLUME_INVALID',
        `error DevicePath \`${device.devicePath}\` must be an absolute path`,
      );
    }
    const mv = volumes.byName.get(device.name);
    if (mv?.block !== true) {
      throw new VolumeError(
        'BERTH_VOLUME_INVALID',
        `cannot find volume ${JSON.stringify(device.name)} to pass into container ${JSON.stringify(container.name)}`,
      );
    }
    out.push(
      cri.Device.fromPartial({
        containerPath: device.devicePath,
        hostPath: mv.hostPath,
        permissions: mv.readOnly ? 'r' : 'mrw',
      }),
    );
  }
  return out;
}
