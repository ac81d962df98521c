/**
 * The kubelet API path, paired: berth and the upstream kubelet run at the same time as
 * two nodes of one cluster, each on its own containerd 2.x (same build, same
 * configuration), and every measurement alternates between them (berth then upstream,
 * upstream then berth, ...). Each pair shares the machine's state of that moment, so
 * drift (load, caches, the API server's own work) falls on both alike, and the
 * difference is read pair by pair: its median and a distribution-free 95 % interval.
 *
 *   node_modules/.bin/node bench/api-paired.ts [--execs 100] [--direct-execs 200]
 *                                              [--first-bytes 100]
 *                                              [--log-size 16Mi] [--forward-size 64Mi]
 *                                              [--rounds 6] [--idle-seconds 20]
 *                                              [--swap] [--out file.json]
 *
 * Phases: `execs` exec pairs; `direct-execs` pairs of the same exec sent straight to
 * each agent (api-exec-direct.ts), without kubectl and the API server; `first-bytes`
 * pairs of `kubectl logs -f` on a pod that printed one line (time to kubectl's first
 * byte); `rounds` pairs of a fast writer followed to its end (throughput); `rounds`
 * port-forward download pairs. `--swap`
 * gives berth the second containerd and upstream the cluster's, to show the runtimes
 * do not favour one side. The agents' CPU per operation is read from /proc around each
 * phase, less what each used idle (measured first, over `idle-seconds`).
 */
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { REPO_ROOT } from '../test/harness/binaries.ts';
import { AGENTS, type RunningAgent } from './agents.ts';
import {
  benchPods,
  createPods,
  deletePods,
  execOnce,
  firstByteOnce,
  followRound,
  forwardRound,
  NAMESPACE,
} from './api-phases.ts';
import {
  cpuMsPer,
  pairedDifference,
  parseBytes,
  type PairedDifference,
  positiveInteger,
} from './api-stats.ts';
import {
  prepareNamespace,
  reportHead,
  runName,
  startBenchCluster,
  stopBenchCluster,
  writeReport,
} from './cluster-prep.ts';
import { directExecOnce, directExecTarget, type DirectExecTimes } from './api-exec-direct.ts';
import { startExtraRuntime } from './runtimes.ts';
import { cpuSeconds, summarize, type Summary } from './stats.ts';

const SIDES = ['berth', 'upstream'] as const;
type Side = (typeof SIDES)[number];

interface Options {
  readonly execs: number;
  readonly directExecs: number;
  readonly logBytes: number;
  readonly forwardBytes: number;
  readonly rounds: number;
  readonly firstBytes: number;
  readonly idleSeconds: number;
  readonly swap: boolean;
  readonly out: string | undefined;
}

const log = (message: string): void => {
  console.error(`[bench] ${message}`);
};

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      execs: { type: 'string', default: '100' },
      'direct-execs': { type: 'string', default: '200' },
      'log-size': { type: 'string', default: '16Mi' },
      'forward-size': { type: 'string', default: '64Mi' },
      rounds: { type: 'string', default: '6' },
      'first-bytes': { type: 'string', default: '100' },
      'idle-seconds': { type: 'string', default: '20' },
      swap: { type: 'boolean', default: false },
      out: { type: 'string' },
    },
    strict: true,
  });
  return {
    execs: positiveInteger('execs', values.execs),
    directExecs: positiveInteger('direct-execs', values['direct-execs']),
    logBytes: parseBytes(values['log-size']),
    forwardBytes: parseBytes(values['forward-size']),
    rounds: positiveInteger('rounds', values.rounds),
    firstBytes: positiveInteger('first-bytes', values['first-bytes']),
    idleSeconds: positiveInteger('idle-seconds', values['idle-seconds']),
    swap: values.swap,
    out: values.out,
  };
}

/** Both sides' samples, index i of one taken right next to index i of the other. */
type Paired<T> = Record<Side, T[]>;

const paired = <T>(): Paired<T> => ({ berth: [], upstream: [] });

