/**
 * What the CSI volume plugin reads from the API: the CSIDriver object (optional: absent
 * means attach required, persistent volumes only, fsGroup by fsType), the
 * VolumeAttachment the attach-detach controller creates and the driver's external
 * attacher marks attached, and the secrets a PV or inline volume names.
 */
import type { Node, Secret } from 'kubernetes-types/core/v1.js';
import type { CSIDriver, VolumeAttachment } from 'kubernetes-types/storage/v1.js';
import {
  CSIDRIVERS,
  inNamespace,
  isForbidden,
  isNotFound,
  NODES,
  SECRETS,
  VOLUMEATTACHMENTS,
  type KubeClient,
} from '../../kube/types.ts';
import type { Clock } from '../../util/clock.ts';
import { VolumeError } from '../types.ts';

/** The CSIDriver fields the kubelet acts on, with upstream's defaults. */
export interface DriverPolicy {
  readonly found: boolean;
  readonly attachRequired: boolean;
  readonly podInfoOnMount: boolean;
  readonly lifecycleModes: readonly string[];
  readonly fsGroupPolicy: 'ReadWriteOnceWithFSType' | 'File' | 'None';
  /** spec.tokenRequests: the audiences NodePublishVolume gets service-account tokens for. */
  readonly tokenRequests: readonly CsiTokenRequest[];
  /** spec.requiresRepublish: NodePublishVolume again on every sync of the pod. */
  readonly requiresRepublish: boolean;
  /** spec.serviceAccountTokenInSecrets: the tokens go in the secrets, not the context. */
  readonly tokenInSecrets: boolean;
}

export interface CsiTokenRequest {
  /** '' asks for the apiserver's own audiences. */
  readonly audience: string;
  readonly expirationSeconds?: number | undefined;
}

const DEFAULT_POLICY: DriverPolicy = {
  found: false,
  attachRequired: true,
  podInfoOnMount: false,
  lifecycleModes: ['Persistent'],
  fsGroupPolicy: 'ReadWriteOnceWithFSType',
  tokenRequests: [],
  requiresRepublish: false,
  tokenInSecrets: false,
};

export async function driverPolicy(
  kube: KubeClient,
  driver: string,
  signal: AbortSignal,
): Promise<DriverPolicy> {
  let obj: CSIDriver;
  try {
    obj = await kube.get<CSIDriver>(CSIDRIVERS, driver, { signal });
  } catch (err) {
    if (isNotFound(err)) return DEFAULT_POLICY;
    throw err;
  }
  const spec = obj.spec;
  const fsGroupPolicy = spec.fsGroupPolicy;
  return {
    found: true,
    attachRequired: spec.attachRequired !== false,
    podInfoOnMount: spec.podInfoOnMount === true,
    lifecycleModes: spec.volumeLifecycleModes ?? ['Persistent'],
    fsGroupPolicy:
      fsGroupPolicy === 'File' || fsGroupPolicy === 'None'
        ? fsGroupPolicy
        : 'ReadWriteOnceWithFSType',
    tokenRequests: (spec.tokenRequests ?? []).map((t) => ({
      audience: t.audience,
      expirationSeconds: t.expirationSeconds,
    })),
    requiresRepublish: spec.requiresRepublish === true,
    // Newer than the kubernetes-types release berth uses (storage/v1 since 1.35).
    tokenInSecrets:
      (spec as { serviceAccountTokenInSecrets?: boolean }).serviceAccountTokenInSecrets === true,
  };
}

/** Upstream's check of CSIDriver.spec.volumeLifecycleModes, with its message. */
export function checkLifecycleMode(policy: DriverPolicy, driver: string, mode: string): void {
  if (!policy.found && mode === 'Persistent') return;
  if (!policy.found) {
    throw new VolumeError(
      'BERTH_VOLUME_CSI',
      `volume mode "${mode}" not supported by driver ${driver} (no CSIDriver object)`,
    );
  }
  if (!policy.lifecycleModes.includes(mode)) {
    throw new VolumeError(
      'BERTH_VOLUME_CSI',
      `volume mode "${mode}" not supported by driver ${driver} (only supports ${JSON.stringify(policy.lifecycleModes)})`,
    );
  }
}

