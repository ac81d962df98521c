/**
 * Container log rotation through CRI ReopenContainerLog, as upstream's
 * containerLogManager: each monitor interval, the log of every running container that
 * reached maxSize is renamed to `<log>.<stamp>` and the runtime is asked to reopen it,
 * so it writes a fresh file. Before that, leftovers of an interrupted rotation are
 * removed, the oldest rotated files beyond maxFiles - 2 are deleted (the live file and
 * the one being rotated make up the rest) and rotated files are gzipped; only the file
 * rotated this round stays plain, so a reader that has it open can finish it.
 */
import { createReadStream, createWriteStream, constants } from 'node:fs';
import { open, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { CriError, cri } from '../cri/index.ts';
import { parseQuantity } from '../util/quantity.ts';
import { BerthError, isAbortError, isAborted } from '../util/errors.ts';
import {
  COMPRESS_SUFFIX,
  TMP_SUFFIX,
  UnsafeLogPathError,
  checkLogPath,
  rotationTimestamp,
  splitRotated,
} from './files.ts';
import type { ContainerLogManager, ContainerLogManagerDeps, LogRotatePolicy } from './types.ts';

/** A rotation step failed for one container (the next interval tries again). */
export class LogRotationError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('BERTH_LOGS_ROTATION', message, options);
  }
}

/**
 * The policy from KubeletConfiguration values; throws on what upstream rejects
 * (maxFiles <= 1, a size that is not a whole number of bytes).
 */
export function logRotatePolicy(c: {
  readonly containerLogMaxSize: string;
  readonly containerLogMaxFiles: number;
  readonly containerLogMaxWorkers: number;
  readonly containerLogMonitorIntervalMs: number;
}): LogRotatePolicy {
  if (c.containerLogMaxFiles <= 1)
    throw new LogRotationError(
      `Cannot rotate logs with containerLogMaxFiles ${c.containerLogMaxFiles}: must be > 1`,
    );
  const size = parseQuantity(c.containerLogMaxSize);
  if (!Number.isSafeInteger(size))
    throw new LogRotationError(
      `Cannot use containerLogMaxSize "${c.containerLogMaxSize}": not a whole number of bytes`,
    );
  return {
    maxSizeBytes: size,
    maxFiles: c.containerLogMaxFiles,
    maxWorkers: Math.max(1, c.containerLogMaxWorkers),
    monitorIntervalMs: c.containerLogMonitorIntervalMs,
  };
}

/** Upstream's containerLogManager over a CRI runtime and the local filesystem. */
export class CriContainerLogManager implements ContainerLogManager {
  readonly #d: ContainerLogManagerDeps;
  readonly #p: LogRotatePolicy;
  /** One pass (or clean) at a time, as upstream's mutex: they touch the same files. */
  #busy: Promise<void> = Promise.resolve();

  constructor(policy: LogRotatePolicy, deps: ContainerLogManagerDeps) {
    this.#p = policy;
    this.#d = deps;
  }

