/**
 * A CSI volume as the plugin needs it, from either of its two origins: a
 * PersistentVolume with a `csi` source (bound to a pod's claim), or an inline
 * ephemeral `csi` volume in the pod spec (handle derived from pod UID and volume
 * name, as upstream's makeVolumeHandle).
 */
import type { PersistentVolume, Pod, Volume } from 'kubernetes-types/core/v1.js';
import { VolumeError } from '../types.ts';
import { inlineVolumeHandle } from './paths.ts';

export interface CsiVolumeSpec {
  /** The pod's volume name (what containers' volumeMounts refer to). */
  readonly podVolumeName: string;
  /** Upstream's spec name: the PV name, or the pod volume name for inline volumes. */
  readonly specName: string;
  readonly driver: string;
  readonly volumeHandle: string;
  readonly lifecycle: 'Persistent' | 'Ephemeral';
  readonly readOnly: boolean;
  readonly fsType: string;
  readonly attributes: Readonly<Record<string, string>>;
  readonly mountOptions: readonly string[];
  /** The first of the PV's access modes (upstream's mapping), ReadWriteOnce inline. */
  readonly accessMode: string;
  readonly accessModes: readonly string[];
  readonly stageSecretRef?: { readonly name: string; readonly namespace: string } | undefined;
  readonly publishSecretRef?: { readonly name: string; readonly namespace: string } | undefined;
}

function secretRef(
  ref: { name?: string; namespace?: string } | undefined,
): { name: string; namespace: string } | undefined {
  if (ref?.name === undefined || ref.name === '') return undefined;
  return { name: ref.name, namespace: ref.namespace ?? 'default' };
}

/** The spec of a claim's bound PV; undefined when the PV has no csi source. */
export function specFromPv(
  podVolumeName: string,
  pv: PersistentVolume,
  claimReadOnly: boolean,
): CsiVolumeSpec | undefined {
  const csi = pv.spec?.csi;
  if (csi === undefined) return undefined;
  const pvName = pv.metadata?.name ?? '';
  if (csi.volumeHandle === '') {
    throw new VolumeError('BERTH_VOLUME_INVALID', `PV ${pvName} has an empty CSI volume handle`);
  }
  const accessModes = pv.spec?.accessModes ?? [];
  return {
    podVolumeName,
    specName: pvName,
    driver: csi.driver,
    volumeHandle: csi.volumeHandle,
    lifecycle: 'Persistent',
    readOnly: claimReadOnly || csi.readOnly === true,
    fsType: csi.fsType ?? '',
    attributes: csi.volumeAttributes ?? {},
    mountOptions: pv.spec?.mountOptions ?? [],
    accessMode: accessModes[0] ?? 'ReadWriteOnce',
    accessModes,
    stageSecretRef: secretRef(csi.nodeStageSecretRef),
    publishSecretRef: secretRef(csi.nodePublishSecretRef),
  };
}

/** The spec of an inline ephemeral CSI volume; undefined when `v` is not one. */
export function specFromInline(pod: Pod, v: Volume): CsiVolumeSpec | undefined {
  const csi = v.csi;
  if (csi === undefined) return undefined;
  const ref = csi.nodePublishSecretRef?.name;
  return {
    podVolumeName: v.name,
    specName: v.name,
    driver: csi.driver,
    volumeHandle: inlineVolumeHandle(pod.metadata?.uid ?? '', v.name),
    lifecycle: 'Ephemeral',
    readOnly: csi.readOnly === true,
    fsType: csi.fsType ?? '',
    attributes: csi.volumeAttributes ?? {},
    mountOptions: [],
    accessMode: 'ReadWriteOnce',
    accessModes: ['ReadWriteOnce'],
    publishSecretRef:
      ref === undefined || ref === ''
        ? undefined
        : { name: ref, namespace: pod.metadata?.namespace ?? 'default' },
  };
}