/** Runs `measure` once per side, the order alternating with `i`; collects into `into`. */
async function alternate<T>(
  i: number,
  into: Paired<T>,
  measure: (side: Side) => Promise<T>,
): Promise<void> {
  const order: readonly Side[] = i % 2 === 0 ? SIDES : [...SIDES].reverse();
  for (const side of order) into[side].push(await measure(side));
}

/** CPU seconds each side used over `phase`, less its idle rate over the same time. */
async function busyCpu(
  pids: Record<Side, number>,
  idlePerSecond: Record<Side, number>,
  phase: () => Promise<void>,
): Promise<Record<Side, number>> {
  const before = { berth: await cpuSeconds(pids.berth), upstream: await cpuSeconds(pids.upstream) };
  const t0 = performance.now();
  await phase();
  const seconds = (performance.now() - t0) / 1000;
  const busy = async (side: Side) =>
    (await cpuSeconds(pids[side])) - before[side] - idlePerSecond[side] * seconds;
  return { berth: await busy('berth'), upstream: await busy('upstream') };
}

interface SideResult {
  readonly exec: Summary;
  readonly execCpuMs: number | null;
  readonly directExec: Summary;
  readonly directUpgrade: Summary;
  readonly directStatus: Summary;
  readonly directExecCpuMs: number | null;
  readonly logsFirstByte: Summary;
  readonly logsMiBps: readonly (number | null)[];
  readonly logsCpuMsPerMiB: number | null;
  readonly forwardMiBps: readonly (number | null)[];
  readonly forwardCpuMsPerMiB: number | null;
  readonly idleCpuCores: number;
}

/** berth − upstream, pair by pair; throughputs only where both rounds gave one. */
interface Differences {
  readonly execMs: PairedDifference;
  readonly directExecMs: PairedDifference;
  readonly directUpgradeMs: PairedDifference;
  readonly directStatusMs: PairedDifference;
  readonly logsFirstByteMs: PairedDifference;
  readonly logsMiBps: PairedDifference | null;
  readonly forwardMiBps: PairedDifference | null;
}

