/**
 * Probe cost and timing, side by side: each node agent on the same cluster (containerd
 * 2.x), one after another, each as its own node.
 *
 *   node_modules/.bin/node bench/probes.ts [--pods 100] [--duration 300]
 *                                          [--agents berth,upstream] [--target server]
 *                                          [--out file.json]
 *
 * Per agent: `pods` pods serving HTTP (bench/probe-pods.ts; `--target` picks the
 * server), each with an httpGet readiness and liveness probe every second, created at once; once all are Ready (and `settle` seconds
 * later), `duration` seconds in which the agent's CPU (every second) and RSS are
 * sampled. The pods log when each probe request reached them; from those logs come
 * the interval jitter, missed ticks and how bunched the probes of different pods are.
 * Writes the results as JSON under bench/results/ and prints a markdown table.
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
  berthLauncher,
} from './cluster-prep.ts';
import { observeContention, type Contention } from './contention.ts';
import type { KubeApi, PodList } from './kube-api.ts';
import {
  isReady,
  PROBE_TARGETS,
  probePod,
  readProbeLogs,
  type ProbeTargetKind,
} from './probe-pods.ts';
import {
  alignment,
  coresPerInterval,
  jitter,
  summarizeSeries,
  within,
  type Alignment,
  type CpuSample,
  type JitterSummary,
  type SeriesSummary,
} from './probe-stats.ts';
import { cpuSeconds, memory } from './stats.ts';

const NAMESPACE = 'berth-bench-probes';
const LABEL_RUN = 'bench.berth.dev/run';
const LABEL_PHASE = 'bench.berth.dev/phase';
const podsPath = `/api/v1/namespaces/${NAMESPACE}/pods`;
const READY_TIMEOUT_MS = 900_000;

interface BenchOptions {
  readonly pods: number;
  readonly durationS: number;
  /** Seconds between all pods Ready and the start of the window (start-up work dies down). */
  readonly settleS: number;
  readonly agents: readonly string[];
  /** What serves the probes in the pods and logs their arrival. */
  readonly target: ProbeTargetKind;
  readonly out: string | undefined;
}

interface ProbeKindResult {
  readonly jitter: JitterSummary | null;
  readonly alignment: Alignment;
  /** Requests seen in the window per pod and second; 1 when no tick was lost. */
  readonly perPodPerSecond: number;
}

interface AgentResult {
  readonly agent: string;
  readonly nodeName: string;
  readonly pods: number;
  readonly allReadyMs: number;
  readonly windowS: number;
  readonly machine: Contention;
  /** CPU cores (CPU seconds per second), one sample per second of the window. */
  readonly agentCores: SeriesSummary | null;
  readonly agentRssMiB: SeriesSummary | null;
  readonly runtimeCores: SeriesSummary | null;
  readonly readiness: ProbeKindResult;
  readonly liveness: ProbeKindResult;
  /** Both probes together: the agent's total probe load per slice of the second. */
  readonly allProbes: Alignment;
  /** Sum over pods of container restarts at the end of the window (liveness failures). */
  readonly restarts: number;
  readonly notReadyAtEnd: number;
  readonly logErrors: readonly string[];
}

const log = (message: string): void => {
  console.error(`[bench] ${message}`);
};

function parseOptions(argv: readonly string[]): BenchOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      pods: { type: 'string', default: '100' },
      duration: { type: 'string', default: '300' },
      settle: { type: 'string', default: '10' },
      agents: { type: 'string', default: 'berth,upstream' },
      target: { type: 'string', default: 'server' },
      out: { type: 'string' },
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
    if (AGENTS[a] === undefined) {
      throw new Error(`Cannot benchmark agent ${a}: known are ${Object.keys(AGENTS).join(', ')}`);
    }
  }
  const target = PROBE_TARGETS.find((t) => t === values.target);
  if (target === undefined) {
    throw new Error(
      `Cannot use --target ${values.target}: it must be one of ${PROBE_TARGETS.join(', ')}`,
    );
  }
  return {
    target,
    pods: count('pods', values.pods, 1),
    durationS: count('duration', values.duration, 5),
    settleS: count('settle', values.settle, 0),
    agents,
    out: values.out,
  };
}

async function listPods(api: KubeApi, selector: string): Promise<Pod[]> {
  const query = new URLSearchParams({ labelSelector: selector });
  return (await api.send<PodList>('GET', `${podsPath}?${query.toString()}`)).items;
}

