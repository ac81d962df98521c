/**
 * The legacy container log symlinks upstream's kubelet keeps in /var/log/containers
 * (kuberuntime/legacy.go): `<pod>_<namespace>_<container>-<containerID>.log`, pointing
 * at the container's CRI log under podLogsDir. Log collectors (fluent-bit, promtail,
 * fluentd, the Datadog and Elastic agents) tail that directory and read the pod, the
 * namespace and the container from the name, so a drop-in kubelet keeps it as upstream
 * does: a link made after StartContainer when the log file exists, removed with the
 * container, and dead links (their log gone) removed by the container GC unless the
 * container still runs.
 */
import { lstat, mkdir, readdir, stat, symlink, unlink } from 'node:fs/promises';
import path from 'node:path';
import { containerLogSymlink } from '../container/labels.ts';
import type { Logger } from '../util/logger.ts';

const SUFFIX = '.log';

export interface PodName {
  readonly namespace: string;
  readonly name: string;
}

/**
 * The container ID a link's name ends in (upstream's getContainerIDFromLegacyLogSymlink):
 * what follows the last '-', before ".log"; undefined when that is under 6 characters,
 * the shortest prefix a runtime resolves.
 */
export function containerIdOfLink(name: string): string | undefined {
  if (!name.endsWith(SUFFIX)) return undefined;
  const id = name.slice(name.lastIndexOf('-') + 1, -SUFFIX.length);
  return id.length >= 6 ? id : undefined;
}

async function exists(p: string): Promise<boolean> {
  try {
    await stat(p);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    // Upstream links unless the log is known to be missing (any other stat error too).
    return true;
  }
}

export class LogSymlinks {
  readonly #dir: string;
  readonly #logger: Logger;

  constructor(options: { readonly dir: string; readonly logger: Logger }) {
    this.#dir = options.dir;
    this.#logger = options.logger;
  }

  get dir(): string {
    return this.#dir;
  }

  /** Creates the directory (upstream makes it at start, mode 0755). */
  async ensureDir(): Promise<void> {
    await mkdir(this.#dir, { recursive: true, mode: 0o755 });
  }

  /**
   * Links the started container's log; a failure is logged, never fails the start
   * (upstream's "Failed to create legacy symbolic link").
   */
  async link(pod: PodName, container: string, containerId: string, logFile: string): Promise<void> {
    const link = containerLogSymlink(pod, container, containerId, this.#dir);
    if (!(await exists(logFile))) return;
    try {
      await symlink(logFile, link);
    } catch (err) {
      this.#logger.error('Failed to create legacy symbolic link', {
        pod: `${pod.namespace}/${pod.name}`,
        path: link,
        containerID: containerId,
        containerLogPath: logFile,
        error: err instanceof Error ? err.message : String(err),
      });
    }
  }

  /** Removes the container's link (with the container, as upstream's removeContainerLog). */
  async unlink(pod: PodName, container: string, containerId: string): Promise<void> {
    const link = containerLogSymlink(pod, container, containerId, this.#dir);
    try {
      await unlink(link);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      this.#logger.error('Failed to remove container log dead symlink', {
        pod: `${pod.namespace}/${pod.name}`,
        path: link,
        error: err instanceof Error ? err.message : String(err),
      });
    }
  }

  /**
   * Removes every link whose log is gone, unless `alive` says its container exists and
   * has not exited: a log being rotated is briefly missing (upstream's container GC).
   * Returns how many went.
   */
  async removeDead(alive: (containerId: string) => Promise<boolean>): Promise<number> {
    let names: string[];
    try {
      names = await readdir(this.#dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw err;
    }
    let removed = 0;
    for (const name of names) {
      if (!name.endsWith(SUFFIX)) continue;
      const link = path.join(this.#dir, name);
      if (!(await lstat(link).catch(() => undefined))?.isSymbolicLink()) continue;
      if (await exists(link)) continue;
      const id = containerIdOfLink(name);
      if (id !== undefined && (await alive(id))) continue;
      try {
        await unlink(link);
        removed++;
        this.#logger.debug('Removed symlink', { path: link });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
        this.#logger.error('Failed to remove container log dead symlink', {
          path: link,
          error: err instanceof Error ? err.message : String(err),
        });
      }
    }
    return removed;
  }
}
