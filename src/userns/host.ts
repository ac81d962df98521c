/**
 * The user namespace manager's view of a real node: pod directories under
 * `<rootDir>/pods`, the runtime handlers' features from the CRI Status, and the
 * kubelet's IDs from /etc (subid.ts).
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { RuntimeService } from '../cri/index.ts';
import { kubeletMappings, type SubIdOptions } from './subid.ts';
import { UsernsError, type UsernsHost } from './types.ts';

export interface DiskUsernsHostOptions extends SubIdOptions {
  readonly rootDir: string;
  readonly runtime: Pick<RuntimeService, 'status'>;
  readonly maxPods: number;
}

/** Upstream's HandlerSupportsUserNamespaces over the runtime's answer. */
export function handlerSupports(
  handlers: readonly { name: string; features?: { userNamespaces: boolean } | undefined }[],
  runtimeHandler: string,
): boolean {
  // An empty list: the runtime is too old to report handlers, so nothing is supported.
  if (handlers.length === 0) return false;
  const h = handlers.find((x) => x.name === runtimeHandler);
  if (h === undefined) throw new UsernsError(`the handler "${runtimeHandler}" is not known`);
  return h.features?.userNamespaces === true;
}

export function diskUsernsHost(o: DiskUsernsHostOptions): UsernsHost {
  const pods = join(o.rootDir, 'pods');
  return {
    maxPods: o.maxPods,
    podDir: (uid) => {
      // UIDs are UUIDs or static pods' hashes; anything else could leave the pods directory.
      if (uid === '' || uid === '.' || uid === '..' || uid.includes('/'))
        throw new UsernsError(`Cannot use pod UID ${JSON.stringify(uid)} as a directory name`);
      return join(pods, uid);
    },
    listPodsFromDisk: async () => {
      try {
        const entries = await readdir(pods, { withFileTypes: true });
        return entries.filter((e) => e.isDirectory()).map((e) => e.name);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
        throw err;
      }
    },
    handlerSupportsUserNamespaces: async (runtimeHandler, signal) => {
      const status = await o.runtime.status({ verbose: false }, { signal, timeoutMs: 10_000 });
      return handlerSupports(status.runtimeHandlers, runtimeHandler);
    },
    kubeletMappings: (idsPerPod) => kubeletMappings(idsPerPod, o),
  };
}
