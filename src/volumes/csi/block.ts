/**
 * Block volumes (a claim whose PV has volumeMode: Block, used through a container's
 * volumeDevices), as upstream's csiBlockMapper and the volume manager's map path
 * (pkg/volume/csi/csi_block.go, util.MapBlockVolume), in the layout paths.ts describes:
 *
 * map: wait for the attachment -> vol_data.json -> NodeStageVolume (block access type) to
 * the staging directory, once per volume -> NodePublishVolume to a per-pod file the driver
 * turns into the device -> a bind mount of that device at dev/<pod uid>, held open by a
 * loop device -> the pod's symlink to the device, which the runtime gets as the CRI
 * device's host path.
 * unmap, in reverse: loop device, symlink, bind mount, NodeUnpublishVolume; the last pod
 * gone, NodeUnstageVolume and the volume's directories. What to unmap comes from the
 * pod's symlinks and vol_data.json, never from a pod spec, so pods deleted while berth
 * was down are unmapped too.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import { lstat, mkdir, readdir, rm, rmdir, symlink, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import type { CsiNodeClient } from '../../csi/types.ts';
import type { Logger } from '../../util/logger.ts';
import type { Mounter } from '../mounter.ts';
import type { MountedVolume } from '../types.ts';
import { checkLifecycleMode, driverPolicy, secretStrings, waitForAttachment } from './api.ts';
import type { LoopDevices } from './loop.ts';
import {
  attachmentName,
  blockPublishPath,
  blockStagingPath,
  blockVolumeDir,
  checkDriverName,
  CSI_PLUGIN_DIR,
  podBlockDir,
  podDevicePath,
  uniqueVolumeName,
  volumeDevicesDir,
} from './paths.ts';
import { accessModeOf, ATTACH_TIMEOUT_MS, podInfo, type CsiSetUpOptions } from './setup.ts';
import type { CsiVolumeSpec } from './spec.ts';
import { detail, opError, prefixed, type CsiVolumeState } from './state.ts';
import { loadVolData, saveVolData } from './vol-data.ts';

export interface CsiBlockOptions extends CsiSetUpOptions {
  readonly mounter: Mounter;
  readonly loops: LoopDevices;
}

async function exists(p: string): Promise<boolean> {
  return lstat(p).then(
    () => true,
    () => false,
  );
}

const isEnoent = (err: unknown): boolean => (err as { code?: unknown }).code === 'ENOENT';

export class CsiBlockMapper {
  readonly #o: CsiBlockOptions;
  readonly #s: CsiVolumeState;
  readonly #log: Logger;

  constructor(options: CsiBlockOptions, state: CsiVolumeState) {
    this.#o = options;
    this.#s = state;
    this.#log = options.logger;
  }

  /** Maps a block volume for `pod`; the result's hostPath is the pod's device symlink. */
  async mapPod(
    pod: Pod,
    podDir: string,
    spec: CsiVolumeSpec,
    signal: AbortSignal,
  ): Promise<MountedVolume> {
    const uid = pod.metadata?.uid ?? '';
    checkDriverName(spec.driver);
    const link = podDevicePath(podDir, spec.specName);
    const mounted: MountedVolume = {
      name: spec.podVolumeName,
      hostPath: link,
      readOnly: spec.readOnly,
      plugin: CSI_PLUGIN_DIR,
      block: true,
    };
    const name = uniqueVolumeName(spec.driver, spec.volumeHandle);
    const pods = this.#s.inUse.get(name) ?? new Set<string>();
    pods.add(uid);
    this.#s.inUse.set(name, pods);
    const key = `block:${uid}/${spec.specName}`;
    if (this.#s.published.has(key)) return mounted;
    const volumeKey = `${spec.driver}^${spec.volumeHandle}`;
    return this.#s.queue.run(volumeKey, async () => {
      const op = 'MapVolume.SetUpDevice';
      const policy = await driverPolicy(this.#o.kube, spec.driver, signal).catch((err: unknown) => {
        if (signal.aborted) throw err;
        throw opError(op, spec.specName, prefixed(`failed to get CSIDriver: ${detail(err)}`));
      });
      try {
        checkLifecycleMode(policy, spec.driver, spec.lifecycle);
      } catch (err) {
        throw opError(op, spec.specName, err);
      }
      let client: CsiNodeClient;
      try {
        client = this.#s.client(spec.driver, 'blockMapper.SetUpDevice');
      } catch (err) {
        throw opError(op, spec.specName, err);
      }
      let publishContext: Record<string, string> = {};
      if (policy.attachRequired) {
        try {
          publishContext = await waitForAttachment({
            kube: this.#o.kube,
            clock: this.#o.clock,
            name: attachmentName(spec.volumeHandle, spec.driver, this.#o.nodeName),
            nodeName: this.#o.nodeName,
            uniqueName: name,
            driver: spec.driver,
            volumeHandle: spec.volumeHandle,
            timeoutMs: this.#o.attachTimeoutMs ?? ATTACH_TIMEOUT_MS,
            signal,
          });
        } catch (err) {
          if (signal.aborted) throw err;
          throw opError('MapVolume.WaitForAttach', spec.specName, err);
        }
      }
      const caps = await client.nodeGetCapabilities(signal).catch((err: unknown) => {
        if (signal.aborted) throw err;
        throw opError(
          op,
          spec.specName,
          prefixed(`failed to get node capabilities: ${detail(err)}`),
        );
      });
      const capability = {
        accessType: { kind: 'block' as const },
        accessMode: accessModeOf(spec.accessMode, caps.singleNodeMultiWriter),
      };
      const volDir = blockVolumeDir(this.#o.rootDir, spec.specName);
      await mkdir(path.join(volDir, 'data'), { recursive: true, mode: 0o750 });
      await saveVolData(path.join(volDir, 'data'), {
        specVolID: spec.specName,
        volumeHandle: spec.volumeHandle,
        driverName: spec.driver,
        nodeName: this.#o.nodeName,
        attachmentID: attachmentName(spec.volumeHandle, spec.driver, this.#o.nodeName),
      });
      const staging = blockStagingPath(this.#o.rootDir, spec.specName);
      if (caps.stageUnstageVolume && !this.#s.staged.has(volumeKey)) {
        const secrets =
          spec.stageSecretRef === undefined
            ? {}
            : await secretStrings(this.#o.kube, spec.stageSecretRef, 'NodeStageSecretRef', signal);
        await mkdir(staging, { recursive: true, mode: 0o750 });
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
          throw opError(op, spec.specName, err);
        }
        this.#s.staged.add(volumeKey);
      }
      const publish = blockPublishPath(this.#o.rootDir, spec.specName, uid);
      // The pod's directory first: a pod whose publish failed half-way is still found by
      // the orphan sweep, and its tear-down unpublishes what the driver made.
      await mkdir(podBlockDir(podDir), { recursive: true, mode: 0o750 });
      const context = policy.podInfoOnMount
        ? { ...spec.attributes, ...podInfo(pod, spec.lifecycle) }
        : spec.attributes;
      await this.#publish(
        spec,
        publish,
        staging,
        publishContext,
        context,
        capability,
        client,
        signal,
      );
      await this.#mapDevice(uid, podDir, spec, publish, signal);
      this.#s.published.add(key);
      this.#log.info('Block volume mapped', {
        podUID: uid,
        volume: spec.podVolumeName,
        driver: spec.driver,
        device: publish,
      });
      return mounted;
    });
  }

  async #publish(
    spec: CsiVolumeSpec,
    publish: string,
    staging: string,
    publishContext: Record<string, string>,
    volumeContext: Readonly<Record<string, string>>,
    capability: { accessType: { kind: 'block' }; accessMode: ReturnType<typeof accessModeOf> },
    client: CsiNodeClient,
    signal: AbortSignal,
  ): Promise<void> {
    const op = 'MapVolume.MapPodDevice';
    const secrets =
      spec.publishSecretRef === undefined
        ? {}
        : await secretStrings(this.#o.kube, spec.publishSecretRef, 'NodePublishSecretRef', signal);
    // The driver makes the file; the kubelet only its parent.
    await mkdir(path.dirname(publish), { recursive: true, mode: 0o750 });
    try {
      await client.nodePublishVolume(
        {
          volumeId: spec.volumeHandle,
          publishContext,
          // Upstream passes the staging path whether or not the driver stages.
          stagingTargetPath: staging,
          targetPath: publish,
          volumeCapability: capability,
          readonly: spec.readOnly,
          secrets,
          volumeContext,
        },
        signal,
      );
    } catch (err) {
      if (signal.aborted) throw err;
      throw opError(
        op,
        spec.specName,
        prefixed(`blockMapper.publishVolumeForBlock failed: ${detail(err)}`),
      );
    }
    // Only a device may reach a container: a symlink (or a directory, or a regular file)
    // left by the driver would hand the container whatever it points at.
    const st = await lstat(publish).catch(() => undefined);
    if (st?.isBlockDevice() !== true) {
      throw opError(
        op,
        spec.specName,
        prefixed(
          `driver ${spec.driver} left ${publish} as something other than a block device; refusing to use it`,
        ),
      );
    }
  }

  /** The bind mount at dev/<uid>, its loop device, and the pod's symlink (MapBlockVolume). */
  async #mapDevice(
    uid: string,
    podDir: string,
    spec: CsiVolumeSpec,
    publish: string,
    signal: AbortSignal,
  ): Promise<void> {
    const devDir = path.join(blockVolumeDir(this.#o.rootDir, spec.specName), 'dev');
    const mapFile = path.join(devDir, uid);
    try {
      await mkdir(devDir, { recursive: true, mode: 0o750 });
      if (!(await this.#o.mounter.isMountPoint(mapFile).catch(() => false))) {
        await writeFile(mapFile, '', { mode: 0o640, flag: 'a' });
        await this.#o.mounter.bindMount(publish, mapFile, { readOnly: false }, signal);
      }
      const link = podDevicePath(podDir, spec.specName);
      await mkdir(path.dirname(link), { recursive: true, mode: 0o750 });
      await rm(link, { force: true });
      await symlink(publish, link);
      await this.#o.loops.attach(mapFile, signal);
    } catch (err) {
      if (signal.aborted) throw err;
      throw opError('MapVolume.MapBlockVolume', spec.specName, err);
    }
  }

  /** Unmaps every block volume of a pod; returns the ones to unstage if nobody else maps them. */
  async unmapPod(uid: string, podDir: string, signal: AbortSignal): Promise<void> {
    const dir = podBlockDir(podDir);
    const names = new Set<string>();
    try {
      for (const name of await readdir(dir)) names.add(name);
    } catch (err) {
      if (!isEnoent(err)) throw err;
    }
    // Volumes published for the pod but not yet mapped (a set-up that failed after
    // NodePublishVolume) have no symlink: their publish file names them.
    const publishBase = path.join(volumeDevicesDir(this.#o.rootDir), 'publish');
    for (const name of await readdir(publishBase).catch(() => [] as string[])) {
      if (await exists(path.join(publishBase, name, uid))) names.add(name);
    }
    for (const name of [...names].sort()) {
      signal.throwIfAborted();
      const volDir = path.join(volumeDevicesDir(this.#o.rootDir), name);
      const data = await loadVolData(path.join(volDir, 'data')).catch((err: unknown) => {
        throw opError(
          'UnmapVolume.UnmapPodDevice',
          name,
          prefixed(`failed to read ${volDir}: ${detail(err)}`),
        );
      });
      const link = path.join(dir, name);
      if (data === undefined) {
        // Set-up never got as far as the driver: nothing to ask it.
        await rm(link, { force: true });
        continue;
      }
      const volumeKey = `${data.driverName}^${data.volumeHandle}`;
      const mapFile = path.join(volDir, 'dev', uid);
      const publish = path.join(volumeDevicesDir(this.#o.rootDir), 'publish', name, uid);
      await this.#s.queue.run(volumeKey, async () => {
        try {
          await this.#o.loops.detach(mapFile, signal);
          await rm(link, { force: true });
          if (await this.#o.mounter.isMountPoint(mapFile).catch(() => false)) {
            await this.#o.mounter.unmount(mapFile, signal);
          }
          await rm(mapFile, { force: true });
        } catch (err) {
          if (signal.aborted) throw err;
          throw opError('UnmapVolume.UnmapBlockVolume', name, err);
        }
        const client = this.#s.client(data.driverName, 'blockMapper.UnmapPodDevice');
        try {
          await client.nodeUnpublishVolume(data.volumeHandle, publish, signal);
        } catch (err) {
          if (signal.aborted) throw err;
          throw opError(
            'UnmapVolume.UnmapPodDevice',
            name,
            prefixed(`blockMapper.unpublishVolumeForBlock failed: ${detail(err)}`),
          );
        }
        await this.#s.removeMountDir(publish);
      });
      this.#s.published.delete(`block:${uid}/${data.specVolID ?? name}`);
      const unique = uniqueVolumeName(data.driverName, data.volumeHandle);
      this.#s.inUse.get(unique)?.delete(uid);
      this.#log.info('Block volume unmapped', {
        podUID: uid,
        volume: name,
        driver: data.driverName,
      });
      await this.#unstageIfUnused(name, false, signal);
      if (this.#s.inUse.get(unique)?.size === 0) this.#s.inUse.delete(unique);
    }
  }

  /**
   * NodeUnstageVolume and the volume's directories, once no pod maps it (TearDownDevice).
   * `orphanOnly`: leave it when this process staged it (a set-up may be under way).
   * Checked inside the volume's queue, so a concurrent set-up is never unstaged.
   */
  async #unstageIfUnused(name: string, orphanOnly: boolean, signal: AbortSignal): Promise<boolean> {
    const base = volumeDevicesDir(this.#o.rootDir);
    const volDir = path.join(base, name);
    const publishDir = path.join(base, 'publish', name);
    const busy = async (d: string): Promise<boolean> =>
      (await readdir(d).catch(() => [] as string[])).length > 0;
    const data = await loadVolData(path.join(volDir, 'data')).catch(() => undefined);
    if (data === undefined) return false;
    const volumeKey = `${data.driverName}^${data.volumeHandle}`;
    const staging = path.join(base, 'staging', name);
    return this.#s.queue.run(volumeKey, async () => {
      if ((await busy(path.join(volDir, 'dev'))) || (await busy(publishDir))) return false;
      if (orphanOnly && this.#s.staged.has(volumeKey)) return false;
      const client = this.#s.client(data.driverName, 'blockMapper.TearDownDevice');
      if (await exists(staging)) {
        const caps = await client.nodeGetCapabilities(signal);
        if (caps.stageUnstageVolume) {
          try {
            await client.nodeUnstageVolume(data.volumeHandle, staging, signal);
          } catch (err) {
            if (signal.aborted) throw err;
            throw opError(
              'UnmapDevice',
              name,
              prefixed(`blockMapper.unstageVolumeForBlock failed: ${detail(err)}`),
            );
          }
        }
        await this.#s.removeMountDir(staging);
      }
      this.#s.staged.delete(volumeKey);
      await rmdir(publishDir).catch(() => undefined);
      await rm(path.join(volDir, 'data', 'vol_data.json'), { force: true });
      await rmdir(path.join(volDir, 'data')).catch(() => undefined);
      await rmdir(path.join(volDir, 'dev')).catch(() => undefined);
      await rmdir(volDir).catch(() => undefined);
      this.#log.info('Block volume unstaged', {
        driver: data.driverName,
        volumeHandle: data.volumeHandle,
      });
      return true;
    });
  }

  /**
   * Unstages block volumes no pod maps any more and this process did not stage (a crash
   * between stage and publish, pods deleted while berth was down); returns their staging
   * paths.
   */
  async cleanupStaged(signal: AbortSignal): Promise<string[]> {
    const base = volumeDevicesDir(this.#o.rootDir);
    const cleaned: string[] = [];
    for (const name of await readdir(base).catch(() => [] as string[])) {
      if (name === 'staging' || name === 'publish') continue;
      signal.throwIfAborted();
      const data = await loadVolData(path.join(base, name, 'data')).catch(() => undefined);
      if (data === undefined) continue;
      try {
        if (await this.#unstageIfUnused(name, true, signal))
          cleaned.push(path.join(base, 'staging', name));
      } catch (err) {
        if (signal.aborted) throw err;
        this.#log.warn('Cannot unstage orphaned CSI block volume', {
          driver: data.driverName,
          volumeHandle: data.volumeHandle,
          err: detail(err),
        });
      }
    }
    return cleaned;
  }
}