export interface AttachmentWait {
  readonly kube: KubeClient;
  readonly clock: Clock;
  /** The VolumeAttachment's name (csi-<sha256>). */
  readonly name: string;
  readonly nodeName: string;
  /** kubernetes.io/csi/<driver>^<handle>, as node.status.volumesAttached names it. */
  readonly uniqueName: string;
  readonly driver: string;
  readonly volumeHandle: string;
  /** Upstream's podAttachAndMountTimeout: 2 min 3 s. */
  readonly timeoutMs: number;
  readonly signal: AbortSignal;
}

/**
 * Waits as upstream's VerifyControllerAttachedVolume does: until the attach-detach
 * controller lists the volume in node.status.volumesAttached (the Node authorizer lets a
 * node read a VolumeAttachment only once one names it, so polling the attachment itself
 * would be refused until then), then returns the attachment's attachmentMetadata
 * (NodeStage/NodePublish's publish context). An attach error recorded on the
 * attachment, or the timeout, ends the wait with upstream's wording; the pod sync
 * retries later.
 */
export async function waitForAttachment(w: AttachmentWait): Promise<Record<string, string>> {
  const deadline = w.clock.now() + w.timeoutMs;
  // Upstream polls from 500 ms, growing 5% a round to at most 7 s; a little faster here.
  let delay = 250;
  for (;;) {
    w.signal.throwIfAborted();
    const node = await w.kube.get<Node>(NODES, w.nodeName, { signal: w.signal });
    const listed = (node.status?.volumesAttached ?? []).some((v) => v.name === w.uniqueName);
    const va = await w.kube
      .get<VolumeAttachment>(VOLUMEATTACHMENTS, w.name, { signal: w.signal })
      .catch((err: unknown) => {
        // Not there yet, or not yet related to this node by the Node authorizer.
        if (isNotFound(err) || isForbidden(err)) return undefined;
        throw err;
      });
    if (va?.metadata?.deletionTimestamp != null) {
      throw new VolumeError('BERTH_VOLUME_CSI', `volume attachment ${w.name} is being deleted`);
    }
    if (listed && va?.status?.attached === true) {
      return { ...(va.status.attachmentMetadata ?? {}) };
    }
    const attachError = va?.status?.attachError?.message;
    if (attachError !== undefined && attachError !== '') {
      throw new VolumeError(
        'BERTH_VOLUME_CSI',
        `volume attachment ${w.name} failed: ${attachError}`,
      );
    }
    const left = deadline - w.clock.now();
    if (left <= 0) {
      throw new VolumeError(
        'BERTH_VOLUME_CSI',
        `timed out waiting for external-attacher of ${w.driver} CSI driver to attach volume ${w.volumeHandle}`,
      );
    }
    await w.clock.sleep(Math.min(delay, left), w.signal);
    delay = Math.min(Math.ceil(delay * 1.5), 5000);
  }
}

/** The string data of a secret a CSI volume names (NodeStage/NodePublish secrets). */
export async function secretStrings(
  kube: KubeClient,
  ref: { readonly name: string; readonly namespace: string },
  field: 'NodeStageSecretRef' | 'NodePublishSecretRef',
  signal: AbortSignal,
): Promise<Record<string, string>> {
  let secret: Secret;
  try {
    secret = await kube.get<Secret>(inNamespace(SECRETS, ref.namespace), ref.name, { signal });
  } catch (err) {
    if (signal.aborted) throw err;
    throw new VolumeError(
      'BERTH_VOLUME_CSI',
      `fetching ${field} ${ref.namespace}/${ref.name} failed: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(secret.data ?? {})) {
    out[k] = Buffer.from(v, 'base64').toString('utf8');
  }
  return out;
}
