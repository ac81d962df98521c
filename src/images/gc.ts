/**
 * Image garbage collection (upstream's realImageGCManager). Every 5 minutes: images
 * unused for longer than imageMaximumGCAge go first (when set); then, when the image
 * filesystem is at or above imageGCHighThresholdPercent, unused images are removed,
 * least recently used first, until usage is back at imageGCLowThresholdPercent. The
 * eviction manager also calls deleteUnusedImages under disk pressure.
 *
 * Never removed: an image any container uses (running or not, so a stopped container
 * can still be restarted), a pinned image (the runtime pins the sandbox image), an image
 * first seen less than imageMinimumGCAge ago. "Used" and "first seen" are what this
 * process observed: after a restart every image starts young, as upstream's records do.
 */
import type { ImageService, RuntimeService } from '../cri/index.ts';
import type { EventRecorder } from '../events/types.ts';
import type { Clock } from '../util/clock.ts';
import { isAborted } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';

/** Upstream's ImageGCPeriod. */
export const IMAGE_GC_PERIOD_MS = 5 * 60_000;

export interface ImageGcPolicy {
  readonly highThresholdPercent: number;
  readonly lowThresholdPercent: number;
  readonly minAgeMs: number;
  /** 0: images are never removed for age alone. */
  readonly maxAgeMs: number;
}

export interface ImageFsUsage {
  readonly capacityBytes: number;
  readonly availableBytes: number;
}

export interface ImageGcOptions {
  readonly images: Pick<ImageService, 'listImages' | 'removeImage'>;
  /** containerStatus: the image volumes a container mounts keep their images in use. */
  readonly runtime: Pick<RuntimeService, 'listContainers' | 'containerStatus'>;
  /** The image filesystem's capacity and what is available on it. */
  readonly imageFs: (signal: AbortSignal) => Promise<ImageFsUsage>;
  readonly policy: ImageGcPolicy;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly recorder: EventRecorder;
  readonly nodeName: string;
  /** kubelet_image_garbage_collected_total{reason}. */
  readonly collected?: (reason: 'age' | 'space') => void;
  readonly periodMs?: number;
}

interface ImageRecord {
  firstDetected: number;
  /** 0: never seen in use. */
  lastUsed: number;
  size: number;
  pinned: boolean;
}

interface Candidate extends ImageRecord {
  readonly id: string;
}

/** Upstream's formatSize: bytes below 1 KiB, else one decimal in KiB up to TiB. */
function formatSize(bytes: number): string {
  if (bytes < 1024) return `${Math.trunc(bytes)} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'] as const;
  let v = bytes / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i] ?? 'TiB'}`;
}

export class ImageGcManager {
  readonly #o: ImageGcOptions;
  readonly #records = new Map<string, ImageRecord>();

  constructor(options: ImageGcOptions) {
    this.#o = options;
  }