/** Polls the pods once a second until `done(pods)` holds. */
async function waitPods(
  api: KubeApi,
  selector: string,
  what: string,
  done: (pods: Pod[]) => boolean,
  timeoutMs: number,
): Promise<Pod[]> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const pods = await listPods(api, selector);
    if (done(pods)) return pods;
    if (performance.now() > deadline) {
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await sleep(1000);
  }
}

interface Samples {
  readonly agentCpu: CpuSample[];
  readonly runtimeCpu: CpuSample[];
  readonly rssMiB: number[];
}

/** Samples CPU time and RSS every second, on an absolute schedule (no drift), for `seconds`. */
async function sampleWindow(
  agentPid: number | undefined,
  runtimePid: number,
  seconds: number,
): Promise<Samples> {
  const samples: Samples = { agentCpu: [], runtimeCpu: [], rssMiB: [] };
  const t0 = performance.now();
  for (let i = 0; i <= seconds; i++) {
    const wait = t0 + i * 1000 - performance.now();
    if (wait > 0) await sleep(wait);
    const atMs = performance.now();
    samples.runtimeCpu.push({ atMs, cpuSeconds: await cpuSeconds(runtimePid) });
    if (agentPid !== undefined) {
      samples.agentCpu.push({ atMs, cpuSeconds: await cpuSeconds(agentPid) });
      samples.rssMiB.push((await memory(agentPid)).rssMiB);
    }
  }
  return samples;
}

function kindResult(
  timelines: readonly (readonly number[])[],
  pods: number,
  windowS: number,
): ProbeKindResult {
  const probes = timelines.reduce((a, t) => a + t.length, 0);
  return {
    jitter: jitter(timelines),
    alignment: alignment(timelines),
    perPodPerSecond: Math.round((probes / pods / windowS) * 1000) / 1000,
  };
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
  const running = await agent.start(cluster, { maxPods: options.pods, log });
  const phase = `${agentName}-probes`;
  const selector = `${LABEL_RUN}=${run},${LABEL_PHASE}=${phase}`;
  try {
    const { nodeName, pid } = running;
    const names = Array.from({ length: options.pods }, (_, i) => `${phase}-${i}`);
    log(`${agentName}: node ${nodeName} Ready; creating ${options.pods} pods`);
    const t0 = performance.now();
    await Promise.all(
      names.map((name) =>
        api.send(
          'POST',
          podsPath,
          probePod(cluster, {
            name,
            namespace: NAMESPACE,
            nodeName,
            labels: { [LABEL_RUN]: run, [LABEL_PHASE]: phase },
            target: options.target,
          }),
        ),
      ),
    );
    await waitPods(
      api,
      selector,
      `${options.pods} pods to be Ready`,
      (pods) => pods.length === options.pods && pods.every(isReady),
      READY_TIMEOUT_MS,
    );
    const allReadyMs = Math.round(performance.now() - t0);
    log(`${agentName}: all Ready after ${allReadyMs} ms; window of ${options.durationS} s`);
    await sleep(options.settleS * 1000);

    const machine = await observeContention(cluster.root);
    const windowStart = Date.now();
    const samples = await sampleWindow(pid, cluster.runtime.process.pid, options.durationS);
    const windowEnd = Date.now();
    const contention = await machine();
    const windowS = (windowEnd - windowStart) / 1000;

    const pods = await listPods(api, selector);
    const restarts = pods
      .flatMap((p) => p.status?.containerStatuses ?? [])
      .reduce((a, c) => a + c.restartCount, 0);
    const notReady = pods.filter((p) => !isReady(p)).length;
    log(`${agentName}: reading the probe logs`);
    const logs = await readProbeLogs(cluster, NAMESPACE, names, options.target);
    const readiness = logs.map((l) => within(l.readiness, windowStart, windowEnd));
    const liveness = logs.map((l) => within(l.liveness, windowStart, windowEnd));

    await api.send(
      'DELETE',
      `${podsPath}?${new URLSearchParams({ labelSelector: selector }).toString()}`,
    );
    await waitPods(api, selector, 'the pods to be deleted', (p) => p.length === 0, 300_000);
    return {
      agent: agentName,
      nodeName,
      pods: options.pods,
      allReadyMs,
      windowS,
      machine: contention,
      agentCores: summarizeSeries(coresPerInterval(samples.agentCpu)),
      agentRssMiB: summarizeSeries(samples.rssMiB),
      runtimeCores: summarizeSeries(coresPerInterval(samples.runtimeCpu)),
      readiness: kindResult(readiness, options.pods, windowS),
      liveness: kindResult(liveness, options.pods, windowS),
      allProbes: alignment([...readiness, ...liveness]),
      restarts,
      notReadyAtEnd: notReady,
      logErrors: logs.flatMap((l) => (l.error === undefined ? [] : [`${l.pod}: ${l.error}`])),
    };
  } finally {
    await running.stop();
    log(`${agentName}: stopped`);
  }
}

