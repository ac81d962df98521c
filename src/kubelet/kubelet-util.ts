/** Small start-up helpers of the kubelet composition root. */
import { readFileSync } from 'node:fs';
import type { Node, Pod } from 'kubernetes-types/core/v1.js';
import { cri, CriError, type CriClient } from '../cri/index.ts';
import { inNamespace, isNotFound, PODS, type KubeClient } from '../kube/types.ts';
import type { NodeAllocatable } from '../kuberuntime/downward.ts';
import type { Logger } from '../util/logger.ts';
import { milliCpu, parseQuantity } from '../util/quantity.ts';

/** What the kubepods cgroup gets: the node's allocatable cpu and memory. */
export function podsAllocatable(node: Node | undefined): {
  cpuMilli: number;
  memoryBytes?: number;
} {
  const a = node?.status?.allocatable ?? {};
  const cpu = a['cpu'];
  const memory = a['memory'];
  return {
    cpuMilli: cpu === undefined ? 0 : milliCpu(cpu),
    ...(memory !== undefined && { memoryBytes: Math.floor(parseQuantity(memory)) }),
  };
}

/** Waits for `p` at most `ms`; resolves false on timeout (the work goes on regardless). */
export async function raceTimeout(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => {
      resolve(false);
    }, ms);
  });
  try {
    return await Promise.race([p.then(() => true), timeout]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/** The node's hosts file (copied into hostNetwork pods); '' when unreadable. */
export function readNodeHosts(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

/**
 * The cgroup driver the runtime uses (CRI RuntimeConfig, containerd >= 2.0); the
 * configured one when the runtime does not answer (containerd 1.x), as upstream.
 */
export async function runtimeCgroupDriver(
  client: CriClient,
  configured: 'cgroupfs' | 'systemd',
  logger: Logger,
  signal: AbortSignal,
): Promise<'cgroupfs' | 'systemd'> {
  try {
    const r = await client.runtime.runtimeConfig({}, { signal });
    const driver = r.linux?.cgroupDriver;
    const found =
      driver === cri.CgroupDriver.SYSTEMD
        ? 'systemd'
        : driver === cri.CgroupDriver.CGROUPFS
          ? 'cgroupfs'
          : configured;
    if (found !== configured)
      logger.info('Using the cgroup driver the runtime reports instead of the configured one', {
        runtime: found,
        configured,
      });
    return found;
  } catch (err) {
    if (signal.aborted || !(err instanceof CriError)) throw err;
    return configured;
  }
}

/** A rejected pod never ran: once it is being deleted, nothing holds it back. */
export function deleteRejectedPod(
  kube: KubeClient,
  pod: Pod,
  signal: AbortSignal,
  logger: Logger,
): void {
  const m = pod.metadata;
  if (m?.deletionTimestamp == null) return;
  kube
    .delete(inNamespace(PODS, m.namespace ?? 'default'), m.name ?? '', {
      gracePeriodSeconds: 0,
      preconditions: { uid: m.uid ?? '' },
      signal,
    })
    .catch((err: unknown) => {
      if (!signal.aborted && !isNotFound(err))
        logger.warn('Cannot delete a rejected pod', {
          pod: `${m.namespace ?? ''}/${m.name ?? ''}`,
          error: String(err),
        });
    });
}

/** The node's allocatable cpu/memory/ephemeral-storage (downward API fallbacks). */
export function nodeAllocatable(node: Node | undefined): NodeAllocatable {
  const a = node?.status?.allocatable ?? {};
  return {
    cpu: a['cpu'] ?? '0',
    memory: a['memory'] ?? '0',
    ...(a['ephemeral-storage'] !== undefined && { 'ephemeral-storage': a['ephemeral-storage'] }),
  };
}
