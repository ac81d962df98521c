/**
 * Removing a container as upstream's runtime manager does (kuberuntime_container.go
 * removeContainer): its logs first — the rotated files the log manager keeps and the
 * /var/log/containers link — then the container itself, so a container whose logs could
 * not be removed stays to be removed again. Every place that removes containers (the
 * terminated pod, orphans, container GC) goes through here.
 */
import type { CriClient } from '../cri/index.ts';
import type { ContainerLogManager } from '../logs/types.ts';
import type { LogSymlinks } from './log-symlinks.ts';

export interface RemovableContainer {
  readonly id: string;
  /** The container's name in the pod spec. */
  readonly name: string;
  readonly podName: string;
  readonly podNamespace: string;
}

export interface ContainerRemovalDeps {
  readonly cri: CriClient;
  readonly containerLogs?: Pick<ContainerLogManager, 'clean'>;
  readonly logSymlinks?: LogSymlinks;
}

/** Throws the runtime's error (e.g. CriError NOT_FOUND) for the caller to judge. */
export async function removeContainer(
  deps: ContainerRemovalDeps,
  c: RemovableContainer,
  signal: AbortSignal,
): Promise<void> {
  await deps.containerLogs?.clean(c.id, signal);
  await deps.logSymlinks?.unlink({ namespace: c.podNamespace, name: c.podName }, c.name, c.id);
  await deps.cri.runtime.removeContainer({ containerId: c.id }, { signal });
}
