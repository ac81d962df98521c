/**
 * Pod start latency, side by side: the raw CRI floor, then each node agent on the same
 * cluster (containerd 2.x), one after another, each as its own node.
 *
 *   node_modules/.bin/node bench/pod-start.ts [--reps 30] [--batch 100] [--warmup 2]
 *                                             [--agents floor,berth,upstream] [--out file.json] [--trace]
 *
 * Latency of one pod = from just before the create call to the moment a watch shows
 * the pod Running with every container started. Per agent: `reps` pods one at a time
 * (each deleted, and seen gone, before the next), then `batch` pods created at once
 * (time until all are Running), with the agent's CPU seconds and peak RSS over the
 * batch. Writes the results as JSON under bench/results/ and prints a markdown table.
 */
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { GrpcCriClient } from '../src/cri/index.ts';
import { pinnedVersions, REPO_ROOT } from '../test/harness/binaries.ts';
import type { Cluster } from '../test/harness/cluster.ts';
import { AGENTS, type Agent } from './agents.ts';
import {
  clearRuntime,
  prepareNamespace,
  runName,
  startBenchCluster,
  stopBenchCluster,
  writeReport,
} from './cluster-prep.ts';
import type { KubeApi } from './kube-api.ts';
import { observeContention, type Contention } from './contention.ts';
import { runFloor, type FloorResult } from './floor.ts';
import { PodTracker } from './pod-tracker.ts';
import { traceStarts, traceTable, type PodStartTimes, type StartTrace } from './start-trace.ts';
import {
  cpuSeconds,
  memory,
  resetPeakMemory,
  sampleRss,
  summarize,
  type Summary,
} from './stats.ts';

const NAMESPACE = 'berth-bench';
const LABEL_RUN = 'bench.berth.dev/run';
const LABEL_PHASE = 'bench.berth.dev/phase';
const podsPath = `/api/v1/namespaces/${NAMESPACE}/pods`;
const POD_TIMEOUT_MS = 180_000;
const BATCH_TIMEOUT_MS = 900_000;

interface BenchOptions {
  readonly reps: number;
  readonly batch: number;
  readonly warmup: number;
  readonly settleMs: number;
  /** Quiet time before each phase, so one phase's clean-up does not run into the next. */
  readonly pauseMs: number;
  readonly agents: readonly string[];
  readonly out: string | undefined;
  /** Agents at verbosity 4, each single pod's start split into phases (start-trace.ts). */
  readonly trace: boolean;
}

interface AgentResult {
  readonly agent: string;
  readonly nodeName: string;
  readonly single: Summary & {
    readonly samplesMs: readonly number[];
    /** How busy the machine was during the phase. */
    readonly machine: Contention;
    /** With --trace: where the time went, from the agent's log. */
    readonly trace?: StartTrace;
  };
  readonly batch: {
    readonly machine: Contention;
    readonly size: number;
    readonly allRunningMs: number;
    readonly perPod: Summary;
    readonly agentCpuSeconds: number | null;
    readonly agentPeakRssMiB: number | null;
    /** How the peak was taken: VmHWM after a clear_refs reset, or sampled VmRSS (every 100 ms). */
    readonly agentPeakRssMethod: 'VmHWM' | 'sampled VmRSS' | null;
    readonly agentRssBeforeMiB: number | null;
    readonly runtimeCpuSeconds: number;
  };
  readonly agentRssAfterStartMiB: number | null;
  readonly leftoverSandboxes: number;
}

const log = (message: string): void => {
  console.error(`[bench] ${message}`);
};

function parseOptions(argv: readonly string[]): BenchOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      reps: { type: 'string', default: '30' },
      batch: { type: 'string', default: '100' },
      warmup: { type: 'string', default: '2' },
      settle: { type: 'string', default: '500' },
      pause: { type: 'string', default: '5000' },
      agents: { type: 'string', default: 'floor,berth,upstream' },
      out: { type: 'string' },
      trace: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const count = (name: string, text: string, min: number): number => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < min) {
      throw new Error(`Cannot use --${name} ${text}: it must be an integer >= ${min}`);
    }
    return n;
  };
  const agents = values.agents.split(',').filter((a) => a !== '');
  for (const a of agents) {
    if (a !== 'floor' && AGENTS[a] === undefined) {
      throw new Error(
        `Cannot benchmark agent ${a}: known are floor, ${Object.keys(AGENTS).join(', ')}`,
      );
    }
  }
  return {
    reps: count('reps', values.reps, 1),
    batch: count('batch', values.batch, 1),
    warmup: count('warmup', values.warmup, 0),
    settleMs: count('settle', values.settle, 0),
    pauseMs: count('pause', values.pause, 0),
    agents,
    out: values.out,
    trace: values.trace,
  };
}

