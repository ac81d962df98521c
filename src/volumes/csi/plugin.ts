/**
 * The CSI volume plugin the volume manager calls: set-up (setup.ts) and tear-down
 * (teardown.ts) over one shared state (state.ts). Pod volumes of kind `csi` (inline
 * ephemeral) and claims bound to PVs with a `csi` source come here.
 */
import type { PersistentVolume, PersistentVolumeClaim, Pod } from 'kubernetes-types/core/v1.js';
import type { CsiDriverRegistry } from '../../csi/types.ts';
import type { KubeClient } from '../../kube/types.ts';
import type { Clock } from '../../util/clock.ts';
import type { Logger } from '../../util/logger.ts';
import type { Mounter } from '../mounter.ts';
import type { ServiceAccountTokens } from '../sources/token-manager.ts';
import type { MountedVolume } from '../types.ts';
import { CsiBlockMapper } from './block.ts';
import { expandIfNeeded } from './expand.ts';
import { SystemLoopDevices, type LoopDevices } from './loop.ts';
import { CsiSetUp } from './setup.ts';
import type { CsiVolumeSpec } from './spec.ts';
import { CsiVolumeState } from './state.ts';
import { CsiTearDown } from './teardown.ts';

export interface CsiVolumePluginOptions {
  readonly rootDir: string;
  readonly nodeName: string;
  readonly registry: CsiDriverRegistry;
  readonly kube: KubeClient;
  readonly mounter: Mounter;
  readonly logger: Logger;
  readonly clock: Clock;
  /** How long a set-up waits for the VolumeAttachment (default: upstream's 2 min 3 s). */
  readonly attachTimeoutMs?: number;
  /** The kubelet's token manager, for CSIDrivers with tokenRequests. */
  readonly tokens?: ServiceAccountTokens;
  /** Loop devices holding block volumes open (default: losetup(8) and sysfs). */
  readonly loops?: LoopDevices;
}

export class CsiVolumePlugin {
  readonly #state: CsiVolumeState;
  readonly #setUp: CsiSetUp;
  readonly #tearDown: CsiTearDown;
  readonly #block: CsiBlockMapper;

  readonly #o: CsiVolumePluginOptions;

  constructor(o: CsiVolumePluginOptions) {
    this.#o = o;
    this.#state = new CsiVolumeState(o.registry, o.mounter);
    this.#setUp = new CsiSetUp(o, this.#state);
    this.#tearDown = new CsiTearDown(o, this.#state);
    this.#block = new CsiBlockMapper(
      { ...o, loops: o.loops ?? new SystemLoopDevices() },
      this.#state,
    );
  }

  /** node.status.volumesInUse: the persistent CSI volumes mounted or being mounted. */
  volumesInUse(): string[] {
    return [...this.#state.inUse.keys()].sort();
  }

  /** Sets up one CSI volume of `pod` (idempotent: a published volume is left as it is). */
  setUp(
    pod: Pod,
    podDir: string,
    spec: CsiVolumeSpec,
    signal: AbortSignal,
  ): Promise<MountedVolume> {
    return this.#setUp.setUp(pod, podDir, spec, signal);
  }

  /**
   * Maps one block volume of `pod` (idempotent); the result's hostPath is the pod's
   * symlink to the device, for the containers' volumeDevices.
   */
  mapBlock(
    pod: Pod,
    podDir: string,
    spec: CsiVolumeSpec,
    signal: AbortSignal,
  ): Promise<MountedVolume> {
    return this.#block.mapPod(pod, podDir, spec, signal);
  }

  /**
   * NodeExpandVolume when the claim waits for the node to grow the filesystem, then
   * the claim's status; true when it did.
   */
  expand(
    claim: PersistentVolumeClaim,
    pv: PersistentVolume,
    spec: CsiVolumeSpec,
    podDir: string,
    signal: AbortSignal,
  ): Promise<boolean> {
    return this.#state.queue.run(`${spec.driver}^${spec.volumeHandle}`, () =>
      expandIfNeeded(
        {
          kube: this.#o.kube,
          state: this.#state,
          rootDir: this.#o.rootDir,
          logger: this.#o.logger,
        },
        { claim, pv, spec, podDir },
        signal,
      ),
    );
  }

  /** Unpublishes (and, for the last user, unstages) every CSI volume of a pod, block ones too. */
  async tearDownPod(uid: string, podDir: string, signal: AbortSignal): Promise<void> {
    await this.#tearDown.tearDownPod(uid, podDir, signal);
    await this.#block.unmapPod(uid, podDir, signal);
  }

  /** Unstages staged volumes no pod uses any more; returns the staging paths cleaned. */
  async cleanupStaged(podsDir: string, signal: AbortSignal): Promise<string[]> {
    return [
      ...(await this.#tearDown.cleanupStaged(podsDir, signal)),
      ...(await this.#block.cleanupStaged(signal)),
    ];
  }
}
