/**
 * The kubelet's ContainerEnvProvider: service links from the service lister, configMap
 * and secret values read from the API (per container start, as upstream's Get
 * strategy), downward fields from the pod, the node's IPs and allocatable. Skipped
 * envFrom keys become upstream's InvalidEnvironmentVariableNames warning event.
 */
import type { ConfigMap, Container, Pod, Secret } from 'kubernetes-types/core/v1.js';
import type { EventRecorder } from '../events/types.ts';
import { CONFIGMAPS, inNamespace, isNotFound, SECRETS, type KubeClient } from '../kube/types.ts';
import { HostDownwardResolver, type NodeAllocatable } from '../kuberuntime/downward.ts';
import { expandCommand, makeEnvironment } from '../kuberuntime/env.ts';
import type { ContainerEnvironment, ContainerEnvProvider } from '../kuberuntime/container-start.ts';
import type { ServiceLister } from './service-lister.ts';
import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { safeOpen } from '../volumes/safe-path.ts';
import type { PodVolumes } from '../volumes/types.ts';

/** Most of an env file read for fileKeyRef: upstream reads the whole file; bound it. */
const MAX_ENV_FILE_BYTES = 1024 * 1024;

/**
 * Reads `rel` inside the volume at `root` through a descriptor resolved without leaving
 * the volume (a symlink out of it is refused), as upstream's securejoin does.
 */
async function readUnder(
  root: string,
  rel: string,
  signal: AbortSignal,
): Promise<{ text: string; hostPath: string }> {
  const file = await safeOpen(root, rel, { what: `fileKeyRef path \`${rel}\`` });
  try {
    signal.throwIfAborted();
    const data = await readFile(file.procPath, { signal });
    if (data.length > MAX_ENV_FILE_BYTES) {
      throw new Error(`${rel} is larger than ${MAX_ENV_FILE_BYTES} bytes`);
    }
    return { text: data.toString('utf8'), hostPath: path.join(root, rel) };
  } finally {
    await file.close();
  }
}

export interface PodEnvironmentOptions {
  readonly kube: KubeClient;
  readonly services: Pick<ServiceLister, 'hasSynced' | 'list'>;
  readonly hostIPs: readonly string[];
  readonly nodeAllocatable: () => NodeAllocatable;
  readonly recorder: EventRecorder;
}

export class PodEnvironment implements ContainerEnvProvider {
  readonly #o: PodEnvironmentOptions;

  constructor(options: PodEnvironmentOptions) {
    this.#o = options;
  }

  async #get<T>(kind: 'configmaps' | 'secrets', ns: string, name: string, signal: AbortSignal) {
    try {
      return await this.#o.kube.get<T>(
        inNamespace(kind === 'configmaps' ? CONFIGMAPS : SECRETS, ns),
        name,
        { signal },
      );
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async environment(
    pod: Pod,
    container: Container,
    podIPs: readonly string[],
    signal: AbortSignal,
    volumes?: PodVolumes,
  ): Promise<ContainerEnvironment> {
    const o = this.#o;
    const downward = new HostDownwardResolver({
      hostIPs: () => o.hostIPs,
      // A hostNetwork pod has the node's addresses.
      podIPs: () => (pod.spec?.hostNetwork === true ? o.hostIPs : podIPs),
      nodeAllocatable: o.nodeAllocatable,
    });
    const env = await makeEnvironment(
      pod,
      container,
      {
        services: (ns) => o.services.list(ns),
        servicesSynced: () => o.services.hasSynced(),
        getConfigMap: (ns, name, s) => this.#get<ConfigMap>('configmaps', ns, name, s),
        getSecret: (ns, name, s) => this.#get<Secret>('secrets', ns, name, s),
        downward,
        readVolumeFile: (name, rel, s) => {
          const volume = volumes?.byName.get(name);
          return volume === undefined ? undefined : readUnder(volume.hostPath, rel, s);
        },
      },
      signal,
    );
    const m = pod.metadata ?? {};
    for (const e of env.errors)
      o.recorder.event(
        {
          kind: 'Pod',
          apiVersion: 'v1',
          namespace: m.namespace ?? '',
          name: m.name ?? '',
          uid: m.uid ?? '',
          fieldPath: `spec.containers{${container.name}}`,
        },
        'Warning',
        e.reason,
        e.message,
      );
    const { command, args } = expandCommand(container, env.env);
    return { env: env.env, command, args };
  }
}
