/**
 * The set-up side of the CSI volume plugin: for one pod volume, in upstream's order
 * (csi_attacher.go, csi_mounter.go): wait for the VolumeAttachment when the CSIDriver
 * requires attach -> NodeStageVolume to the global mount when the driver stages (once
 * per volume on the node) -> NodePublishVolume to the pod's target -> fsGroup ownership
 * unless the driver applies it itself (VOLUME_MOUNT_GROUP). vol_data.json is written
 * before each call so the tear-down side finds the volume from disk alone.
 *
 * A published volume is left alone by later syncs of its pod, unless its CSIDriver says
 * requiresRepublish: then every sync publishes it again (upstream's RequiresRemount, so
 * the driver sees fresh service-account tokens), and a failed republish leaves the
 * existing target in place for the pod.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import { lstat, mkdir } from 'node:fs/promises';
import * as path from 'node:path';
import type { CsiAccessMode, CsiNodeClient, CsiVolumeCapability } from '../../csi/types.ts';
import type { KubeClient } from '../../kube/types.ts';
import type { Clock } from '../../util/clock.ts';
import type { Logger } from '../../util/logger.ts';
import { setVolumeOwnership } from '../ownership.ts';
import type { ServiceAccountTokens } from '../sources/token-manager.ts';
import type { MountedVolume } from '../types.ts';
import {
  checkLifecycleMode,
  driverPolicy,
  secretStrings,
  waitForAttachment,
  type DriverPolicy,
} from './api.ts';
import {
  attachmentName,
  checkDriverName,
  CSI_PLUGIN_DIR,
  publishPath,
  stagingPath,
  uniqueVolumeName,
} from './paths.ts';
import type { CsiVolumeSpec } from './spec.ts';
import { detail, isFinalError, opError, prefixed, type CsiVolumeState } from './state.ts';
import { serviceAccountTokenAttrs } from './tokens.ts';
import { saveVolData } from './vol-data.ts';

/** Upstream's podAttachAndMountTimeout. */
export const ATTACH_TIMEOUT_MS = 123_000;

export interface CsiSetUpOptions {
  readonly rootDir: string;
  readonly nodeName: string;
  readonly kube: KubeClient;
  readonly logger: Logger;
  readonly clock: Clock;
  /** Default: upstream's 2 min 3 s. */
  readonly attachTimeoutMs?: number | undefined;
  /** Tokens for CSIDrivers with tokenRequests; without it such drivers' volumes fail. */
  readonly tokens?: ServiceAccountTokens | undefined;
}

export function accessModeOf(k8sMode: string, multiWriter: boolean): CsiAccessMode {
  switch (k8sMode) {
    case 'ReadOnlyMany':
      return 'MULTI_NODE_READER_ONLY';
    case 'ReadWriteMany':
      return 'MULTI_NODE_MULTI_WRITER';
    case 'ReadWriteOncePod':
      return multiWriter ? 'SINGLE_NODE_SINGLE_WRITER' : 'SINGLE_NODE_WRITER';
    default:
      return multiWriter ? 'SINGLE_NODE_MULTI_WRITER' : 'SINGLE_NODE_WRITER';
  }
}

export class CsiSetUp {
  readonly #o: CsiSetUpOptions;
  readonly #s: CsiVolumeState;

  constructor(options: CsiSetUpOptions, state: CsiVolumeState) {
    this.#o = options;
    this.#s = state;
  }

