/**
 * The tear-down side of the CSI volume plugin: NodeUnpublishVolume for each CSI volume
 * of a pod, then NodeUnstageVolume for those no other pod on the node still uses. What
 * to tear down comes from the vol_data.json files the set-up side wrote, never from a
 * pod spec, so pods deleted while berth was down and volumes left by a crash between
 * stage and publish are cleaned too. A missing or failing driver stops the tear-down
 * (the caller retries): nothing is force-unmounted behind the driver's back.
 */
import { readdir, rm, rmdir } from 'node:fs/promises';
import * as path from 'node:path';
import type { Logger } from '../../util/logger.ts';
import { VolumeError } from '../types.ts';
import { csiPluginDir, GLOBAL_MOUNT, podCsiDir, stagingPath, uniqueVolumeName } from './paths.ts';
import { detail, opError, prefixed, type CsiVolumeState } from './state.ts';
import { loadVolData } from './vol-data.ts';

export interface CsiTearDownOptions {
  readonly rootDir: string;
  readonly logger: Logger;
}

export class CsiTearDown {
  readonly #o: CsiTearDownOptions;
  readonly #s: CsiVolumeState;

  constructor(options: CsiTearDownOptions, state: CsiVolumeState) {
    this.#o = options;
    this.#s = state;
  }

  async tearDownPod(uid: string, podDir: string, signal: AbortSignal): Promise<void> {
    const dir = podCsiDir(podDir);
    let names: string[];
    try {
      names = await readdir(dir);
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ENOENT') return;
      throw err;
    }
    const touched: { driver: string; handle: string }[] = [];
    for (const name of names.sort()) {
      signal.throwIfAborted();
      const volDir = path.join(dir, name);
      const target = path.join(volDir, 'mount');
      const data = await loadVolData(volDir).catch((err: unknown) => {
        throw new VolumeError(
          'BERTH_VOLUME_CSI',
          prefixed(`Unmounter.TearDownAt failed to read ${volDir}: ${detail(err)}`),
        );
      });
      if (data === undefined) continue;
      const volumeKey = `${data.driverName}^${data.volumeHandle}`;
      await this.#s.queue.run(volumeKey, async () => {
        const client = this.#s.client(data.driverName, 'Unmounter.TearDownAt');
        try {
          await client.nodeUnpublishVolume(data.volumeHandle, target, signal);
        } catch (err) {
          if (signal.aborted) throw err;
          throw opError(
            'UnmountVolume.TearDown',
            name,
            prefixed(`Unmounter.TearDownAt failed: ${detail(err)}`),
          );
        }
        await this.#s.removeMountDir(target);
        await rm(path.join(volDir, 'vol_data.json'), { force: true });
        await rmdir(volDir).catch(() => undefined);
      });
      this.#s.published.delete(`${uid}/${data.specVolID ?? name}`);
      this.#s.republish.delete(`${uid}/${data.specVolID ?? name}`);
      if (data.volumeLifecycleMode !== 'Ephemeral') {
        touched.push({ driver: data.driverName, handle: data.volumeHandle });
      }
      this.#o.logger.info('Volume unpublished', {
        podUID: uid,
        volume: name,
        driver: data.driverName,
      });
    }
    for (const { driver, handle } of touched) {
      const name = uniqueVolumeName(driver, handle);
      const pods = this.#s.inUse.get(name);
      pods?.delete(uid);
      if (await this.#usedByAnyPod(driver, handle, podDir)) continue;
      await this.#unstage(driver, handle, signal);
      if (pods !== undefined && pods.size === 0) this.#s.inUse.delete(name);
    }
  }

  /** True when some pod directory other than `except` still has the volume published. */
  async #usedByAnyPod(driver: string, handle: string, except: string): Promise<boolean> {
    const podsDir = path.dirname(except);
    for (const uid of await readdir(podsDir).catch(() => [] as string[])) {
      const other = path.join(podsDir, uid);
      if (other === except) continue;
      const csiDir = podCsiDir(other);
      for (const name of await readdir(csiDir).catch(() => [] as string[])) {
        const data = await loadVolData(path.join(csiDir, name)).catch(() => undefined);
        if (data?.driverName === driver && data.volumeHandle === handle) return true;
      }
    }
    return false;
  }

  async #unstage(driver: string, handle: string, signal: AbortSignal): Promise<void> {
    const staging = stagingPath(this.#o.rootDir, driver, handle);
    const volumeKey = `${driver}^${handle}`;
    await this.#s.queue.run(volumeKey, async () => {
      const data = await loadVolData(path.dirname(staging)).catch(() => undefined);
      if (data === undefined) return;
      const client = this.#s.client(driver, 'attacher.UnmountDevice');
      const caps = await client.nodeGetCapabilities(signal);
      if (caps.stageUnstageVolume) {
        try {
          await client.nodeUnstageVolume(handle, staging, signal);
        } catch (err) {
          if (signal.aborted) throw err;
          throw opError(
            'UnmountDevice',
            handle,
            prefixed(`attacher.UnmountDevice failed: ${detail(err)}`),
          );
        }
      }
      this.#s.staged.delete(volumeKey);
      await this.#s.removeMountDir(staging);
      await rm(path.join(path.dirname(staging), 'vol_data.json'), { force: true });
      await rmdir(path.dirname(staging)).catch(() => undefined);
      this.#o.logger.info('Volume unstaged', { driver, volumeHandle: handle });
    });
  }

  /**
   * Unstages volumes staged on this node that no pod uses any more and this process
   * did not stage (left by a crash between stage and publish, or by pods deleted while
   * berth was down). Returns the staging paths cleaned.
   */
  async cleanupStaged(podsDir: string, signal: AbortSignal): Promise<string[]> {
    const cleaned: string[] = [];
    const base = csiPluginDir(this.#o.rootDir);
    for (const driver of await readdir(base).catch(() => [] as string[])) {
      for (const hash of await readdir(path.join(base, driver)).catch(() => [] as string[])) {
        signal.throwIfAborted();
        const dir = path.join(base, driver, hash);
        const data = await loadVolData(dir).catch(() => undefined);
        if (
          data === undefined ||
          path.join(dir, GLOBAL_MOUNT) !==
            stagingPath(this.#o.rootDir, data.driverName, data.volumeHandle)
        ) {
          continue;
        }
        if (this.#s.staged.has(`${data.driverName}^${data.volumeHandle}`)) continue;
        if (await this.#usedByAnyPod(data.driverName, data.volumeHandle, path.join(podsDir, '\0')))
          continue;
        try {
          await this.#unstage(data.driverName, data.volumeHandle, signal);
          cleaned.push(path.join(dir, GLOBAL_MOUNT));
        } catch (err) {
          if (signal.aborted) throw err;
          this.#o.logger.warn('Cannot unstage orphaned CSI volume', {
            driver: data.driverName,
            volumeHandle: data.volumeHandle,
            err: detail(err),
          });
        }
      }
    }
    return cleaned;
  }
}
