/**
 * Loop devices over block volumes' device files, as upstream's volumepathhandler
 * (AttachFileDevice / DetachFileDevice): a loop device backed by the pod's bind mount of
 * the published device keeps that device open while the pod uses it, so the device
 * cannot be removed and its name reused for another volume under a running container.
 * A loop device is found by its backing file in sysfs (/sys/block/loop* /loop/backing_file),
 * so one left by a crash is found again and never attached twice.
 */
import { execFile } from 'node:child_process';
import { readdir, readFile, realpath } from 'node:fs/promises';
import * as path from 'node:path';
import { VolumeError } from '../types.ts';

export interface LoopDevices {
  /** The loop device backed by `file` (/dev/loopN), making one when there is none. */
  attach(file: string, signal: AbortSignal): Promise<string>;
  /** Detaches the loop device backed by `file`; nothing when there is none. */
  detach(file: string, signal: AbortSignal): Promise<void>;
  /** The loop device backed by `file`, undefined when there is none. */
  find(file: string): Promise<string | undefined>;
}

export interface SystemLoopDevicesOptions {
  /** losetup(8) (default: found on PATH). */
  readonly losetup?: string;
  /** Default /sys/block. */
  readonly sysBlock?: string;
}

/** Upstream's cleanBackingFilePath: sysfs appends " (deleted)" when the file is gone. */
function cleanBackingFile(text: string): string {
  return text.trim().replace(/ \(deleted\)$/, '');
}

/** Loop devices through losetup(8) and sysfs. */
export class SystemLoopDevices implements LoopDevices {
  readonly #losetup: string;
  readonly #sysBlock: string;

  constructor(options: SystemLoopDevicesOptions = {}) {
    this.#losetup = options.losetup ?? 'losetup';
    this.#sysBlock = options.sysBlock ?? '/sys/block';
  }

  async find(file: string): Promise<string | undefined> {
    const real = await realpath(file).catch(() => file);
    const names = await readdir(this.#sysBlock).catch(() => [] as string[]);
    for (const name of names.filter((n) => n.startsWith('loop')).sort()) {
      const backing = await readFile(
        path.join(this.#sysBlock, name, 'loop', 'backing_file'),
        'utf8',
      ).catch(() => undefined);
      if (backing === undefined) continue;
      const cleaned = cleanBackingFile(backing);
      if (cleaned === file || cleaned === real) return `/dev/${name}`;
    }
    return undefined;
  }

  async attach(file: string, signal: AbortSignal): Promise<string> {
    const existing = await this.find(file);
    if (existing !== undefined) return existing;
    await this.#run(['-f', file], file, signal);
    const made = await this.find(file);
    if (made === undefined) {
      throw new VolumeError(
        'BERTH_VOLUME_MOUNT_FAILED',
        `Cannot find the loop device of ${file}: losetup succeeded but sysfs lists none`,
      );
    }
    return made;
  }

  async detach(file: string, signal: AbortSignal): Promise<void> {
    const device = await this.find(file);
    if (device === undefined) return;
    await this.#run(['-d', device], file, signal);
  }

  #run(args: string[], file: string, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    return new Promise((resolve, reject) => {
      execFile(
        this.#losetup,
        args,
        { signal, env: { ...process.env, LC_ALL: 'C' } },
        (err, _stdout, stderr) => {
          if (err === null) {
            resolve();
            return;
          }
          if (err.name === 'AbortError') {
            reject(signal.reason as Error);
            return;
          }
          reject(
            new VolumeError(
              'BERTH_VOLUME_MOUNT_FAILED',
              `Cannot run losetup ${args.join(' ')} for ${file}: ${stderr.trim() === '' ? err.message : stderr.trim()}`,
              { cause: err },
            ),
          );
        },
      );
    });
  }
}

/** Loop devices in a map, for unit tests. */
export class FakeLoopDevices implements LoopDevices {
  /** Backing file -> device. */
  readonly devices = new Map<string, string>();
  #next = 0;

  find(file: string): Promise<string | undefined> {
    return Promise.resolve(this.devices.get(file));
  }

  attach(file: string): Promise<string> {
    let device = this.devices.get(file);
    if (device === undefined) {
      device = `/dev/loop${this.#next++}`;
      this.devices.set(file, device);
    }
    return Promise.resolve(device);
  }

  detach(file: string): Promise<void> {
    this.devices.delete(file);
    return Promise.resolve();
  }
}
