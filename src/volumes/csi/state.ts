/**
 * State the CSI plugin's set-up and tear-down sides share: what this process staged and
 * published (so a synced pod's volumes are not republished every sync), which pods use
 * which persistent volume (node.status.volumesInUse), and a queue that serializes the
 * calls for one volume. Plus the error and path helpers both sides use.
 */
import { lstat, rm, rmdir } from 'node:fs/promises';
import * as path from 'node:path';
import { CsiError } from '../../csi/types.ts';
import type { CsiDriverRegistry, CsiNodeClient } from '../../csi/types.ts';
import type { Mounter } from '../mounter.ts';
import { VolumeError } from '../types.ts';

export function prefixed(message: string): string {
  return `kubernetes.io/csi: ${message}`;
}

export function detail(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** `<op> failed for volume "<name>" : <why>`: upstream's volume event shape. */
export function opError(op: string, specName: string, err: unknown): VolumeError {
  return new VolumeError(
    'BERTH_VOLUME_CSI',
    `${op} failed for volume ${JSON.stringify(specName)} : ${detail(err)}`,
    { cause: err },
  );
}

/** gRPC codes after which the driver may still be working on the call (upstream's list). */
const UNCERTAIN_GRPC: ReadonlySet<number> = new Set([1, 4, 8, 10, 14]);

/**
 * Upstream's IsOperationFinishedError: false when the driver may still finish the call
 * (deadline, unavailable, cancelled, resource exhausted, aborted), so the target must be
 * kept for a later unpublish/unstage; true when it answered a final error.
 */
export function isFinalError(err: unknown): boolean {
  if (!(err instanceof CsiError)) return false;
  if (err.code === 'BERTH_CSI_UNAVAILABLE' || err.code === 'BERTH_CSI_DEADLINE') return false;
  return err.grpcCode === undefined || !UNCERTAIN_GRPC.has(err.grpcCode);
}

/** Runs `fn` after every earlier call with the same key has settled. */
export class KeyedQueue {
  readonly #tails = new Map<string, Promise<unknown>>();

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    const next = previous.then(fn, fn);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(key, settled);
    try {
      return await next;
    } finally {
      if (this.#tails.get(key) === settled) this.#tails.delete(key);
    }
  }
}

export class CsiVolumeState {
  readonly queue = new KeyedQueue();
  /** Volumes this process staged (driver^handle). */
  readonly staged = new Set<string>();
  /** Pod volumes this process published (<uid>/<spec name>). */
  readonly published = new Set<string>();
  /** Of those, the ones whose CSIDriver asks for requiresRepublish. */
  readonly republish = new Set<string>();
  /** Persistent volumes in use (unique name) -> the pods using them. */
  readonly inUse = new Map<string, Set<string>>();
  readonly #registry: CsiDriverRegistry;
  readonly #mounter: Mounter;

  constructor(registry: CsiDriverRegistry, mounter: Mounter) {
    this.#registry = registry;
    this.#mounter = mounter;
  }

  /** The registered driver's client, or upstream's "not found" error for `op`. */
  client(driver: string, op: string): CsiNodeClient {
    const client = this.#registry.client(driver);
    if (client === undefined) {
      throw new VolumeError(
        'BERTH_VOLUME_CSI',
        prefixed(
          `${op} failed to get CSI client: driver name ${driver} not found in the list of registered CSI drivers`,
        ),
      );
    }
    return client;
  }

  /** Removes a target dir the driver left behind, only when nothing is mounted on it. */
  async removeMountDir(dir: string): Promise<void> {
    if (await this.#mounter.isMountPoint(dir).catch(() => false)) return;
    let st;
    try {
      st = await lstat(dir);
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ENOENT') return;
      throw err;
    }
    if (st.isSymbolicLink() || st.isFile()) await rm(dir, { force: true });
    else await rmdir(dir).catch(() => undefined);
  }

  /**
   * After a final error (upstream's removeMountDir): the target, the vol_data.json
   * beside it and their directory, so no tear-down asks the driver about a volume it
   * never took. Nothing is removed while the target is a mount point.
   */
  async forgetTarget(target: string): Promise<void> {
    if (await this.#mounter.isMountPoint(target).catch(() => true)) return;
    await this.removeMountDir(target);
    const parent = path.dirname(target);
    await rm(path.join(parent, 'vol_data.json'), { force: true });
    await rmdir(parent).catch(() => undefined);
  }
}