function throughputDifference(x: Paired<number | null>): PairedDifference | null {
  const keep = x.berth.flatMap((b, i) => {
    const u = x.upstream[i];
    return b === null || u === null || u === undefined ? [] : [[b, u] as const];
  });
  if (keep.length === 0) return null;
  return pairedDifference(
    keep.map(([b]) => b),
    keep.map(([, u]) => u),
  );
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const runId = runName();
  log(`run ${runId}: berth and upstream side by side${o.swap ? ' (runtimes swapped)' : ''}`);
  const loadAtStart = loadavg();
  const bench = await startBenchCluster(log);
  const { cluster, api } = bench;
  const agents: RunningAgent[] = [];
  try {
    await prepareNamespace(api, NAMESPACE);
    log('a second containerd');
    const second = await startExtraRuntime(cluster, 'u');
    const sockets: Record<Side, string> = o.swap
      ? { berth: second.runtime.socket, upstream: cluster.runtime.socket }
      : { berth: cluster.runtime.socket, upstream: second.runtime.socket };
    const running = {} as Record<Side, RunningAgent>;
    for (const side of SIDES) {
      const agent = AGENTS[side];
      if (agent === undefined) throw new Error(`Cannot benchmark agent ${side}`);
      running[side] = await agent.start(cluster, {
        maxPods: 10,
        log,
        runtimeSocket: sockets[side],
      });
      agents.push(running[side]);
    }
    const pids = { berth: running.berth.pid ?? 0, upstream: running.upstream.pid ?? 0 };
    await createPods(cluster, [
      ...benchPods(cluster, running.berth.nodeName, 'berth', o),
      ...benchPods(cluster, running.upstream.nodeName, 'upstream', o),
    ]);
    log(`both agents' pods are Ready; ${o.idleSeconds} s idle`);
    const idle0 = {
      berth: await cpuSeconds(pids.berth),
      upstream: await cpuSeconds(pids.upstream),
    };
    await sleep(o.idleSeconds * 1000);
    const idlePerSecond = {
      berth: ((await cpuSeconds(pids.berth)) - idle0.berth) / o.idleSeconds,
      upstream: ((await cpuSeconds(pids.upstream)) - idle0.upstream) / o.idleSeconds,
    };
    // One exec each first: connections and caches warm, not counted.
    for (const side of SIDES) await execOnce(cluster, side);

    log(`${o.execs} exec pairs`);
    const execMs = paired<number>();
    const execCpu = await busyCpu(pids, idlePerSecond, async () => {
      for (let i = 0; i < o.execs; i++) await alternate(i, execMs, (s) => execOnce(cluster, s));
    });
    log(`${o.directExecs} direct exec pairs`);
    const targets = {
      berth: await directExecTarget(cluster, running.berth.nodeName, 'berth'),
      upstream: await directExecTarget(cluster, running.upstream.nodeName, 'upstream'),
    };
    for (const side of SIDES) await directExecOnce(targets[side]);
    const direct = paired<DirectExecTimes>();
    const directExecCpu = await busyCpu(pids, idlePerSecond, async () => {
      for (let i = 0; i < o.directExecs; i++)
        await alternate(i, direct, (s) => directExecOnce(targets[s]));
    });
    const directExecMs = {
      berth: direct.berth.map((d) => d.totalMs),
      upstream: direct.upstream.map((d) => d.totalMs),
    };
    const directStatusMs = {
      berth: direct.berth.map((d) => d.statusMs),
      upstream: direct.upstream.map((d) => d.statusMs),
    };
    const directUpgradeMs = {
      berth: direct.berth.map((d) => d.upgradeMs),
      upstream: direct.upstream.map((d) => d.upgradeMs),
    };
    log(`${o.firstBytes} logs -f first-byte pairs`);
    const firstByteMs = paired<number>();
    for (let i = 0; i < o.firstBytes; i++)
      await alternate(i, firstByteMs, (s) => firstByteOnce(cluster, s));
    log(`${o.rounds} log follow pairs of ${o.logBytes} bytes`);
    const follows = paired<{ firstByteMs: number; mibps: number | null }>();
    const logsCpu = await busyCpu(pids, idlePerSecond, async () => {
      for (let r = 0; r < o.rounds; r++)
        await alternate(r, follows, (s) => followRound(cluster, s, r));
    });
    log(`${o.rounds} port-forward pairs of ${o.forwardBytes} bytes`);
    const forwards = paired<number | null>();
    const forwardCpu = await busyCpu(pids, idlePerSecond, async () => {
      for (let r = 0; r < o.rounds; r++)
        await alternate(r, forwards, (s) => forwardRound(cluster, s, o.forwardBytes));
    });

    const mib = (bytes: number) => (bytes * o.rounds) / 2 ** 20;
    const sideResult = (s: Side): SideResult => ({
      exec: summarize(execMs[s]),
      execCpuMs: cpuMsPer(execCpu[s], o.execs),
      directExec: summarize(directExecMs[s]),
      directUpgrade: summarize(directUpgradeMs[s]),
      directStatus: summarize(directStatusMs[s]),
      directExecCpuMs: cpuMsPer(directExecCpu[s], o.directExecs),
      logsFirstByte: summarize(firstByteMs[s]),
      logsMiBps: follows[s].map((f) => f.mibps),
      logsCpuMsPerMiB: cpuMsPer(logsCpu[s], mib(o.logBytes)),
      forwardMiBps: forwards[s],
      forwardCpuMsPerMiB: cpuMsPer(forwardCpu[s], mib(o.forwardBytes)),
      idleCpuCores: Math.round(idlePerSecond[s] * 1000) / 1000,
    });
    const results = { berth: sideResult('berth'), upstream: sideResult('upstream') };
    const differences: Differences = {
      execMs: pairedDifference(execMs.berth, execMs.upstream),
      directExecMs: pairedDifference(directExecMs.berth, directExecMs.upstream),
      directUpgradeMs: pairedDifference(directUpgradeMs.berth, directUpgradeMs.upstream),
      directStatusMs: pairedDifference(directStatusMs.berth, directStatusMs.upstream),
      logsFirstByteMs: pairedDifference(firstByteMs.berth, firstByteMs.upstream),
      logsMiBps: throughputDifference({
        berth: follows.berth.map((f) => f.mibps),
        upstream: follows.upstream.map((f) => f.mibps),
      }),
      forwardMiBps: throughputDifference(forwards),
    };
    const report = {
      ...(await reportHead('api-paired', runId, loadAtStart)),
      options: o,
      runtimes: sockets,
      agents: results,
      berthMinusUpstream: differences,
      samples: {
        execMs,
        directExecMs,
        directUpgradeMs,
        directStatusMs,
        firstByteMs,
        follows,
        forwards,
      },
    };
    const out = o.out ?? join(REPO_ROOT, 'bench', 'results', `api-paired-${runId}.json`);
    await writeReport(out, report);
    log(`results in ${out}`);
    console.log(table(results, differences, o));
  } finally {
    await deletePods(cluster).catch(() => undefined);
    for (const a of agents) await a.stop();
    await stopBenchCluster(bench, log);
  }
}

