/**
 * The kubelet API path, side by side: each node agent on the same cluster (containerd
 * 2.x), one after another, each as its own node, driven by the real kubectl through the
 * real API server.
 *
 *   node_modules/.bin/node bench/api.ts [--execs 30] [--log-size 64Mi]
 *                                       [--forward-size 64Mi] [--rounds 3] [--passes 1]
 *                                       [--agents berth,upstream] [--out file.json]
 *
 * Per agent: `kubectl exec -- true` `execs` times in a row (round trip p50/p99); per
 * round, `kubectl logs -f` on a container that, once triggered, writes `log-size` of
 * 100-byte lines and a marker (first byte of the follow, then throughput until the
 * marker); per round, `kubectl port-forward` to busybox httpd and one GET of a
 * `forward-size` file through it (throughput). The agent's CPU time per exec and per
 * MiB is read from /proc around each phase. With `passes` > 1 every agent is measured
 * that many times, the order alternating (A B, B A, ...), and its passes pooled. Writes
 * JSON under bench/results/ and prints a markdown table.
 */
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { REPO_ROOT } from '../test/harness/binaries.ts';
import type { Cluster } from '../test/harness/cluster.ts';
import { AGENTS } from './agents.ts';
import {
  benchPods,
  createPods,
  deletePods,
  execOnce,
  followRound,
  forwardRound,
  NAMESPACE,
} from './api-phases.ts';
import {
  cpuMsPer,
  parseBytes,
  passOrder,
  poolPasses,
  type PassSamples,
  positiveInteger,
} from './api-stats.ts';
import {
  clearRuntime,
  prepareNamespace,
  reportHead,
  runName,
  startBenchCluster,
  stopBenchCluster,
  writeReport,
} from './cluster-prep.ts';
import { cpuSeconds, summarize, type Summary } from './stats.ts';

interface Options {
  readonly execs: number;
  readonly logBytes: number;
  readonly forwardBytes: number;
  readonly rounds: number;
  readonly passes: number;
  readonly agents: readonly string[];
  readonly out: string | undefined;
}

interface AgentResult {
  readonly agent: string;
  readonly exec: Summary;
  readonly execCpuMs: number | null;
  readonly logsFirstByte: Summary;
  readonly logsMiBps: readonly (number | null)[];
  readonly logsCpuMsPerMiB: number | null;
  readonly forwardMiBps: readonly (number | null)[];
  readonly forwardCpuMsPerMiB: number | null;
}

const log = (message: string): void => {
  console.error(`[bench] ${message}`);
};

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      execs: { type: 'string', default: '30' },
      'log-size': { type: 'string', default: '64Mi' },
      'forward-size': { type: 'string', default: '64Mi' },
      rounds: { type: 'string', default: '3' },
      passes: { type: 'string', default: '1' },
      agents: { type: 'string', default: 'berth,upstream' },
      out: { type: 'string' },
    },
    strict: true,
  });
  const agents = values.agents.split(',').filter((a) => a !== '');
  for (const a of agents)
    if (AGENTS[a] === undefined)
      throw new Error(`Cannot benchmark agent ${a}: known are ${Object.keys(AGENTS).join(', ')}`);
  return {
    execs: positiveInteger('execs', values.execs),
    logBytes: parseBytes(values['log-size']),
    forwardBytes: parseBytes(values['forward-size']),
    rounds: positiveInteger('rounds', values.rounds),
    passes: positiveInteger('passes', values.passes),
    agents,
    out: values.out,
  };
}