function podManifest(
  cluster: Cluster,
  name: string,
  nodeName: string,
  labels: Record<string, string>,
): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NAMESPACE, labels },
    spec: {
      nodeName,
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 1,
      restartPolicy: 'Never',
      // The test cluster runs no DNS; ClusterFirst would only add a warning event per pod.
      dnsPolicy: 'Default',
      containers: [
        {
          name: 'sleep',
          image: cluster.images.busyboxLocal,
          imagePullPolicy: 'Never',
          command: ['sleep', '3600'],
        },
      ],
    },
  };
}

async function singlePods(
  api: KubeApi,
  cluster: Cluster,
  agentName: string,
  nodeName: string,
  options: BenchOptions,
  run: string,
): Promise<{ samples: number[]; times: PodStartTimes[] }> {
  const phase = `${agentName}-single`;
  const tracker = new PodTracker(api, NAMESPACE, `${LABEL_RUN}=${run},${LABEL_PHASE}=${phase}`);
  await tracker.start();
  try {
    const samples: number[] = [];
    const times: PodStartTimes[] = [];
    for (let i = 0; i < options.warmup + options.reps; i++) {
      const name = `${phase}-${i}`;
      const manifest = podManifest(cluster, name, nodeName, {
        [LABEL_RUN]: run,
        [LABEL_PHASE]: phase,
      });
      const t0 = performance.now();
      const createdAtMs = Date.now();
      await api.send('POST', podsPath, manifest);
      await tracker.until(
        `${name} to be Running`,
        () => tracker.runningAt(name) !== undefined,
        POD_TIMEOUT_MS,
      );
      const ms = (tracker.runningAt(name) ?? NaN) - t0;
      if (i >= options.warmup) {
        samples.push(ms);
        times.push({ name, createdAtMs, runningAtMs: createdAtMs + ms });
      }
      await api.send('DELETE', `${podsPath}/${name}`);
      await tracker.until(
        `${name} to be deleted`,
        () => tracker.deletedAt(name) !== undefined,
        POD_TIMEOUT_MS,
      );
      await sleep(options.settleMs);
    }
    return { samples, times };
  } finally {
    await tracker.stop();
  }
}

