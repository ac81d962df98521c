/**
 * Builds the detailed runtime state of one pod (RuntimePodStatus) from the PLEG's
 * snapshot: container exit codes and times need ContainerStatus, pod IPs need
 * PodSandboxStatus. Both answers are cached per object and state: an exited container
 * never changes again, so a steady pod costs no CRI calls per sync.
 */
import type { RuntimeService } from '../cri/index.ts';
import { CriNotFoundError, cri } from '../cri/index.ts';
import {
  containerFromList,
  containerFromStatus,
  sandboxFromList,
  sandboxFromStatus,
  type RuntimeContainer,
  type RuntimePodStatus,
  type SandboxStatus,
} from '../container/pod-status.ts';
import { terminationMessage } from './termination-message.ts';
import type { RuntimePodSnapshot } from '../container/pod-status.ts';

export class RuntimeStatusReader {
  readonly #runtime: Pick<RuntimeService, 'containerStatus' | 'podSandboxStatus'>;
  readonly #containers = new Map<string, RuntimeContainer>();
  readonly #sandboxes = new Map<string, SandboxStatus>();

  constructor(runtime: Pick<RuntimeService, 'containerStatus' | 'podSandboxStatus'>) {
    this.#runtime = runtime;
  }

  async read(
    snapshot: RuntimePodSnapshot,
    pod: { name: string; namespace: string },
    signal: AbortSignal,
  ): Promise<RuntimePodStatus> {
    const sandboxes = await Promise.all(
      snapshot.sandboxes.map(async (s, i) => {
        // Only the newest sandbox's IPs matter; older ones are for killing.
        if (i > 0) return sandboxFromList(s);
        const key = `${s.id}/${s.state}`;
        const cached = this.#sandboxes.get(key);
        if (cached !== undefined) return cached;
        try {
          const status = await this.#runtime.podSandboxStatus({ podSandboxId: s.id }, { signal });
          if (status.status === undefined) return sandboxFromList(s);
          const converted = sandboxFromStatus(status.status);
          this.#sandboxes.set(key, converted);
          return converted;
        } catch (err) {
          if (err instanceof CriNotFoundError) return sandboxFromList(s);
          throw err;
        }
      }),
    );
    const containers = await Promise.all(
      snapshot.containers.map(async (c) => {
        const key = `${c.id}/${c.state}`;
        const cached = this.#containers.get(key);
        if (cached !== undefined) return cached;
        try {
          const status = await this.#runtime.containerStatus({ containerId: c.id }, { signal });
          if (status.status === undefined) return containerFromList(c);
          let converted = containerFromStatus(status.status, c.podSandboxId);
          if (c.state === cri.ContainerState.CONTAINER_EXITED) {
            const extra = await terminationMessage(status.status);
            if (extra !== '') {
              const own = converted.message ?? '';
              converted = { ...converted, message: own === '' ? extra : `${own}: ${extra}` };
            }
          }
          // Created/unknown containers may change without a state change being visible.
          if (
            c.state === cri.ContainerState.CONTAINER_EXITED ||
            c.state === cri.ContainerState.CONTAINER_RUNNING
          ) {
            this.#containers.set(key, converted);
          }
          return converted;
        } catch (err) {
          if (err instanceof CriNotFoundError) return containerFromList(c);
          throw err;
        }
      }),
    );
    return { uid: snapshot.uid, name: pod.name, namespace: pod.namespace, sandboxes, containers };
  }

  /** Drops a container's cached status (its resources changed in place). */
  forget(containerId: string): void {
    for (const [key, v] of this.#containers) if (v.id === containerId) this.#containers.delete(key);
  }

  /** Drops cached entries of objects the runtime no longer has. */
  prune(liveIds: ReadonlySet<string>): void {
    for (const [key, v] of this.#containers) if (!liveIds.has(v.id)) this.#containers.delete(key);
    for (const [key, v] of this.#sandboxes) if (!liveIds.has(v.id)) this.#sandboxes.delete(key);
  }
}