  async run(signal: AbortSignal): Promise<void> {
    if (this.#p.maxSizeBytes < 0) return; // rotation disabled
    this.#d.logger.info('Starting container log rotation', {
      workers: this.#p.maxWorkers,
      monitorPeriodMs: this.#p.monitorIntervalMs,
    });
    while (!isAborted(signal)) {
      try {
        await this.#d.clock.sleep(this.#p.monitorIntervalMs, signal);
        await this.rotateLogs(signal);
      } catch (err) {
        if (isAbortError(err) || isAborted(signal)) return;
        this.#d.logger.error('Failed to rotate container logs', { error: String(err) });
      }
    }
  }

  rotateLogs(signal: AbortSignal): Promise<void> {
    return this.#exclusive(async () => {
      const { containers } = await this.#d.cri.runtime.listContainers(
        { filter: { state: { state: cri.ContainerState.CONTAINER_RUNNING } } },
        { signal },
      );
      // Only running containers write; an exited one keeps its last file as it is.
      const queue = containers
        .filter((c) => c.state === cri.ContainerState.CONTAINER_RUNNING)
        .map((c) => c.id);
      const worker = async (): Promise<void> => {
        for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
          if (isAborted(signal)) return;
          await this.#processContainer(id, signal);
        }
      };
      await Promise.all(Array.from({ length: this.#p.maxWorkers }, worker));
    });
  }

  clean(containerId: string, signal: AbortSignal): Promise<void> {
    return this.#exclusive(async () => {
      const res = await this.#d.cri.runtime
        .containerStatus({ containerId }, { signal })
        .catch((err: unknown) => {
          // Already removed from the runtime: it has no log path to clean any more.
          if (err instanceof CriError && err.code === 'BERTH_CRI_NOT_FOUND') return undefined;
          throw err;
        });
      const log = res?.status?.logPath ?? '';
      if (log === '') return;
      try {
        await checkLogPath(log, this.#d.podLogsDir);
      } catch (err) {
        // Nothing is removed through a planted symlink or outside the pod log root.
        if (!(err instanceof UnsafeLogPathError)) throw err;
        this.#d.logger.warn('Not cleaning container logs: unsafe log path', {
          containerID: containerId,
          error: err.message,
        });
        return;
      }
      const names = await readdir(path.dirname(log)).catch(() => []);
      const base = path.basename(log);
      for (const n of names.filter((n) => n === base || n.startsWith(`${base}.`)))
        await rm(path.join(path.dirname(log), n), { force: true });
    });
  }

  async #exclusive(fn: () => Promise<void>): Promise<void> {
    const prev = this.#busy;
    let release = (): void => undefined;
    this.#busy = new Promise<void>((r) => {
      release = r;
    });
    await prev;
    try {
      await fn();
    } finally {
      release();
    }
  }

  /** Errors are logged per container: one bad log must not stop the others. */
  async #processContainer(id: string, signal: AbortSignal): Promise<void> {
    const logger = this.#d.logger.child({ containerID: id });
    try {
      const res = await this.#d.cri.runtime.containerStatus({ containerId: id }, { signal });
      const log = res.status?.logPath ?? '';
      if (log === '') return;
      if (!(await checkLogPath(log, this.#d.podLogsDir))) {
        // The live file is gone (removed by hand?): let the runtime create it again.
        await this.#d.cri.runtime.reopenContainerLog({ containerId: id }, { signal });
        return;
      }
      const { size } = await stat(log);
      if (size < this.#p.maxSizeBytes) return;
      await this.#rotate(id, log, signal);
      logger.debug('Rotated container log', { path: log, size });
    } catch (err) {
      if (isAbortError(err) || isAborted(signal)) return;
      if (err instanceof UnsafeLogPathError) {
        logger.warn('Skipping container log rotation: unsafe log path', { error: err.message });
        return;
      }
      logger.error('Failed to rotate container log', { error: String(err) });
    }
  }

  async #rotate(id: string, log: string, signal: AbortSignal): Promise<void> {
    const dir = path.dirname(log);
    const { inUse, unused } = splitRotated(log, await readdir(dir));
    for (const f of unused) await rm(f, { force: true });
    // Oldest first, so a reader working through them in order is not cut short.
    const keep = Math.max(0, this.#p.maxFiles - 2);
    const excess = inUse.slice(0, Math.max(0, inUse.length - keep));
    for (const f of excess) await rm(f, { force: true });
    for (const f of inUse.slice(excess.length)) {
      if (!f.endsWith(COMPRESS_SUFFIX)) await compressLog(f);
    }
    const rotated = `${log}.${rotationTimestamp(this.#d.clock.now())}`;
    // Two rotations in one second would rename over the previous file and lose it.
    if (await exists(rotated)) return;
    await rename(log, rotated);
    try {
      await this.#d.cri.runtime.reopenContainerLog({ containerId: id }, { signal });
    } catch (err) {
      // Put the file back so the next round can rotate it again, as upstream does.
      await rename(rotated, log).catch((renameErr: unknown) => {
        this.#d.logger.error('Failed to rename a rotated log back: its lines may be lost', {
          containerID: id,
          path: log,
          error: String(renameErr),
        });
      });
      throw new LogRotationError(`Cannot reopen the log of container ${id}`, { cause: err });
    }
  }
}

async function exists(p: string): Promise<boolean> {
  return stat(p).then(
    () => true,
    () => false,
  );
}

/** `<f>` -> `<f>.gz` through `<f>.gz.tmp`, so a crash never leaves a truncated archive. */
export async function compressLog(file: string): Promise<void> {
  const tmp = `${file}${COMPRESS_SUFFIX}${TMP_SUFFIX}`;
  const src = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  const { mode } = await src.stat();
  try {
    await pipeline(
      createReadStream('', { fd: src, autoClose: false }),
      createGzip(),
      createWriteStream(tmp, { mode, flags: 'w' }),
    );
    await rename(tmp, `${file}${COMPRESS_SUFFIX}`);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  } finally {
    await src.close();
  }
  await rm(file, { force: true });
}
