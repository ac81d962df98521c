/**
 * Node-side volume expansion, as upstream's node expander
 * (pkg/volume/util/operationexecutor/node_expander.go): once the controller side has
 * grown the volume (the PV's capacity is above the claim's status capacity and the
 * claim says NodeResizePending, or carries the older FileSystemResizePending
 * condition), the kubelet calls NodeExpandVolume on the mounted volume and then
 * records the new size on the claim's status. A driver without the EXPAND_VOLUME node
 * capability needs nothing on the node: the claim is marked done as upstream does.
 */
import type { PersistentVolume, PersistentVolumeClaim } from 'kubernetes-types/core/v1.js';
import { inNamespace, PERSISTENTVOLUMECLAIMS, type KubeClient } from '../../kube/types.ts';
import type { Logger } from '../../util/logger.ts';
import { parseQuantity } from '../../util/quantity.ts';
import type { CsiVolumeCapability } from '../../csi/types.ts';
import { VolumeError } from '../types.ts';
import { publishPath, stagingPath } from './paths.ts';
import type { CsiVolumeSpec } from './spec.ts';
import { detail, prefixed, type CsiVolumeState } from './state.ts';

const RESIZE_CONDITIONS: ReadonlySet<string> = new Set(['FileSystemResizePending', 'Resizing']);

export interface ExpandTarget {
  readonly claim: PersistentVolumeClaim;
  readonly pv: PersistentVolume;
  readonly spec: CsiVolumeSpec;
  readonly podDir: string;
}

/** True when the claim waits for the node to grow the filesystem. */
export function needsNodeExpansion(claim: PersistentVolumeClaim, pv: PersistentVolume): boolean {
  const want = pv.spec?.capacity?.['storage'];
  const have = claim.status?.capacity?.['storage'];
  if (want === undefined || have === undefined) return false;
  if (parseQuantity(want) <= parseQuantity(have)) return false;
  const status = claim.status?.allocatedResourceStatuses?.['storage'];
  if (status === 'NodeResizePending' || status === 'NodeResizeInProgress') return true;
  return (claim.status?.conditions ?? []).some(
    (c) => c.type === 'FileSystemResizePending' && c.status === 'True',
  );
}

/**
 * Expands the published volume when its claim asks for it; returns true when the claim
 * was updated. Failures are VolumeErrors with upstream's wording (the sync retries).
 */
export async function expandIfNeeded(
  o: {
    readonly kube: KubeClient;
    readonly state: CsiVolumeState;
    readonly rootDir: string;
    readonly logger: Logger;
  },
  t: ExpandTarget,
  signal: AbortSignal,
): Promise<boolean> {
  if (!needsNodeExpansion(t.claim, t.pv)) return false;
  const want = t.pv.spec?.capacity?.['storage'] ?? '';
  const client = o.state.client(t.spec.driver, 'NodeExpandVolume');
  const caps = await client.nodeGetCapabilities(signal);
  if (caps.expandVolume) {
    const capability: CsiVolumeCapability = {
      accessType: { kind: 'mount', fsType: t.spec.fsType, mountFlags: t.spec.mountOptions },
      accessMode: 'SINGLE_NODE_WRITER',
    };
    try {
      await client.nodeExpandVolume(
        {
          volumeId: t.spec.volumeHandle,
          volumePath: publishPath(t.podDir, t.spec.specName),
          requiredBytes: BigInt(Math.round(parseQuantity(want))),
          stagingTargetPath: caps.stageUnstageVolume
            ? stagingPath(o.rootDir, t.spec.driver, t.spec.volumeHandle)
            : '',
          volumeCapability: capability,
        },
        signal,
      );
    } catch (err) {
      if (signal.aborted) throw err;
      throw new VolumeError(
        'BERTH_VOLUME_CSI',
        `MountVolume.NodeExpandVolume failed for volume ${JSON.stringify(t.spec.specName)} : ${prefixed(`Expander.NodeExpand failed to expand the volume : ${detail(err)}`)}`,
        { cause: err },
      );
    }
  }
  const ns = t.claim.metadata?.namespace ?? 'default';
  const name = t.claim.metadata?.name ?? '';
  const conditions = (t.claim.status?.conditions ?? []).filter(
    (c) => !RESIZE_CONDITIONS.has(c.type),
  );
  await o.kube.patch(
    inNamespace(PERSISTENTVOLUMECLAIMS, ns),
    name,
    {
      status: {
        capacity: { storage: want },
        allocatedResourceStatuses: { storage: null },
        conditions,
      },
    },
    'merge',
    { subresource: 'status', signal },
  );
  o.logger.info('Volume expanded on the node', {
    claim: `${ns}/${name}`,
    volume: t.spec.specName,
    capacity: want,
    nodeExpand: caps.expandVolume,
  });
  return true;
}