async function batchPods(
  api: KubeApi,
  cluster: Cluster,
  agentName: string,
  nodeName: string,
  pid: number | undefined,
  options: BenchOptions,
  run: string,
): Promise<AgentResult['batch']> {
  const phase = `${agentName}-batch`;
  const selector = `${LABEL_RUN}=${run},${LABEL_PHASE}=${phase}`;
  const tracker = new PodTracker(api, NAMESPACE, selector);
  await tracker.start();
  try {
    const names = Array.from({ length: options.batch }, (_, i) => `${phase}-${i}`);
    const runtimePid = cluster.runtime.process.pid;
    const before = pid === undefined ? undefined : await memory(pid);
    const peakReset = pid === undefined ? false : await resetPeakMemory(pid);
    const sampler = pid === undefined ? undefined : sampleRss(pid);
    const agentCpu0 = pid === undefined ? 0 : await cpuSeconds(pid);
    const runtimeCpu0 = await cpuSeconds(runtimePid);
    const machine = await observeContention(cluster.root);
    const t0 = performance.now();
    await Promise.all(
      names.map((name) =>
        api.send(
          'POST',
          podsPath,
          podManifest(cluster, name, nodeName, {
            [LABEL_RUN]: run,
            [LABEL_PHASE]: phase,
          }),
        ),
      ),
    );
    await tracker.until(
      `${options.batch} pods to be Running`,
      () => names.every((n) => tracker.runningAt(n) !== undefined),
      BATCH_TIMEOUT_MS,
    );
    const agentCpu = pid === undefined ? null : (await cpuSeconds(pid)) - agentCpu0;
    const runtimeCpu = (await cpuSeconds(runtimePid)) - runtimeCpu0;
    const contention = await machine();
    const sampledPeak = sampler?.stop() ?? 0;
    const after = pid === undefined ? undefined : await memory(pid);
    const perPod = names.map((n) => (tracker.runningAt(n) ?? NaN) - t0);
    const peak =
      after === undefined ? null : peakReset ? after.peakMiB : Math.max(sampledPeak, after.rssMiB);

    await api.send(
      'DELETE',
      `${podsPath}?${new URLSearchParams({ labelSelector: selector }).toString()}`,
    );
    await tracker.until(
      `${options.batch} pods to be deleted`,
      () => names.every((n) => tracker.deletedAt(n) !== undefined),
      BATCH_TIMEOUT_MS,
    );
    return {
      machine: contention,
      size: options.batch,
      allRunningMs: Math.round(Math.max(...perPod)),
      perPod: summarize(perPod),
      agentCpuSeconds: agentCpu === null ? null : Math.round(agentCpu * 100) / 100,
      agentPeakRssMiB: peak,
      agentPeakRssMethod: after === undefined ? null : peakReset ? 'VmHWM' : 'sampled VmRSS',
      agentRssBeforeMiB: before?.rssMiB ?? null,
      runtimeCpuSeconds: Math.round(runtimeCpu * 100) / 100,
    };
  } finally {
    await tracker.stop();
  }
}

async function measureAgent(
  api: KubeApi,
  cluster: Cluster,
  agentName: string,
  agent: Agent,
  options: BenchOptions,
  run: string,
): Promise<AgentResult> {
  const leftover = await clearRuntime(cluster);
  if (leftover > 0) log(`removed ${leftover} sandboxes left before ${agentName}`);
  log(`${agentName}: starting`);
  const running = await agent.start(cluster, {
    maxPods: options.batch,
    log,
    ...(options.trace && { verbosity: 4 }),
  });
  try {
    const { nodeName, pid } = running;
    const afterStart = pid === undefined ? undefined : await memory(pid);
    log(`${agentName}: node ${nodeName} Ready; ${options.warmup}+${options.reps} single pods`);
    await sleep(options.pauseMs);
    const singleMachine = await observeContention(cluster.root);
    const { samples, times } = await singlePods(api, cluster, agentName, nodeName, options, run);
    const trace =
      options.trace && running.logFile !== undefined
        ? await traceStarts(running.logFile, NAMESPACE, times)
        : undefined;
    const singleContention = await singleMachine();
    log(`${agentName}: batch of ${options.batch}`);
    await sleep(options.pauseMs);
    const batch = await batchPods(api, cluster, agentName, nodeName, pid, options, run);
    await sleep(options.settleMs);
    return {
      agent: agentName,
      nodeName,
      single: {
        ...summarize(samples),
        samplesMs: samples.map((s) => Math.round(s * 10) / 10),
        machine: singleContention,
        ...(trace !== undefined && { trace }),
      },
      batch,
      agentRssAfterStartMiB: afterStart?.rssMiB ?? null,
      leftoverSandboxes: 0,
    };
  } finally {
    await running.stop();
    log(`${agentName}: stopped`);
  }
}

const ms = (v: number): string => String(Math.round(v));
const s = (v: number): string => (v / 1000).toFixed(2);
const orDash = (v: number | null): string => (v === null ? '—' : String(v));