  async setUp(
    pod: Pod,
    podDir: string,
    spec: CsiVolumeSpec,
    signal: AbortSignal,
  ): Promise<MountedVolume> {
    const uid = pod.metadata?.uid ?? '';
    checkDriverName(spec.driver);
    const target = publishPath(podDir, spec.specName);
    const mounted: MountedVolume = {
      name: spec.podVolumeName,
      hostPath: target,
      readOnly: spec.readOnly,
      plugin: CSI_PLUGIN_DIR,
    };
    const key = `${uid}/${spec.specName}`;
    const volumeKey = `${spec.driver}^${spec.volumeHandle}`;
    if (spec.lifecycle === 'Persistent') {
      const name = uniqueVolumeName(spec.driver, spec.volumeHandle);
      const pods = this.#s.inUse.get(name) ?? new Set<string>();
      pods.add(uid);
      this.#s.inUse.set(name, pods);
    }
    if (this.#s.published.has(key) && !this.#s.republish.has(key)) return mounted;
    return this.#s.queue.run(volumeKey, async () => {
      const remount = this.#s.published.has(key);
      const policy = await driverPolicy(this.#o.kube, spec.driver, signal).catch((err: unknown) => {
        if (signal.aborted) throw err;
        throw opError(
          'MountVolume.SetUp',
          spec.specName,
          prefixed(`failed to get CSIDriver ${spec.driver}: ${detail(err)}`),
        );
      });
      try {
        checkLifecycleMode(policy, spec.driver, spec.lifecycle);
      } catch (err) {
        throw opError(
          'MountVolume.SetUp',
          spec.specName,
          prefixed(`mounter.SetupAt failed to check volume lifecycle mode: ${detail(err)}`),
        );
      }
      const client = this.#clientFor(spec, 'mounter.SetUpAt');
      let publishContext: Record<string, string> = {};
      if (spec.lifecycle === 'Persistent' && policy.attachRequired) {
        try {
          publishContext = await waitForAttachment({
            kube: this.#o.kube,
            clock: this.#o.clock,
            name: attachmentName(spec.volumeHandle, spec.driver, this.#o.nodeName),
            nodeName: this.#o.nodeName,
            uniqueName: uniqueVolumeName(spec.driver, spec.volumeHandle),
            driver: spec.driver,
            volumeHandle: spec.volumeHandle,
            timeoutMs: this.#o.attachTimeoutMs ?? ATTACH_TIMEOUT_MS,
            signal,
          });
        } catch (err) {
          if (signal.aborted) throw err;
          throw opError('MountVolume.WaitForAttach', spec.specName, err);
        }
      }
      const caps = await client.nodeGetCapabilities(signal).catch((err: unknown) => {
        if (signal.aborted) throw err;
        throw opError(
          'MountVolume.SetUp',
          spec.specName,
          prefixed(`mounter.SetUpAt failed to get node capabilities: ${detail(err)}`),
        );
      });
      const fsGroup = pod.spec?.securityContext?.fsGroup;
      const capability = (): CsiVolumeCapability => ({
        accessType: {
          kind: 'mount',
          fsType: spec.fsType,
          mountFlags: spec.mountOptions,
          ...(caps.volumeMountGroup &&
            fsGroup !== undefined && { volumeMountGroup: String(fsGroup) }),
        },
        accessMode: accessModeOf(spec.accessMode, caps.singleNodeMultiWriter),
      });
      let staging = '';
      if (spec.lifecycle === 'Persistent') {
        staging = stagingPath(this.#o.rootDir, spec.driver, spec.volumeHandle);
        if (caps.stageUnstageVolume && !this.#s.staged.has(volumeKey)) {
          await this.#stage(spec, staging, publishContext, capability(), client, signal);
          this.#s.staged.add(volumeKey);
        }
        if (!caps.stageUnstageVolume) {
          // Upstream keeps the metadata even without staging: UnmountDevice reads it.
          await mkdir(staging, { recursive: true, mode: 0o750 });
          await saveVolData(path.dirname(staging), {
            volumeHandle: spec.volumeHandle,
            driverName: spec.driver,
          });
          staging = '';
        }
      }
      await this.#publish(
        pod,
        spec,
        { target, staging, publishContext, remount },
        capability(),
        policy,
        client,
        signal,
      );
      if (fsGroup !== undefined && !caps.volumeMountGroup && supportsFsGroup(spec, policy)) {
        try {
          await setVolumeOwnership(target, {
            fsGroup,
            readOnly: spec.readOnly,
            policy: pod.spec?.securityContext?.fsGroupChangePolicy,
            signal,
          });
        } catch (err) {
          if (signal.aborted) throw err;
          // Published but unusable: keep it recorded so the pod's teardown unpublishes it.
          throw opError(
            'MountVolume.SetUp',
            spec.specName,
            `applyFSGroup failed for vol ${spec.volumeHandle}: ${detail(err)}`,
          );
        }
      }
      this.#s.published.add(key);
      if (policy.requiresRepublish) this.#s.republish.add(key);
      else this.#s.republish.delete(key);
      this.#o.logger.info(remount ? 'Volume republished' : 'Volume published', {
        podUID: uid,
        volume: spec.podVolumeName,
        driver: spec.driver,
        target,
      });
      return mounted;
    });
  }

  #clientFor(spec: CsiVolumeSpec, op: string): CsiNodeClient {
    try {
      return this.#s.client(spec.driver, op);
    } catch (err) {
      throw opError('MountVolume.SetUp', spec.specName, err);
    }
  }

  async #stage(
    spec: CsiVolumeSpec,
    staging: string,
    publishContext: Record<string, string>,
    capability: CsiVolumeCapability,
    client: CsiNodeClient,
    signal: AbortSignal,
  ): Promise<void> {
    const secrets =
      spec.stageSecretRef === undefined
        ? {}
        : await secretStrings(this.#o.kube, spec.stageSecretRef, 'NodeStageSecretRef', signal);
    await mkdir(staging, { recursive: true, mode: 0o750 });
    await saveVolData(path.dirname(staging), {
      volumeHandle: spec.volumeHandle,
      driverName: spec.driver,
    });
    try {
      await client.nodeStageVolume(
        {
          volumeId: spec.volumeHandle,
          publishContext,
          stagingTargetPath: staging,
          volumeCapability: capability,
          secrets,
          volumeContext: spec.attributes,
        },
        signal,
      );
    } catch (err) {
      if (signal.aborted) throw err;
      if (isFinalError(err)) await this.#s.forgetTarget(staging).catch(() => undefined);
      // Upstream returns the driver's error as it is (csi_attacher.go MountDevice).
      throw opError('MountVolume.MountDevice', spec.specName, err);
    }
    await this.#checkTarget(staging, spec, 'MountVolume.MountDevice');
  }

  async #publish(
    pod: Pod,
    spec: CsiVolumeSpec,
    at: {
      readonly target: string;
      readonly staging: string;
      readonly publishContext: Record<string, string>;
      /** A republish of a volume the pod already uses (requiresRepublish). */
      readonly remount: boolean;
    },
    capability: CsiVolumeCapability,
    policy: DriverPolicy,
    client: CsiNodeClient,
    signal: AbortSignal,
  ): Promise<void> {
    const { target, staging, publishContext } = at;
    let secrets =
      spec.publishSecretRef === undefined
        ? {}
        : await secretStrings(this.#o.kube, spec.publishSecretRef, 'NodePublishSecretRef', signal);
    let attributes = policy.podInfoOnMount
      ? { ...spec.attributes, ...podInfo(pod, spec.lifecycle) }
      : spec.attributes;
    let tokenAttrs: Record<string, string> | undefined;
    try {
      tokenAttrs = await serviceAccountTokenAttrs(this.#o.tokens, pod, policy, signal);
    } catch (err) {
      if (signal.aborted) throw err;
      throw opError(
        'MountVolume.SetUp',
        spec.specName,
        prefixed(`mounter.SetUpAt failed to get service accoount token attributes: ${detail(err)}`),
      );
    }
    if (tokenAttrs !== undefined) {
      if (policy.tokenInSecrets) secrets = { ...secrets, ...tokenAttrs };
      else attributes = { ...attributes, ...tokenAttrs };
    }
    const parent = path.dirname(target);
    await mkdir(parent, { recursive: true, mode: 0o750 });
    await saveVolData(parent, {
      specVolID: spec.specName,
      volumeHandle: spec.volumeHandle,
      driverName: spec.driver,
      nodeName: this.#o.nodeName,
      volumeLifecycleMode: spec.lifecycle,
      attachmentID: attachmentName(spec.volumeHandle, spec.driver, this.#o.nodeName),
    });
    try {
      await client.nodePublishVolume(
        {
          volumeId: spec.volumeHandle,
          publishContext,
          stagingTargetPath: staging,
          targetPath: target,
          volumeCapability: capability,
          readonly: spec.readOnly,
          secrets,
          volumeContext: attributes,
        },
        signal,
      );
    } catch (err) {
      if (signal.aborted) throw err;
      // A republish keeps the target: the pod's containers use what is mounted there.
      if (isFinalError(err) && !at.remount) {
        await this.#s.forgetTarget(target).catch(() => undefined);
      }
      // The staging may be what failed (a driver restarted and lost it): stage again next time.
      this.#s.staged.delete(`${spec.driver}^${spec.volumeHandle}`);
      // Upstream returns the driver's error as it is (csi_mounter.go SetUpAt).
      throw opError('MountVolume.SetUp', spec.specName, err);
    }
    await this.#checkTarget(target, spec, 'MountVolume.SetUp');
  }

  /**
   * A target the driver turned into a symlink (or anything but a directory) would let a
   * container mount follow it anywhere on the host: refuse it. The pod's teardown still
   * unpublishes, since vol_data.json is written.
   */
  async #checkTarget(target: string, spec: CsiVolumeSpec, op: string): Promise<void> {
    let ok = false;
    try {
      ok = (await lstat(target)).isDirectory();
    } catch {
      ok = false;
    }
    if (!ok) {
      throw opError(
        op,
        spec.specName,
        prefixed(
          `driver ${spec.driver} left ${target} as something other than a directory; refusing to use it`,
        ),
      );
    }
  }
}

/** Upstream's csiMountMgr.supportsFSGroup. */
function supportsFsGroup(spec: CsiVolumeSpec, policy: DriverPolicy): boolean {
  if (policy.fsGroupPolicy === 'None' || spec.readOnly) return false;
  if (policy.fsGroupPolicy === 'File') return true;
  if (spec.fsType === '') return false;
  if (spec.lifecycle === 'Ephemeral') return true;
  return spec.accessModes.includes('ReadWriteOnce');
}

/** The attributes podInfoOnMount adds (upstream's getPodInfoAttrs). */
export function podInfo(pod: Pod, lifecycle: string): Record<string, string> {
  return {
    'csi.storage.k8s.io/pod.name': pod.metadata?.name ?? '',
    'csi.storage.k8s.io/pod.namespace': pod.metadata?.namespace ?? '',
    'csi.storage.k8s.io/pod.uid': pod.metadata?.uid ?? '',
    'csi.storage.k8s.io/serviceAccount.name': pod.spec?.serviceAccountName ?? '',
    'csi.storage.k8s.io/ephemeral': String(lifecycle === 'Ephemeral'),
  };
}
