/**
 * The floor: what starting a pod costs the runtime alone. RunPodSandbox, CreateContainer
 * and StartContainer called directly through berth's CRI client, with the same pod
 * shape the agents get (busybox `sleep 3600`, preloaded image), no API server and no
 * node agent. No agent can start a pod faster than this on the same runtime.
 */
import { randomUUID } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { GrpcCriClient, cri } from '../src/cri/index.ts';
import type { Cluster } from '../test/harness/cluster.ts';
import { removeCgroupTree } from '../test/harness/upstream-kubelet.ts';
import { observeContention, type Contention } from './contention.ts';
import { cpuSeconds, summarize, type Summary } from './stats.ts';

export interface FloorOptions {
  readonly reps: number;
  readonly warmup: number;
  readonly batch: number;
  readonly settleMs: number;
  /** Quiet time before the batch. */
  readonly pauseMs: number;
  readonly namespace: string;
  readonly log: (message: string) => void;
}

export interface FloorResult {
  readonly single: Summary & {
    readonly samplesMs: readonly number[];
    /** How busy the machine was during the phase. */
    readonly machine: Contention;
  };
  readonly batch: {
    readonly machine: Contention;
    readonly size: number;
    readonly allRunningMs: number;
    readonly perPod: Summary;
    readonly runtimeCpuSeconds: number;
  };
}

/** Starts one pod through CRI; resolves with its sandbox id once StartContainer returned. */
async function startPod(
  client: GrpcCriClient,
  cluster: Cluster,
  namespace: string,
  name: string,
): Promise<string> {
  const uid = randomUUID();
  const labels = {
    'io.kubernetes.pod.name': name,
    'io.kubernetes.pod.namespace': namespace,
    'io.kubernetes.pod.uid': uid,
  };
  const sandboxConfig = cri.PodSandboxConfig.fromPartial({
    metadata: { name, uid, namespace, attempt: 0 },
    hostname: name,
    logDirectory: join(cluster.root, 'floor-logs', `${namespace}_${name}_${uid}`),
    labels,
    linux: {
      cgroupParent: `${cluster.state.cgroupRoot}/floor/pod${uid}`,
      securityContext: {
        namespaceOptions: { network: cri.NamespaceMode.POD, pid: cri.NamespaceMode.CONTAINER },
      },
    },
  });
  // The kubelet makes the log directory as well; it is not a CRI call, so not timed.
  await mkdir(sandboxConfig.logDirectory, { recursive: true });
  const { podSandboxId } = await client.runtime.runPodSandbox({ config: sandboxConfig });
  const { containerId } = await client.runtime.createContainer({
    podSandboxId,
    sandboxConfig,
    config: {
      metadata: { name: 'sleep', attempt: 0 },
      image: { image: cluster.images.busyboxLocal },
      command: ['sleep', '3600'],
      logPath: 'sleep/0.log',
      labels: { ...labels, 'io.kubernetes.container.name': 'sleep' },
    },
  });
  await client.runtime.startContainer({ containerId });
  return podSandboxId;
}

async function checkRunning(client: GrpcCriClient, podSandboxId: string): Promise<void> {
  const { containers } = await client.runtime.listContainers({ filter: { podSandboxId } });
  const state = containers[0]?.state;
  if (containers.length !== 1 || state !== cri.ContainerState.CONTAINER_RUNNING) {
    throw new Error(
      `Cannot count sandbox ${podSandboxId} as started: its container is in state ${String(state)}`,
    );
  }
}

async function removePod(client: GrpcCriClient, podSandboxId: string): Promise<void> {
  await client.runtime.stopPodSandbox({ podSandboxId });
  await client.runtime.removePodSandbox({ podSandboxId });
}

/** Runs the floor: `warmup + reps` pods one at a time, then `batch` pods at once. */
export async function runFloor(cluster: Cluster, options: FloorOptions): Promise<FloorResult> {
  const client = new GrpcCriClient(cluster.runtime.socket, { defaultTimeoutMs: 120_000 });
  try {
    const samplesMs: number[] = [];
    const singleMachine = await observeContention(cluster.root);
    for (let i = 0; i < options.warmup + options.reps; i++) {
      const t0 = performance.now();
      const id = await startPod(client, cluster, options.namespace, `floor-single-${i}`);
      const ms = performance.now() - t0;
      await checkRunning(client, id);
      if (i >= options.warmup) samplesMs.push(ms);
      await removePod(client, id);
      await sleep(options.settleMs);
    }
    const singleContention = await singleMachine();
    options.log(`floor: ${options.reps} single pods done`);
    await sleep(options.pauseMs);
    const batchMachine = await observeContention(cluster.root);

    const runtimePid = cluster.runtime.process.pid;
    const cpu0 = await cpuSeconds(runtimePid);
    const t0 = performance.now();
    const perPodMs: number[] = [];
    const ids = await Promise.all(
      Array.from({ length: options.batch }, async (_, i) => {
        const id = await startPod(client, cluster, options.namespace, `floor-batch-${i}`);
        perPodMs.push(performance.now() - t0);
        return id;
      }),
    );
    const allRunningMs = performance.now() - t0;
    const runtimeCpuSeconds = (await cpuSeconds(runtimePid)) - cpu0;
    const batchContention = await batchMachine();
    for (const id of ids) await checkRunning(client, id);
    await Promise.all(ids.map((id) => removePod(client, id)));
    await removeCgroupTree(`${cluster.state.cgroupRoot}/floor`);
    options.log(`floor: batch of ${options.batch} done`);
    return {
      single: {
        ...summarize(samplesMs),
        samplesMs: samplesMs.map((s) => Math.round(s * 10) / 10),
        machine: singleContention,
      },
      batch: {
        machine: batchContention,
        size: options.batch,
        allRunningMs: Math.round(allRunningMs),
        perPod: summarize(perPodMs),
        runtimeCpuSeconds: Math.round(runtimeCpuSeconds * 100) / 100,
      },
    };
  } finally {
    client.close();
  }
}