function table(
  floor: FloorResult | undefined,
  agents: readonly AgentResult[],
  batch: number,
): string {
  const lines = [
    `| agent | pod start p50 / p90 / p99 (ms) | ${batch} pods: all Running (s) | ${batch} pods: per-pod p50 / p99 (s) | agent CPU over batch (s) | agent peak RSS over batch (MiB) | containerd CPU over batch (s) |`,
    '| --- | --- | --- | --- | --- | --- | --- |',
  ];
  if (floor !== undefined) {
    lines.push(
      `| floor (raw CRI) | ${ms(floor.single.p50Ms)} / ${ms(floor.single.p90Ms)} / ${ms(floor.single.p99Ms)} | ${s(floor.batch.allRunningMs)} | ${s(floor.batch.perPod.p50Ms)} / ${s(floor.batch.perPod.p99Ms)} | — | — | ${floor.batch.runtimeCpuSeconds} |`,
    );
  }
  for (const a of agents) {
    lines.push(
      `| ${a.agent} | ${ms(a.single.p50Ms)} / ${ms(a.single.p90Ms)} / ${ms(a.single.p99Ms)} | ${s(a.batch.allRunningMs)} | ${s(a.batch.perPod.p50Ms)} / ${s(a.batch.perPod.p99Ms)} | ${orDash(a.batch.agentCpuSeconds)} | ${orDash(a.batch.agentPeakRssMiB)} | ${a.batch.runtimeCpuSeconds} |`,
    );
  }
  const busy = (c: Contention): string =>
    `${c.machineBusyPercent}% busy, others ${c.otherCpuSeconds} s`;
  const phases = [
    ...(floor === undefined
      ? []
      : [`floor single ${busy(floor.single.machine)}; batch ${busy(floor.batch.machine)}`]),
    ...agents.map(
      (a) => `${a.agent} single ${busy(a.single.machine)}; batch ${busy(a.batch.machine)}`,
    ),
  ];
  lines.push(
    '',
    `Machine during each phase (CPU busy share; CPU seconds of processes outside the cluster): ${phases.join(' | ')}.`,
  );
  return lines.join('\n');
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const run = runName();
  log(`run ${run}: ${options.agents.join(', ')}; ${options.reps} reps, batch ${options.batch}`);
  // Other work on the machine skews every number: the report says how busy it was.
  const loadAtStart = loadavg();
  const bench = await startBenchCluster(log);
  const { cluster, api } = bench;
  try {
    const client = new GrpcCriClient(cluster.runtime.socket);
    const version = await client.runtime.version({ version: '0.1.0' }).finally(() => {
      client.close();
    });
    await prepareNamespace(api, NAMESPACE);
    let floor: FloorResult | undefined;
    if (options.agents.includes('floor')) {
      log(`floor: ${options.warmup}+${options.reps} single pods`);
      floor = await runFloor(cluster, { ...options, namespace: NAMESPACE, log });
    }
    const results: AgentResult[] = [];
    for (const name of options.agents) {
      const agent = AGENTS[name];
      if (agent === undefined) continue;
      await sleep(options.pauseMs);
      results.push(await measureAgent(api, cluster, name, agent, options, run));
      const leftover = await clearRuntime(cluster);
      if (leftover > 0) {
        log(`${name} left ${leftover} sandboxes in the runtime`);
        results[results.length - 1] = {
          ...(results.at(-1) as AgentResult),
          leftoverSandboxes: leftover,
        };
      }
    }
    const versions = pinnedVersions();
    const report = {
      benchmark: 'pod-start',
      run,
      date: new Date().toISOString(),
      machine: {
        cpus: cpus().length,
        memoryGiB: Math.round(totalmem() / 2 ** 30),
        kernel: release(),
        runtime: `${version.runtimeName} ${version.runtimeVersion}`,
        loadAverage: { atStart: loadAtStart, atEnd: loadavg() },
      },
      versions: {
        kubernetes: versions['KUBERNETES_VERSION'],
        containerd: versions['CONTAINERD_VERSION'],
      },
      options: {
        reps: options.reps,
        batch: options.batch,
        warmup: options.warmup,
        settleMs: options.settleMs,
        pauseMs: options.pauseMs,
        agents: options.agents,
      },
      floor: floor ?? null,
      agents: results,
    };
    const out = options.out ?? join(REPO_ROOT, 'bench', 'results', `pod-start-${run}.json`);
    await writeReport(out, report);
    log(`results in ${out}`);
    console.log(table(floor, results, options.batch));
    const traces = results.flatMap((r) =>
      r.single.trace === undefined ? [] : [{ agent: r.agent, trace: r.single.trace }],
    );
    if (traces.length > 0)
      console.log(`\nWhere the single pods' start time went:\n\n${traceTable(traces)}`);
  } finally {
    await stopBenchCluster(bench, log);
  }
}

await main();
