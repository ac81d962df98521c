/**
 * The user namespace manager on disk (upstream's UsernsManager): ranges from
 * ranges.ts, each pod's written to `<pod dir>/userns` (temporary file, fsync, rename,
 * fsync of the directory, as upstream's file store and its durability fsync) before the
 * pod gets it, and read back on the first use after a start.
 *
 * Loading is lazy: a node without `hostUsers: false` pods never reads the pod
 * directories for it. Where upstream refuses to start (the kubelet's IDs do not fit,
 * a pod's file is corrupt), berth keeps running: a bad configuration fails each
 * `hostUsers: false` pod with upstream's message, and a corrupt file is logged at load
 * and fails only its pod, whose range stays unknown (and so is never handed out again
 * while that file exists, since the pod's next sync re-reads it).
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { cri } from '../cri/index.ts';
import type { Logger } from '../util/logger.ts';
import { IdRanges } from './ranges.ts';
import {
  DEFAULT_IDS_PER_POD,
  MAPPINGS_FILE,
  UsernsError,
  nodeUserNamespace,
  podUserNamespace,
  unsupportedHandlerMessage,
  type UserNamespaceManager,
  type UsernsHost,
} from './types.ts';

export interface UsernsManagerOptions {
  readonly host: UsernsHost;
  /** userNamespaces.idsPerPod; null or absent: upstream's 65536. */
  readonly idsPerPod?: number | null;
  readonly logger: Logger;
  /** In [0, 1): where the search for a free range starts (tests pin it). */
  readonly random?: () => number;
}

/** One ID mapping as upstream's file spells it. */
interface FileMapping {
  readonly hostId: number;
  readonly containerId: number;
  readonly length: number;
}

/** The file's JSON: upstream's userNamespace struct, field for field. */
interface MappingsFile {
  readonly uidMappings: readonly FileMapping[];
  readonly gidMappings: readonly FileMapping[];
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function isMapping(v: unknown): v is FileMapping {
  if (typeof v !== 'object' || v === null) return false;
  const m = v as Record<string, unknown>;
  return ['hostId', 'containerId', 'length'].every(
    (k) => Number.isInteger(m[k]) && (m[k] as number) >= 0 && (m[k] as number) < 2 ** 32,
  );
}

/** Upstream's parseUserNsFileAndRecord checks, before the range is recorded. */
export function parseMappingsFile(content: string): { hostId: number; length: number } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch (err) {
    throw new UsernsError(`invalid user namespace mappings file: ${describe(err)}`, {
      cause: err,
    });
  }
  const f = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Partial<
    Record<keyof MappingsFile, unknown>
  >;
  const uids = Array.isArray(f.uidMappings) ? (f.uidMappings as unknown[]) : [];
  const gids = Array.isArray(f.gidMappings) ? (f.gidMappings as unknown[]) : [];
  if (!uids.every(isMapping) || !gids.every(isMapping))
    throw new UsernsError(
      'invalid user namespace mappings file: a mapping needs hostId, containerId and length (unsigned 32-bit integers)',
    );
  const [uid] = uids;
  const [gid] = gids;
  if (uid === undefined || uids.length !== 1)
    throw new UsernsError(
      'invalid user namespace configuration: no more than one mapping allowed.',
    );
  if (gid === undefined || gids.length !== uids.length)
    throw new UsernsError(
      'invalid user namespace configuration: GID and UID mappings should be identical.',
    );
  if (uid.hostId !== gid.hostId || uid.containerId !== gid.containerId || uid.length !== gid.length)
    throw new UsernsError(
      'invalid user namespace configuration: GID and UID mapping should be identical',
    );
  // Berth never writes a file without root mapped, and runtimes assume it is.
  if (uid.containerId !== 0)
    throw new UsernsError('invalid user namespace configuration: UID 0 must be mapped');
  return { hostId: uid.hostId, length: uid.length };
}

/** The file berth (and upstream) writes for a range: compact JSON in upstream's field order. */
export function mappingsFileContent(firstId: number, length: number): string {
  const m = { hostId: firstId, containerId: 0, length };
  const file: MappingsFile = { uidMappings: [m], gidMappings: [m] };
  return JSON.stringify(file);
}

export class UsernsManager implements UserNamespaceManager {
  readonly #o: UsernsManagerOptions;
  readonly #idsPerPod: number;
  #ranges: Promise<IdRanges> | undefined;
  /** Every operation on the ranges and files runs alone, as under upstream's lock. */
  #queue: Promise<unknown> = Promise.resolve();
  /** The ranges once loaded, for the synchronous `allocated`. */
  #loaded: IdRanges | undefined;

  constructor(options: UsernsManagerOptions) {
    this.#o = options;
    this.#idsPerPod = options.idsPerPod ?? DEFAULT_IDS_PER_POD;
  }