/** One pass of agent `name`: `pass` names its pods apart from the earlier passes' ones. */
async function measure(
  cluster: Cluster,
  name: string,
  pass: number,
  o: Options,
): Promise<PassSamples> {
  const agent = AGENTS[name];
  if (agent === undefined) throw new Error(`Cannot benchmark agent ${name}`);
  const running = await agent.start(cluster, { maxPods: 10, log });
  const pid = running.pid ?? 0;
  const node = running.nodeName;
  const cpu = () => cpuSeconds(pid);
  const prefix = `${name}-${pass}`;
  try {
    await createPods(cluster, benchPods(cluster, node, prefix, o));
    log(`${name} (pass ${pass + 1}): ${o.execs} execs`);
    const execMs: number[] = [];
    const execCpu0 = await cpu();
    for (let i = 0; i < o.execs; i++) execMs.push(await execOnce(cluster, prefix));
    const execCpu = (await cpu()) - execCpu0;
    log(`${name}: ${o.rounds} log follows of ${o.logBytes} bytes`);
    const firstBytes: number[] = [];
    const logsMiBps: (number | null)[] = [];
    const logsCpu0 = await cpu();
    for (let r = 0; r < o.rounds; r++) {
      const got = await followRound(cluster, prefix, r);
      firstBytes.push(got.firstByteMs);
      logsMiBps.push(got.mibps);
    }
    const logsCpu = (await cpu()) - logsCpu0;
    log(`${name}: ${o.rounds} port-forward downloads of ${o.forwardBytes} bytes`);
    const forwardMiBps: (number | null)[] = [];
    const forwardCpu0 = await cpu();
    for (let r = 0; r < o.rounds; r++)
      forwardMiBps.push(await forwardRound(cluster, prefix, o.forwardBytes));
    const forwardCpu = (await cpu()) - forwardCpu0;
    const mib = (bytes: number) => (bytes * o.rounds) / 2 ** 20;
    return {
      execMs,
      execCpuSeconds: execCpu,
      firstByteMs: firstBytes,
      logsMiBps,
      logsCpuSeconds: logsCpu,
      logsMiB: mib(o.logBytes),
      forwardMiBps,
      forwardCpuSeconds: forwardCpu,
      forwardMiB: mib(o.forwardBytes),
    };
  } finally {
    await deletePods(cluster);
    await running.stop();
  }
}

function result(agent: string, passes: readonly PassSamples[]): AgentResult {
  const p = poolPasses(passes);
  return {
    agent,
    exec: summarize(p.execMs),
    execCpuMs: cpuMsPer(p.execCpuSeconds, p.execMs.length),
    logsFirstByte: summarize(p.firstByteMs),
    logsMiBps: p.logsMiBps,
    logsCpuMsPerMiB: cpuMsPer(p.logsCpuSeconds, p.logsMiB),
    forwardMiBps: p.forwardMiBps,
    forwardCpuMsPerMiB: cpuMsPer(p.forwardCpuSeconds, p.forwardMiB),
  };
}

function table(results: readonly AgentResult[], o: Options): string {
  const list = (xs: readonly (number | null)[]) => xs.map((x) => x ?? '—').join(' / ');
  const rows = results.map((r) =>
    [
      r.agent,
      `${r.exec.p50Ms} / ${r.exec.p99Ms}`,
      r.execCpuMs ?? '—',
      `${r.logsFirstByte.p50Ms} / ${r.logsFirstByte.maxMs}`,
      list(r.logsMiBps),
      r.logsCpuMsPerMiB ?? '—',
      list(r.forwardMiBps),
      r.forwardCpuMsPerMiB ?? '—',
    ].join(' | '),
  );
  return [
    `| agent | kubectl exec -- true p50 / p99 (ms, n=${o.execs * o.passes}) | agent CPU per exec (ms) | logs -f first byte p50 / max (ms) | logs -f MiB/s per round | agent CPU per log MiB (ms) | port-forward MiB/s per round | agent CPU per forwarded MiB (ms) |`,
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows.map((r) => `| ${r} |`),
  ].join('\n');
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const runId = runName();
  log(`run ${runId}: ${options.agents.join(', ')}`);
  const loadAtStart = loadavg();
  const bench = await startBenchCluster(log);
  const { cluster, api } = bench;
  try {
    await prepareNamespace(api, NAMESPACE);
    const passes = new Map<string, PassSamples[]>(options.agents.map((a) => [a, []]));
    const order = passOrder(options.agents, options.passes);
    for (const [pass, names] of order.entries()) {
      for (const name of names) {
        passes.get(name)?.push(await measure(cluster, name, pass, options));
        const leftover = await clearRuntime(cluster);
        if (leftover > 0) log(`${name} left ${leftover} sandboxes in the runtime`);
      }
    }
    const results = options.agents.map((a) => result(a, passes.get(a) ?? []));
    const report = {
      ...(await reportHead('api', runId, loadAtStart)),
      options,
      order,
      agents: results,
      passes: Object.fromEntries(passes),
    };
    const out = options.out ?? join(REPO_ROOT, 'bench', 'results', `api-${runId}.json`);
    await writeReport(out, report);
    log(`results in ${out}`);
    console.log(table(results, options));
  } finally {
    await stopBenchCluster(bench, log);
  }
}

await main();