  /** The periodic collection; returns when `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const began = this.#o.clock.now();
    while (!signal.aborted) {
      try {
        await this.garbageCollect(began, signal);
      } catch (err) {
        if (isAborted(signal)) return;
        this.#o.logger.error('Image garbage collection failed', { error: String(err) });
      }
      await this.#o.clock.sleep(this.#o.periodMs ?? IMAGE_GC_PERIOD_MS, signal).catch(() => {
        /* aborted: the loop ends */
      });
    }
  }

  /** Upstream's GarbageCollect; `beganMs` is when the collector started (for maximum age). */
  async garbageCollect(beganMs: number, signal: AbortSignal): Promise<void> {
    const o = this.#o;
    const now = o.clock.now();
    let candidates = await this.#inEvictionOrder(now, signal);
    candidates = await this.#freeOldImages(candidates, now, beganMs, signal);
    const fs = await o.imageFs(signal);
    const capacity = fs.capacityBytes;
    const available = Math.min(fs.availableBytes, capacity);
    const node = { kind: 'Node', name: o.nodeName, uid: o.nodeName } as const;
    if (capacity === 0) {
      o.recorder.event(
        node,
        'Warning',
        'InvalidDiskCapacity',
        'invalid capacity 0 on image filesystem',
      );
      throw new Error('invalid capacity 0 on image filesystem');
    }
    const usagePercent = 100 - Math.trunc((available * 100) / capacity);
    if (usagePercent < o.policy.highThresholdPercent) return;
    const toFree = Math.trunc((capacity * (100 - o.policy.lowThresholdPercent)) / 100) - available;
    o.logger.info(
      'Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold',
      {
        usage: usagePercent,
        highThreshold: o.policy.highThresholdPercent,
        amountToFree: toFree,
        lowThreshold: o.policy.lowThresholdPercent,
      },
    );
    const freed = await this.#freeSpace(toFree, now, candidates, signal);
    if (freed < toFree) {
      const message =
        `Insufficient free disk space on the node's image filesystem (${usagePercent}% of ${formatSize(capacity)} used). ` +
        `Failed to free sufficient space by deleting unused images (freed ${freed} bytes). ` +
        'Investigate disk usage, as it could be used by active images, logs, volumes, or other data.';
      o.recorder.event(node, 'Warning', 'FreeDiskSpaceFailed', message);
      throw new Error(message);
    }
  }

  /** Every unused image old enough goes (eviction's node-level reclaim). */
  async deleteUnusedImages(signal: AbortSignal): Promise<void> {
    this.#o.logger.info('Attempting to delete unused images');
    const now = this.#o.clock.now();
    const candidates = await this.#inEvictionOrder(now, signal);
    await this.#freeSpace(Number.POSITIVE_INFINITY, now, candidates, signal);
  }

  /** Refreshes the records from the runtime; returns the IDs of images in use. */
  async #detect(now: number, signal: AbortSignal): Promise<Set<string>> {
    const o = this.#o;
    const [images, containers] = await Promise.all([
      o.images.listImages({}, { signal }),
      o.runtime.listContainers({}, { signal }),
    ]);
    const inUse = new Set<string>();
    for (const c of containers.containers) {
      if (c.imageId !== '') inUse.add(c.imageId);
      if (c.imageRef !== '') inUse.add(c.imageRef);
      if (c.image?.image !== undefined && c.image.image !== '') inUse.add(c.image.image);
    }
    for (const image of await this.#imageVolumesInUse(containers.containers, signal))
      inUse.add(image);
    const current = new Set<string>();
    for (const image of images.images) {
      current.add(image.id);
      let record = this.#records.get(image.id);
      if (record === undefined) {
        record = { firstDetected: now, lastUsed: 0, size: 0, pinned: false };
        this.#records.set(image.id, record);
      }
      // A container may name its image by ID, by tag or by digest.
      const used = [image.id, ...image.repoTags, ...image.repoDigests].some((n) => inUse.has(n));
      if (used) {
        inUse.add(image.id);
        record.lastUsed = now;
      }
      record.size = Number(image.size);
      record.pinned = image.pinned;
    }
    for (const id of [...this.#records.keys()]) if (!current.has(id)) this.#records.delete(id);
    return inUse;
  }

  /**
   * The images containers mount as image volumes (upstream's handleImageVolumes): only
   * ContainerStatus shows a container's mounts. A container gone meanwhile mounts nothing.
   */
  async #imageVolumesInUse(
    containers: readonly { readonly id: string }[],
    signal: AbortSignal,
  ): Promise<string[]> {
    const out: string[] = [];
    for (const c of containers) {
      signal.throwIfAborted();
      const status = await this.#o.runtime
        .containerStatus({ containerId: c.id, verbose: false }, { signal })
        .catch((err: unknown) => {
          if (signal.aborted) throw err;
          this.#o.logger.debug('Cannot read container mounts for image GC', {
            containerId: c.id,
            err: String(err),
          });
          return undefined;
        });
      for (const m of status?.status?.mounts ?? []) {
        if (m.image !== undefined && m.image.image !== '') out.push(m.image.image);
      }
    }
    return out;
  }

  /** Unused, unpinned images, least recently used first (then first detected). */
  async #inEvictionOrder(now: number, signal: AbortSignal): Promise<Candidate[]> {
    const inUse = await this.#detect(now, signal);
    const out: Candidate[] = [];
    for (const [id, r] of this.#records) {
      if (inUse.has(id) || r.pinned) continue;
      out.push({ id, ...r });
    }
    return out.sort((a, b) =>
      a.lastUsed === b.lastUsed ? a.firstDetected - b.firstDetected : a.lastUsed - b.lastUsed,
    );
  }

  async #freeOldImages(
    candidates: Candidate[],
    now: number,
    beganMs: number,
    signal: AbortSignal,
  ): Promise<Candidate[]> {
    const maxAge = this.#o.policy.maxAgeMs;
    if (maxAge === 0 || now - beganMs <= maxAge) return candidates;
    const remaining: Candidate[] = [];
    const errors: string[] = [];
    for (const image of candidates) {
      if (now - image.lastUsed > maxAge) {
        try {
          await this.#free(image, 'age', signal);
          continue;
        } catch (err) {
          if (signal.aborted) throw err;
          errors.push(String(err));
        }
      }
      remaining.push(image);
    }
    if (errors.length > 0)
      throw new Error(
        `wanted to free images older than ${maxAge / 1000}s, encountered errors in image deletion: ${errors.join('; ')}`,
      );
    return remaining;
  }

  /** Removes candidates in order until `bytes` are freed; returns what was freed. */
  async #freeSpace(
    bytes: number,
    now: number,
    candidates: readonly Candidate[],
    signal: AbortSignal,
  ): Promise<number> {
    let freed = 0;
    const errors: string[] = [];
    for (const image of candidates) {
      if (image.lastUsed >= now) continue;
      if (now - image.firstDetected < this.#o.policy.minAgeMs) continue;
      try {
        await this.#free(image, 'space', signal);
      } catch (err) {
        if (signal.aborted) throw err;
        errors.push(String(err));
        continue;
      }
      freed += image.size;
      if (freed >= bytes) break;
    }
    if (errors.length > 0)
      throw new Error(
        `wanted to free ${bytes} bytes, but freed ${freed} bytes space with errors in image deletion: ${errors.join('; ')}`,
      );
    return freed;
  }

  async #free(image: Candidate, reason: 'age' | 'space', signal: AbortSignal): Promise<void> {
    this.#o.logger.info('Removing image to free bytes', { imageID: image.id, size: image.size });
    await this.#o.images.removeImage({ image: { image: image.id } }, { signal });
    this.#records.delete(image.id);
    this.#o.collected?.(reason);
  }
}