function table(r: Record<Side, SideResult>, d: Differences, o: Options): string {
  const diff = (x: PairedDifference | null): string =>
    x === null
      ? '—'
      : `${x.median} [${x.ci95 === null ? '—' : x.ci95.join(', ')}], berth lower in ${x.aLower}/${x.n}`;
  const list = (xs: readonly (number | null)[]) => xs.map((x) => x ?? '—').join(' / ');
  return [
    `| measure | berth | upstream | berth − upstream: median [95 % interval], pairs |`,
    '| --- | --- | --- | --- |',
    `| kubectl exec -- true p50 / p99 (ms, n=${o.execs}) | ${r.berth.exec.p50Ms} / ${r.berth.exec.p99Ms} | ${r.upstream.exec.p50Ms} / ${r.upstream.exec.p99Ms} | ${diff(d.execMs)} |`,
    `| agent CPU per exec, idle removed (ms) | ${r.berth.execCpuMs ?? '—'} | ${r.upstream.execCpuMs ?? '—'} | |`,
    `| exec straight to the agent p50 / p99 (ms, n=${o.directExecs}) | ${r.berth.directExec.p50Ms} / ${r.berth.directExec.p99Ms} | ${r.upstream.directExec.p50Ms} / ${r.upstream.directExec.p99Ms} | ${diff(d.directExecMs)} |`,
    `| its 101 p50 / p99 (ms) | ${r.berth.directUpgrade.p50Ms} / ${r.berth.directUpgrade.p99Ms} | ${r.upstream.directUpgrade.p50Ms} / ${r.upstream.directUpgrade.p99Ms} | ${diff(d.directUpgradeMs)} |`,
    `| its exit status p50 / p99 (ms) | ${r.berth.directStatus.p50Ms} / ${r.berth.directStatus.p99Ms} | ${r.upstream.directStatus.p50Ms} / ${r.upstream.directStatus.p99Ms} | ${diff(d.directStatusMs)} |`,
    `| agent CPU per direct exec, idle removed (ms) | ${r.berth.directExecCpuMs ?? '—'} | ${r.upstream.directExecCpuMs ?? '—'} | |`,
    `| logs -f first byte p50 / p99 (ms, n=${o.firstBytes}) | ${r.berth.logsFirstByte.p50Ms} / ${r.berth.logsFirstByte.p99Ms} | ${r.upstream.logsFirstByte.p50Ms} / ${r.upstream.logsFirstByte.p99Ms} | ${diff(d.logsFirstByteMs)} |`,
    `| logs -f MiB/s per round | ${list(r.berth.logsMiBps)} | ${list(r.upstream.logsMiBps)} | ${diff(d.logsMiBps)} |`,
    `| agent CPU per log MiB (ms) | ${r.berth.logsCpuMsPerMiB ?? '—'} | ${r.upstream.logsCpuMsPerMiB ?? '—'} | |`,
    `| port-forward MiB/s per round | ${list(r.berth.forwardMiBps)} | ${list(r.upstream.forwardMiBps)} | ${diff(d.forwardMiBps)} |`,
    `| agent CPU per forwarded MiB (ms) | ${r.berth.forwardCpuMsPerMiB ?? '—'} | ${r.upstream.forwardCpuMsPerMiB ?? '—'} | |`,
    `| idle CPU (cores) | ${r.berth.idleCpuCores} | ${r.upstream.idleCpuCores} | |`,
  ].join('\n');
}

await main();