  #serialize<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => undefined);
    return run;
  }

  #file(uid: string): string {
    return join(this.#o.host.podDir(uid), MAPPINGS_FILE);
  }

  async #read(uid: string): Promise<string> {
    try {
      return await readFile(this.#file(uid), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return '';
      throw err;
    }
  }

  async #write(uid: string, content: string): Promise<void> {
    const dir = this.#o.host.podDir(uid);
    await mkdir(dir, { recursive: true, mode: 0o750 });
    const tmp = join(dir, `.${MAPPINGS_FILE}.${randomBytes(4).toString('hex')}.tmp`);
    try {
      const f = await open(tmp, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600);
      try {
        await f.writeFile(content);
        await f.sync();
      } finally {
        await f.close();
      }
      await rename(tmp, this.#file(uid));
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
    // The rename is atomic; the directory's fsync makes it durable across a crash.
    const d = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
    try {
      await d.sync();
    } finally {
      await d.close();
    }
  }

  /** The ranges, with every pod's file on disk recorded (upstream's MakeUserNsManager). */
  #load(): Promise<IdRanges> {
    if (this.#ranges !== undefined) return this.#ranges;
    this.#ranges = (async () => {
      const { host, logger } = this.#o;
      let mappings;
      try {
        mappings = await host.kubeletMappings(this.#idsPerPod);
      } catch (err) {
        throw new UsernsError(`kubelet mappings: ${describe(err)}`, { cause: err });
      }
      const ranges = IdRanges.create(mappings, this.#idsPerPod, host.maxPods, this.#o.random);
      for (const uid of await host.listPodsFromDisk()) {
        try {
          const content = await this.#read(uid);
          if (content === '') continue;
          const { hostId, length } = parseMappingsFile(content);
          ranges.record(uid, hostId, length);
        } catch (err) {
          logger.error('Cannot record the user namespace of an existing pod', {
            podUID: uid,
            error: `record pod mappings for existing pod "${uid}": ${describe(err)}`,
          });
        }
      }
      this.#loaded = ranges;
      return ranges;
    })();
    // Logged once; each hostUsers: false pod reports it too.
    this.#ranges.catch((err: unknown) => {
      this.#o.logger.error('User namespaces are unavailable', { error: describe(err) });
    });
    return this.#ranges;
  }

  async getOrCreateUserNamespaceMappings(
    pod: Pod,
    runtimeHandler: string,
    signal: AbortSignal,
  ): Promise<cri.UserNamespace> {
    if (pod.spec?.hostUsers !== false) return nodeUserNamespace();
    const message = unsupportedHandlerMessage(runtimeHandler);
    let supported: boolean;
    try {
      supported = await this.#o.host.handlerSupportsUserNamespaces(runtimeHandler, signal);
    } catch (err) {
      if (signal.aborted) throw err;
      throw new UsernsError(`${message}: ${describe(err)}`, { cause: err });
    }
    if (!supported) throw new UsernsError(message);
    const uid = pod.metadata?.uid ?? '';
    return this.#serialize(async () => {
      const ranges = await this.#load();
      const content = await this.#read(uid);
      if (content !== '') {
        try {
          const { hostId, length } = parseMappingsFile(content);
          ranges.record(uid, hostId, length);
          return podUserNamespace(hostId, length);
        } catch (err) {
          throw new UsernsError(`user namespace: ${describe(err)}`, { cause: err });
        }
      }
      let firstId: number;
      try {
        firstId = ranges.allocateOne(uid);
      } catch (err) {
        throw new UsernsError(`create user namespace: ${describe(err)}`, { cause: err });
      }
      try {
        await this.#write(uid, mappingsFileContent(firstId, ranges.idsPerPod));
      } catch (err) {
        ranges.release(uid);
        throw new UsernsError(`create user namespace: ${describe(err)}`, { cause: err });
      }
      this.#o.logger.debug('New pod user namespace allocation', { podUID: uid, firstId });
      return podUserNamespace(firstId, ranges.idsPerPod);
    });
  }

  release(podUid: string): Promise<void> {
    return this.#serialize(() => this.#release(podUid));
  }

  async #release(podUid: string): Promise<void> {
    // Nothing was ever loaded: no pod of this run asked for a range, so there is none to free.
    if (this.#ranges === undefined) return;
    const ranges = await this.#ranges.catch(() => undefined);
    if (ranges?.release(podUid) !== true) return;
    this.#o.logger.debug('Releasing pod user namespace allocation', { podUID: podUid });
    await rm(this.#file(podUid), { force: true });
  }

  cleanupOrphanedPodUsernsAllocations(
    active: ReadonlySet<string>,
    signal: AbortSignal,
  ): Promise<void> {
    return this.#serialize(async () => {
      // Nothing loaded, nothing held: no need to list the pod directories every pass.
      const ranges = this.#loaded;
      if (signal.aborted || ranges === undefined) return;
      const onDisk = await this.#o.host.listPodsFromDisk();
      // Pods on disk that nothing knows: their range is freed and their file removed.
      for (const uid of onDisk) if (!active.has(uid)) await this.#release(uid);
      // Ranges of pods whose directory is gone (removed by the volume clean-up).
      const found = new Set(onDisk);
      for (const uid of ranges.uids()) if (!found.has(uid)) ranges.release(uid);
    });
  }

  allocated(podUid: string): number | undefined {
    return this.#loaded?.firstIdOf(podUid);
  }
}
