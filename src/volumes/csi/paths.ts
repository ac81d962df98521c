/**
 * Upstream's on-disk layout of CSI volumes (pkg/volume/csi), so tools that know the
 * kubelet find berth's mounts, and a berth restarted finds its own:
 *
 * - staging (NodeStageVolume's target): `<root>/plugins/kubernetes.io/csi/<driver>/
 *   <sha256(volumeHandle)>/globalmount`, with `vol_data.json` beside it;
 * - publishing (NodePublishVolume's target): `<root>/pods/<uid>/volumes/kubernetes.io~csi/
 *   <spec name>/mount`, with `vol_data.json` beside it.
 *
 * The volume handle is only ever hashed into a path, never used raw: a handle with
 * `../` in it cannot move a mount. Driver names come from API objects the API server
 * validated, and are checked again here because they do become a path element.
 */
import { createHash } from 'node:crypto';
import * as path from 'node:path';
import { VolumeError } from '../types.ts';

/** Upstream's plugin name and its escaped form in pod volume paths. */
export const CSI_PLUGIN_NAME = 'kubernetes.io/csi';
export const CSI_PLUGIN_DIR = 'kubernetes.io~csi';
export const GLOBAL_MOUNT = 'globalmount';
export const VOL_DATA_FILE = 'vol_data.json';

/** CSI driver names: DNS-1123 subdomain style, at most 63 characters (the API's rule). */
const DRIVER_NAME = /^[a-zA-Z0-9]([-a-zA-Z0-9.]{0,61}[a-zA-Z0-9])?$/;

function sha256Hex(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

/** Throws unless `driver` is a valid CSI driver name (so it is a safe path element). */
export function checkDriverName(driver: string): string {
  if (!DRIVER_NAME.test(driver) || driver.includes('..')) {
    throw new VolumeError(
      'BERTH_VOLUME_INVALID',
      `Cannot use CSI driver name ${JSON.stringify(driver)}: it must be a DNS-1123 subdomain of at most 63 characters`,
    );
  }
  return driver;
}

/** The VolumeAttachment name: csi-<sha256(handle + driver + node)>. */
export function attachmentName(volumeHandle: string, driver: string, nodeName: string): string {
  return `csi-${sha256Hex(`${volumeHandle}${driver}${nodeName}`)}`;
}

/** The volume handle of an inline ephemeral CSI volume: csi-<sha256(podUID + volume name)>. */
export function inlineVolumeHandle(podUid: string, volumeName: string): string {
  return `csi-${sha256Hex(`${podUid}${volumeName}`)}`;
}

/** The name volumesInUse/volumesAttached use: kubernetes.io/csi/<driver>^<handle>. */
export function uniqueVolumeName(driver: string, volumeHandle: string): string {
  return `${CSI_PLUGIN_NAME}/${driver}^${volumeHandle}`;
}

/** `<root>/plugins/kubernetes.io/csi`. */
export function csiPluginDir(rootDir: string): string {
  return path.join(rootDir, 'plugins', CSI_PLUGIN_NAME);
}

/** NodeStageVolume's target for a persistent volume. */
export function stagingPath(rootDir: string, driver: string, volumeHandle: string): string {
  return path.join(
    csiPluginDir(rootDir),
    checkDriverName(driver),
    sha256Hex(volumeHandle),
    GLOBAL_MOUNT,
  );
}

/** `<root>/pods/<uid>/volumes/kubernetes.io~csi` (every CSI volume of the pod is under it). */
export function podCsiDir(podDir: string): string {
  return path.join(podDir, 'volumes', CSI_PLUGIN_DIR);
}

/** NodePublishVolume's target: `<pod csi dir>/<spec name with / as ~>/mount`. */
export function publishPath(podDir: string, specName: string): string {
  const escaped = specName.replaceAll('/', '~');
  if (escaped === '' || escaped === '.' || escaped === '..') {
    throw new VolumeError(
      'BERTH_VOLUME_INVALID',
      `Cannot use ${JSON.stringify(specName)} as a CSI volume directory name`,
    );
  }
  return path.join(podCsiDir(podDir), escaped, 'mount');
}

/*
 * Block volumes (volumeMode: Block), upstream's csi_block.go layout, all keyed by the
 * spec name (the PV name, with / as ~):
 * - `<csi>/volumeDevices/staging/<spec>`: NodeStageVolume's target;
 * - `<csi>/volumeDevices/publish/<spec>/<pod uid>`: NodePublishVolume's target, a file
 *   the driver makes the device (bind mount or device node);
 * - `<csi>/volumeDevices/<spec>/data/vol_data.json`: what the tear-down needs;
 * - `<csi>/volumeDevices/<spec>/dev/<pod uid>`: a bind mount of the published device,
 *   held open by a loop device so it cannot silently change under the container;
 * - `<pod>/volumeDevices/kubernetes.io~csi/<spec>`: a symlink to the published device,
 *   which the runtime resolves for the container's device.
 */

/** `<root>/plugins/kubernetes.io/csi/volumeDevices`. */
export function volumeDevicesDir(rootDir: string): string {
  return path.join(csiPluginDir(rootDir), 'volumeDevices');
}

function blockName(specName: string): string {
  const escaped = specName.replaceAll('/', '~');
  if (
    escaped === '' ||
    escaped === '.' ||
    escaped === '..' ||
    escaped === 'staging' ||
    escaped === 'publish'
  ) {
    throw new VolumeError(
      'BERTH_VOLUME_INVALID',
      `Cannot use ${JSON.stringify(specName)} as a CSI block volume directory name`,
    );
  }
  return escaped;
}

/** NodeStageVolume's target for a block volume. */
export function blockStagingPath(rootDir: string, specName: string): string {
  return path.join(volumeDevicesDir(rootDir), 'staging', blockName(specName));
}

/** NodePublishVolume's target for a block volume and pod. */
export function blockPublishPath(rootDir: string, specName: string, podUid: string): string {
  return path.join(volumeDevicesDir(rootDir), 'publish', blockName(specName), podUid);
}

/** `<csi>/volumeDevices/<spec>`: data/ (vol_data.json) and dev/ (the pods' bind mounts). */
export function blockVolumeDir(rootDir: string, specName: string): string {
  return path.join(volumeDevicesDir(rootDir), blockName(specName));
}

/** `<pod>/volumeDevices/kubernetes.io~csi`: the pod's device symlinks. */
export function podBlockDir(podDir: string): string {
  return path.join(podDir, 'volumeDevices', CSI_PLUGIN_DIR);
}

/** The pod's symlink to a block volume's device. */
export function podDevicePath(podDir: string, specName: string): string {
  return path.join(podBlockDir(podDir), blockName(specName));
}