const dash = '—';
const triple = (j: JitterSummary | null): string =>
  j === null ? dash : `${j.p50Ms} / ${j.p95Ms} / ${j.p99Ms}`;
const pct = (share: number): string => `${(share * 100).toFixed(1)} %`;

function table(results: readonly AgentResult[], options: BenchOptions): string {
  const lines = [
    `| agent | ${options.pods} pods: all Ready (s) | agent CPU p50 / p95 / mean (cores) | agent RSS p50 / max (MiB) | readiness jitter p50 / p95 / p99 (ms) | liveness jitter p50 / p95 / p99 (ms) | intervals > 1.5 s (readiness / liveness) | probes per pod-second (readiness / liveness) | max 100 ms bucket share: per second p50 / over window | containerd CPU mean (cores) | restarts |`,
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const a of results) {
    const cpu =
      a.agentCores === null
        ? dash
        : `${a.agentCores.p50} / ${a.agentCores.p95} / ${a.agentCores.mean}`;
    const rss = a.agentRssMiB === null ? dash : `${a.agentRssMiB.p50} / ${a.agentRssMiB.max}`;
    const missed = `${a.readiness.jitter === null ? dash : pct(a.readiness.jitter.missedShare)} / ${a.liveness.jitter === null ? dash : pct(a.liveness.jitter.missedShare)}`;
    lines.push(
      `| ${a.agent} | ${(a.allReadyMs / 1000).toFixed(2)} | ${cpu} | ${rss} | ${triple(a.readiness.jitter)} | ${triple(a.liveness.jitter)} | ${missed} | ${a.readiness.perPodPerSecond} / ${a.liveness.perPodPerSecond} | ${pct(a.allProbes.perPeriodMaxBucketShareP50)} / ${pct(a.allProbes.phaseMaxBucketShare)} | ${a.runtimeCores?.mean ?? dash} | ${a.restarts} |`,
    );
  }
  const busy = results.map(
    (a) =>
      `${a.agent} ${a.machine.machineBusyPercent}% busy, others ${a.machine.otherCpuSeconds} s`,
  );
  lines.push(
    '',
    `Window ${options.durationS} s per agent; probe target ${options.target}. Machine during each window (CPU busy share; CPU seconds of processes outside the cluster): ${busy.join(' | ')}.`,
  );
  return lines.join('\n');
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const run = runName();
  log(
    `run ${run}: ${options.agents.join(', ')}; ${options.pods} pods (${options.target} target), ${options.durationS} s each`,
  );
  const loadAtStart = loadavg();
  const bench = await startBenchCluster(log);
  const { cluster, api } = bench;
  try {
    const client = new GrpcCriClient(cluster.runtime.socket);
    const version = await client.runtime.version({ version: '0.1.0' }).finally(() => {
      client.close();
    });
    await prepareNamespace(api, NAMESPACE);
    const results: AgentResult[] = [];
    for (const name of options.agents) {
      const agent = AGENTS[name];
      if (agent === undefined) continue;
      results.push(await measureAgent(api, cluster, name, agent, options, run));
      const leftover = await clearRuntime(cluster);
      if (leftover > 0) log(`${name} left ${leftover} sandboxes in the runtime`);
    }
    const versions = pinnedVersions();
    const report = {
      benchmark: 'probes',
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
        pods: options.pods,
        durationS: options.durationS,
        settleS: options.settleS,
        agents: options.agents,
        target: options.target,
      },
      berthLauncher: await berthLauncher(),
      agents: results,
    };
    const out = options.out ?? join(REPO_ROOT, 'bench', 'results', `probes-${run}.json`);
    await writeReport(out, report);
    log(`results in ${out}`);
    console.log(table(results, options));
  } finally {
    await stopBenchCluster(bench, log);
  }
}

await main();
