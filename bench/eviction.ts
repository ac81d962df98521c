/**
 * Node-pressure eviction, side by side: how long after memory.available crosses the
 * hard threshold the pod is Evicted in the API and the Node reports MemoryPressure,
 * berth against the upstream kubelet, one after another on the same cluster, with the
 * same configuration and the same pressure.
 *
 *   node_modules/.bin/node bench/eviction.ts [--runs 3] [--agents berth,upstream] [--out file.json]
 *
 * Each run starts the agent with memory.available armed 2 GiB below what is available
 * then (as test/eviction/ does), waits two quiet monitoring periods, then starts a
 * BestEffort pod holding 1.5 GiB more than the gap. The crossing time is when this
 * process, sampling /proc/meminfo every 20 ms as both agents measure it (MemFree +
 * Inactive(file)), first sees the signal under the threshold; the API is polled every
 * 100 ms (so each figure is up to ~0.1 s late, alike for both). The host must keep 15 GiB
 * available, or the run is refused. OOM kills on the machine during the runs (the
 * kernel's oom_kill counter) must stay 0. Writes JSON under bench/results/ and prints a
 * markdown table.
 */
import { readFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import type { Node, Pod } from 'kubernetes-types/core/v1.js';
import { REPO_ROOT } from '../test/harness/binaries.ts';
import { startBerth } from '../test/harness/berth-node.ts';
import type { Cluster } from '../test/harness/cluster.ts';
import { applyJson, busyboxPod, eventually, getJson } from '../test/harness/kube-helpers.ts';
import { startUpstreamKubelet } from '../test/harness/upstream-kubelet.ts';
import { Gi, Mi, meminfo, memoryAvailable, miText } from '../test/eviction/pressure.ts';
import {
  clearRuntime,
  reportHead,
  runName,
  startBenchCluster,
  stopBenchCluster,
  writeReport,
} from './cluster-prep.ts';
import { positiveInteger } from './api-stats.ts';
import { summarize, type Summary } from './stats.ts';

const log = (message: string): void => {
  console.error(`[bench] ${message}`);
};

/** Settings both agents run with (besides the armed threshold). */
const TRANSITION = '30s';
const STATUS_FREQUENCY = '2s';

interface Started {
  readonly nodeName: string;
  stop(): Promise<void>;
}

type AgentName = 'berth' | 'upstream';

async function startAgent(
  cluster: Cluster,
  agent: AgentName,
  threshold: string,
  run: number,
): Promise<Started> {
  const nodeName = `evict-${agent}-${run}`;
  const cgroupRoot = `${cluster.state.cgroupRoot}/${nodeName}`;
  if (agent === 'upstream') {
    const k = await startUpstreamKubelet(cluster, {
      nodeName,
      cgroupRoot,
      log,
      config: {
        evictionHard: {
          'memory.available': threshold,
          'nodefs.available': '1%',
          'nodefs.inodesFree': '1%',
          'imagefs.available': '1%',
          'imagefs.inodesFree': '1%',
        },
        evictionPressureTransitionPeriod: TRANSITION,
        nodeStatusUpdateFrequency: STATUS_FREQUENCY,
      },
    });
    return { nodeName, stop: () => k.stop() };
  }
  const b = await startBerth(cluster, {
    nodeName,
    cgroupRoot,
    extraConfig: [
      'evictionHard:',
      `  memory.available: "${threshold}"`,
      '  nodefs.available: "1%"',
      '  nodefs.inodesFree: "1%"',
      '  imagefs.available: "1%"',
      '  imagefs.inodesFree: "1%"',
      `evictionPressureTransitionPeriod: ${TRANSITION}`,
      `nodeStatusUpdateFrequency: ${STATUS_FREQUENCY}`,
    ],
  });
  return { nodeName, stop: () => b.stop() };
}

async function oomKills(): Promise<number> {
  const text = await readFile('/proc/vmstat', 'utf8');
  return Number(/^oom_kill (\d+)$/m.exec(text)?.[1] ?? 0);
}

const pressure = (n: Node | undefined): string | undefined =>
  n?.status?.conditions?.find((c) => c.type === 'MemoryPressure')?.status;

interface RunResult {
  readonly agent: AgentName;
  readonly threshold: string;
  readonly hogBytes: number;
  /** From the crossing seen here to the pod's Failed/Evicted status in the API. */
  readonly evictedMs: number;
  /** From the crossing to MemoryPressure=True on the Node. */
  readonly conditionMs: number;
}

async function oneRun(cluster: Cluster, agent: AgentName, run: number): Promise<RunResult> {
  const thresholdMi = Math.floor(((await memoryAvailable()) - 2 * Gi) / Mi);
  const threshold = miText(thresholdMi);
  const thresholdBytes = Number.parseInt(threshold, 10) * Mi;
  const started = await startAgent(cluster, agent, threshold, run);
  try {
    await eventually(
      `${started.nodeName} Ready`,
      async () => {
        const n = await getJson<Node>(cluster, ['get', 'node', started.nodeName]);
        const ready = n?.status?.conditions?.find((c) => c.type === 'Ready')?.status;
        return ready === 'True' ? true : undefined;
      },
      120_000,
    );
    await sleep(25_000);
    const node = await getJson<Node>(cluster, ['get', 'node', started.nodeName]);
    if (pressure(node) !== 'False')
      throw new Error(`${started.nodeName} reports MemoryPressure before the pressure`);
    const hogBytes = Math.ceil(((await memoryAvailable()) - thresholdBytes + 1.5 * Gi) / Mi) * Mi;
    if ((await meminfo('MemAvailable')) - hogBytes < 15 * Gi)
      throw new Error(`a ${hogBytes}-byte pod would leave the host under 15 GiB`);
    const name = `hog-${agent}-${run}`;
    const chunks = Math.ceil(hogBytes / (512 * Mi));
    const one = `(head -c ${512 * Mi} /dev/zero; sleep 3600) | tail`;
    await applyJson(
      cluster,
      busyboxPod(cluster, name, started.nodeName, {
        command: [
          'sh',
          '-c',
          `i=0; while [ $i -lt ${chunks} ]; do ${one} & i=$((i+1)); done; wait`,
        ],
      }),
    );
    let crossed: number | undefined;
    let evicted: number | undefined;
    let condition: number | undefined;
    const deadline = performance.now() + 180_000;
    const sampler = (async () => {
      while (crossed === undefined && performance.now() < deadline) {
        if ((await memoryAvailable()) < thresholdBytes) crossed = performance.now();
        else await sleep(20);
      }
    })();
    while ((evicted === undefined || condition === undefined) && performance.now() < deadline) {
      const [pod, n] = await Promise.all([
        evicted === undefined ? getJson<Pod>(cluster, ['get', 'pod', name]) : undefined,
        condition === undefined
          ? getJson<Node>(cluster, ['get', 'node', started.nodeName])
          : undefined,
      ]);
      const now = performance.now();
      if (evicted === undefined && pod?.status?.phase === 'Failed') {
        if (pod.status.reason !== 'Evicted')
          throw new Error(`${name} failed with ${pod.status.reason ?? '?'}, not Evicted`);
        evicted = now;
      }
      if (condition === undefined && pressure(n) === 'True') condition = now;
      await sleep(100);
    }
    await sampler;
    if (crossed === undefined || evicted === undefined || condition === undefined)
      throw new Error(`${agent} run ${run}: no crossing, eviction or condition within 180 s`);
    log(
      `${agent} run ${run}: evicted ${Math.round(evicted - crossed)} ms, MemoryPressure ${Math.round(condition - crossed)} ms after the crossing`,
    );
    return {
      agent,
      threshold,
      hogBytes,
      evictedMs: evicted - crossed,
      conditionMs: condition - crossed,
    };
  } finally {
    await cluster
      .kubectl(['delete', 'pods', '--all', '--grace-period=0', '--force'])
      .catch(() => '');
    await started.stop();
    await clearRuntime(cluster);
    await cluster.kubectl(['delete', 'node', started.nodeName]).catch(() => '');
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '3' },
      agents: { type: 'string', default: 'berth,upstream' },
      out: { type: 'string' },
    },
  });
  const runs = positiveInteger('runs', values.runs);
  const agents = values.agents.split(',').map((a) => {
    if (a !== 'berth' && a !== 'upstream') throw new Error(`unknown agent ${a}`);
    return a;
  });
  const name = runName();
  const loadAtStart = loadavg();
  const oomBefore = await oomKills();
  const bench = await startBenchCluster(log);
  const results: RunResult[] = [];
  try {
    // Alternating, so a slow stretch of the machine does not land on one agent only.
    for (let run = 1; run <= runs; run++)
      for (const agent of agents) results.push(await oneRun(bench.cluster, agent, run));
  } finally {
    await stopBenchCluster(bench, log);
  }
  const oomDuring = (await oomKills()) - oomBefore;
  const per: Record<string, { evicted: Summary; condition: Summary }> = {};
  for (const agent of agents) {
    const mine = results.filter((r) => r.agent === agent);
    per[agent] = {
      evicted: summarize(mine.map((r) => r.evictedMs)),
      condition: summarize(mine.map((r) => r.conditionMs)),
    };
  }
  const out = values.out ?? join(REPO_ROOT, 'bench', 'results', `eviction-${name}.json`);
  await writeReport(out, {
    ...(await reportHead('eviction', name, loadAtStart)),
    settings: {
      threshold: 'memory.available = available at the run start - 2 GiB',
      pressure: '1.5 GiB past the threshold',
      evictionPressureTransitionPeriod: TRANSITION,
      nodeStatusUpdateFrequency: STATUS_FREQUENCY,
    },
    oomKillsDuringRuns: oomDuring,
    runs: results,
    summary: per,
  });
  const ms = (s: Summary): string =>
    `${(s.p50Ms / 1000).toFixed(1)} s (max ${(s.maxMs / 1000).toFixed(1)})`;
  console.log(`| agent | crossing -> pod Evicted, p50 | crossing -> MemoryPressure, p50 |`);
  console.log(`| --- | --- | --- |`);
  for (const [agent, s] of Object.entries(per))
    console.log(`| ${agent} | ${ms(s.evicted)} | ${ms(s.condition)} |`);
  console.log(`\nOOM kills on the machine during the runs: ${oomDuring}. Results: ${out}`);
  if (oomDuring !== 0) process.exitCode = 1;
}

await main();
