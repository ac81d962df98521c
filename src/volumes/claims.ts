/**
 * Claim-based volumes: a pod's `persistentVolumeClaim` or generic `ephemeral` volume
 * becomes the PersistentVolume bound to its claim, with upstream's checks and messages
 * (pkg/kubelet/volumemanager/populator: getPVCExtractPV, getPVSpec, and
 * ephemeral.VolumeIsForPod). The volume manager then sets the PV up through the plugin
 * its source names (CSI, local, hostPath).
 */
import type {
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  Volume,
} from 'kubernetes-types/core/v1.js';
import {
  inNamespace,
  isNotFound,
  PERSISTENTVOLUMECLAIMS,
  PERSISTENTVOLUMES,
  type KubeClient,
} from '../kube/types.ts';
import { VolumeError } from './types.ts';

/** Set by the PVC protection controller; a claim being deleted without it is gone. */
const PVC_PROTECTION = 'kubernetes.io/pvc-protection';

export interface ClaimedVolume {
  readonly claim: PersistentVolumeClaim;
  readonly pv: PersistentVolume;
  /** The pod's persistentVolumeClaim.readOnly (ephemeral claims: false). */
  readonly readOnly: boolean;
  /** Filesystem or Block (the PV's volumeMode, Filesystem when unset). */
  readonly volumeMode: 'Filesystem' | 'Block';
}

/** The claim name of a pod volume, or undefined when it is not claim-based. */
export function claimName(pod: Pod, v: Volume): string | undefined {
  if (v.persistentVolumeClaim !== undefined) return v.persistentVolumeClaim.claimName;
  // Generic ephemeral volumes: the ephemeral-volume controller names the claim
  // <pod name>-<volume name> (k8s.io/component-helpers/storage/ephemeral).
  if (v.ephemeral !== undefined) return `${pod.metadata?.name ?? ''}-${v.name}`;
  return undefined;
}

function claimError(ns: string, name: string, detail: string): VolumeError {
  return new VolumeError('BERTH_VOLUME_CLAIM', `error processing PVC ${ns}/${name}: ${detail}`);
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Resolves claims through the API (no cache: a claim is read once per pod setup). */
export class ClaimResolver {
  readonly #kube: KubeClient;

  constructor(kube: KubeClient) {
    this.#kube = kube;
  }

  /** The bound PV of a claim-based volume; undefined when `v` is not one. */
  async resolve(pod: Pod, v: Volume, signal: AbortSignal): Promise<ClaimedVolume | undefined> {
    const name = claimName(pod, v);
    if (name === undefined) return undefined;
    const ns = pod.metadata?.namespace ?? 'default';
    let claim: PersistentVolumeClaim;
    try {
      claim = await this.#kube.get<PersistentVolumeClaim>(
        inNamespace(PERSISTENTVOLUMECLAIMS, ns),
        name,
        { signal },
      );
    } catch (err) {
      if (signal.aborted) throw err;
      const why = isNotFound(err) ? `persistentvolumeclaim "${name}" not found` : describe(err);
      throw claimError(ns, name, `failed to fetch PVC from API server: ${why}`);
    }
    if (
      claim.metadata?.deletionTimestamp != null &&
      !(claim.metadata.finalizers ?? []).includes(PVC_PROTECTION)
    ) {
      throw claimError(ns, name, 'PVC is being deleted');
    }
    if (claim.status?.phase !== 'Bound') throw claimError(ns, name, 'PVC is not bound');
    const pvName = claim.spec?.volumeName ?? '';
    if (pvName === '') throw claimError(ns, name, 'PVC has empty pvc.Spec.VolumeName');
    if (v.ephemeral !== undefined) checkOwnedByPod(pod, claim);
    let pv: PersistentVolume;
    try {
      pv = await this.#kube.get<PersistentVolume>(PERSISTENTVOLUMES, pvName, { signal });
    } catch (err) {
      if (signal.aborted) throw err;
      throw claimError(
        ns,
        name,
        `failed to fetch PV ${pvName} from API server: ${isNotFound(err) ? `persistentvolumes "${pvName}" not found` : describe(err)}`,
      );
    }
    const ref = pv.spec?.claimRef;
    if (ref == null) {
      throw claimError(
        ns,
        name,
        `found PV object ${pvName} but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim`,
      );
    }
    if (ref.uid !== claim.metadata?.uid) {
      throw claimError(
        ns,
        name,
        `found PV object ${pvName} but its pv.Spec.ClaimRef.UID ${ref.uid ?? ''} does not point to claim.UID ${claim.metadata?.uid ?? ''}`,
      );
    }
    return {
      claim,
      pv,
      readOnly: v.persistentVolumeClaim?.readOnly === true,
      volumeMode: pv.spec?.volumeMode === 'Block' ? 'Block' : 'Filesystem',
    };
  }
}

/** A generic ephemeral volume's claim must have been created for this very pod. */
function checkOwnedByPod(pod: Pod, claim: PersistentVolumeClaim): void {
  const owner = (claim.metadata?.ownerReferences ?? []).find((r) => r.controller === true);
  if (owner?.uid !== pod.metadata?.uid) {
    const ns = pod.metadata?.namespace ?? 'default';
    throw new VolumeError(
      'BERTH_VOLUME_CLAIM',
      `PVC ${ns}/${claim.metadata?.name ?? ''} was not created for pod ${ns}/${pod.metadata?.name ?? ''} (pod is not owner)`,
    );
  }
}

/**
 * Upstream's check that a claim's volumeMode matches how containers use it
 * (volumeMounts need Filesystem, volumeDevices need Block).
 */
export function checkVolumeModeUse(pod: Pod, v: Volume, mode: 'Filesystem' | 'Block'): void {
  const containers = [
    ...(pod.spec?.initContainers ?? []),
    ...(pod.spec?.containers ?? []),
    ...(pod.spec?.ephemeralContainers ?? []),
  ];
  const mounted = containers.some((c) => (c.volumeMounts ?? []).some((m) => m.name === v.name));
  const device = containers.some((c) => (c.volumeDevices ?? []).some((d) => d.name === v.name));
  if (mounted && mode !== 'Filesystem') {
    throw new VolumeError(
      'BERTH_VOLUME_INVALID',
      `volume ${v.name} has volumeMode ${mode}, but is specified in volumeMounts`,
    );
  }
  if (device && mode !== 'Block') {
    throw new VolumeError(
      'BERTH_VOLUME_INVALID',
      `volume ${v.name} has volumeMode ${mode}, but is specified in volumeDevices`,
    );
  }
}
