/**
 * {@link ResourceState} implementations: in memory (the fake, and the cache of the
 * checkpointed one) and backed by upstream's checkpoint file in the root directory.
 * Writes are atomic (temporary file, fsync, rename) and serialized, and skipped when
 * the data did not change (upstream compares checksums the same way).
 */
import type { ResourceRequirements } from 'kubernetes-types/core/v1.js';
import { open, readFile, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { decodeCheckpoint, encodeCheckpoint } from './checkpoint.ts';
import { AllocationError, type PodResourceInfo, type ResourceState } from './types.ts';

function copyRequirements(r: ResourceRequirements): ResourceRequirements {
  return structuredClone(r);
}

function copyInfo(info: PodResourceInfo): PodResourceInfo {
  return {
    containerResources: Object.fromEntries(
      Object.entries(info.containerResources).map(([k, v]) => [k, copyRequirements(v)]),
    ),
    ...(info.podLevelResources !== undefined && {
      podLevelResources: copyRequirements(info.podLevelResources),
    }),
  };
}

/** State kept in memory only (upstream's state_mem.go). */
export class MemoryResourceState implements ResourceState {
  protected readonly entries: Map<string, PodResourceInfo>;

  constructor(initial: ReadonlyMap<string, PodResourceInfo> = new Map()) {
    this.entries = new Map([...initial].map(([k, v]) => [k, copyInfo(v)]));
  }

  get(uid: string): PodResourceInfo | undefined {
    const info = this.entries.get(uid);
    return info === undefined ? undefined : copyInfo(info);
  }

  uids(): string[] {
    return [...this.entries.keys()];
  }

  set(uid: string, info: PodResourceInfo): Promise<void> {
    this.entries.set(uid, copyInfo(info));
    return this.changed();
  }

  setContainer(uid: string, container: string, resources: ResourceRequirements): Promise<void> {
    const old = this.entries.get(uid);
    this.entries.set(uid, {
      ...old,
      containerResources: {
        ...old?.containerResources,
        [container]: copyRequirements(resources),
      },
    });
    return this.changed();
  }

  setPodLevel(uid: string, resources: ResourceRequirements | undefined): Promise<void> {
    const old = this.entries.get(uid);
    this.entries.set(uid, {
      containerResources: old?.containerResources ?? {},
      ...(resources !== undefined && { podLevelResources: copyRequirements(resources) }),
    });
    return this.changed();
  }

  remove(uid: string): void {
    this.entries.delete(uid);
  }

  removeOrphans(keep: ReadonlySet<string>): void {
    for (const uid of [...this.entries.keys()]) if (!keep.has(uid)) this.entries.delete(uid);
  }

  /** Called after every write; the checkpointed state stores the file here. */
  protected changed(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * State checkpointed in `<dir>/<file>` (upstream's state_checkpoint.go). Constructed
 * empty; {@link load} restores the file before any pod is handled.
 */
export class CheckpointResourceState extends MemoryResourceState {
  readonly path: string;
  #written: string | undefined;
  #queue: Promise<void> = Promise.resolve();

  constructor(dir: string, file: string) {
    super();
    this.path = join(dir, file);
  }

  /** Opens and loads in one step (tests, tools). */
  static async open(dir: string, file: string): Promise<CheckpointResourceState> {
    const state = new CheckpointResourceState(dir, file);
    await state.load();
    return state;
  }

  /**
   * Restores the state from the file (none yet: empty). A file that cannot be read is an
   * error with upstream's advice, since starting without it could re-admit a pod at a
   * size nobody admitted.
   */
  async load(): Promise<void> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw new AllocationError(`Cannot read the checkpoint ${this.path}`, { cause: err });
    }
    let restored: Map<string, PodResourceInfo>;
    try {
      restored = decodeCheckpoint(text);
    } catch (err) {
      throw new AllocationError(
        `could not restore state from checkpoint: ${(err as Error).message}, please drain this node and delete pod resource information checkpoint file "${this.path}" before restarting Kubelet`,
        { cause: err },
      );
    }
    this.entries.clear();
    for (const [uid, info] of restored) this.entries.set(uid, info);
    this.#written = text;
  }

  protected override changed(): Promise<void> {
    const body = encodeCheckpoint(this.entries);
    if (body === this.#written) return this.#queue;
    this.#written = body;
    // One write at a time, in order: the last one carries the newest state.
    const next = this.#queue.then(() => writeAtomic(this.path, body));
    this.#queue = next.catch(() => undefined);
    return next.catch((err: unknown) => {
      // The next change writes the whole state again.
      this.#written = undefined;
      throw new AllocationError(`Cannot write the checkpoint ${this.path}`, { cause: err });
    });
  }
}

async function writeAtomic(path: string, body: string): Promise<void> {
  const tmp = join(dirname(path), `.${basename(path)}.tmp-${process.pid}`);
  try {
    const f = await open(tmp, 'w', 0o644);
    try {
      await f.writeFile(body);
      await f.sync();
    } finally {
      await f.close();
    }
    await rename(tmp, path);
  } catch (err) {
    // A full disk must not also leave a half-written file per failed write (and per
    // berth process: the name carries the pid) next to the checkpoint.
    await rm(tmp, { force: true }).catch(() => undefined);
    throw err;
  }
}
