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
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { REPO_ROOT } from '../test/harness/binaries.ts';
import type { Cluster } from '../test/harness/cluster.ts';
import { run } from '../test/harness/exec.ts';
import { AGENTS } from './agents.ts';
import {
  cpuMsPer,
  forwardedPort,
  MarkerScanner,
  mibPerSecond,
  parseBytes,
  passOrder,
  poolPasses,
  type PassSamples,
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

const NAMESPACE = 'berth-bench-api';
const MARKER = 'BENCH-END-OF-LOG';

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
  const count = (name: string, text: string): number => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1)
      throw new Error(`Cannot use --${name} ${text}: it must be an integer >= 1`);
    return n;
  };
  const agents = values.agents.split(',').filter((a) => a !== '');
  for (const a of agents)
    if (AGENTS[a] === undefined)
      throw new Error(`Cannot benchmark agent ${a}: known are ${Object.keys(AGENTS).join(', ')}`);
  return {
    execs: count('execs', values.execs),
    logBytes: parseBytes(values['log-size']),
    forwardBytes: parseBytes(values['forward-size']),
    rounds: count('rounds', values.rounds),
    passes: count('passes', values.passes),
    agents,
    out: values.out,
  };
}

function pod(cluster: Cluster, name: string, node: string, script: string): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NAMESPACE },
    spec: {
      nodeName: node,
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'main',
          image: cluster.images.busyboxLocal,
          imagePullPolicy: 'Never',
          command: ['sh', '-c', script],
        },
      ],
    },
  };
}

const kubectlArgs = (cluster: Cluster, args: readonly string[]): string[] => [
  '--kubeconfig',
  cluster.adminKubeconfig,
  '-n',
  NAMESPACE,
  ...args,
];

interface Followed {
  /** From the spawn of kubectl to its first stdout byte. */
  readonly firstByteMs: number;
  readonly scanner: MarkerScanner;
  /** When each stdout chunk arrived (performance.now()) and the bytes before it. */
  readonly chunks: readonly { readonly at: number; readonly offset: number }[];
  readonly endMs: number;
}

/** Spawns kubectl; resolves once `MARKER` has been printed. */
function follow(
  cluster: Cluster,
  args: readonly string[],
  onFirstByte: () => void,
): Promise<Followed> {
  const child = spawn(cluster.bin.kubectl, kubectlArgs(cluster, args), {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const started = performance.now();
  const scanner = new MarkerScanner(MARKER);
  let firstByteMs = -1;
  const chunks: { at: number; offset: number }[] = [];
  return new Promise<Followed>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      const at = performance.now();
      chunks.push({ at, offset: scanner.bytes });
      if (firstByteMs < 0) {
        firstByteMs = at - started;
        onFirstByte();
      }
      if (scanner.push(chunk)) {
        resolve({ firstByteMs, scanner, chunks, endMs: at });
        child.kill('SIGTERM');
      }
    });
    child.on('exit', (code) => {
      reject(new Error(`kubectl ${args.join(' ')} exited (${String(code)}) before the marker`));
    });
  });
}

/** GETs http://127.0.0.1:port/big; the bytes and milliseconds it took. */
function download(port: number): Promise<{ bytes: number; ms: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request({ host: '127.0.0.1', port, path: '/big' }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => (bytes += c.length));
      res.on('end', () => {
        resolve({ bytes, ms: performance.now() - started });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
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
    const logger = (r: number) =>
      pod(
        cluster,
        `${prefix}-logs-${r}`,
        node,
        `echo ready; while [ ! -e /tmp/go ]; do sleep 0.05; done; ` +
          `head -c ${o.logBytes} /dev/zero | tr '\\0' a | fold -w 99; echo ${MARKER}; sleep 3600`,
      );
    const pods = [
      pod(cluster, `${prefix}-exec`, node, 'sleep 3600'),
      pod(
        cluster,
        `${prefix}-web`,
        node,
        `mkdir -p /www; head -c ${o.forwardBytes} /dev/zero > /www/big; echo up; httpd -f -p 8080 -h /www`,
      ),
      ...Array.from({ length: o.rounds }, (_, r) => logger(r)),
    ];
    await run(cluster.bin.kubectl, kubectlArgs(cluster, ['apply', '-f', '-']), {
      input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: pods }),
    });
    await run(
      cluster.bin.kubectl,
      kubectlArgs(cluster, ['wait', '--for=condition=Ready', 'pod', '--all', '--timeout=180s']),
      { timeoutMs: 200_000 },
    );
    log(`${name} (pass ${pass + 1}): ${o.execs} execs`);
    const execMs: number[] = [];
    const execCpu0 = await cpu();
    for (let i = 0; i < o.execs; i++) {
      const t = performance.now();
      await run(
        cluster.bin.kubectl,
        kubectlArgs(cluster, ['exec', `${prefix}-exec`, '--', 'true']),
      );
      execMs.push(performance.now() - t);
    }
    const execCpu = (await cpu()) - execCpu0;
    log(`${name}: ${o.rounds} log follows of ${o.logBytes} bytes`);
    const firstBytes: number[] = [];
    const logsMiBps: (number | null)[] = [];
    const logsCpu0 = await cpu();
    for (let r = 0; r < o.rounds; r++) {
      const podName = `${prefix}-logs-${r}`;
      let sawFirst: () => void = () => undefined;
      const first = new Promise<void>((resolve) => (sawFirst = resolve));
      const f = follow(cluster, ['logs', '-f', podName], () => {
        sawFirst();
      });
      await first;
      const trigger = performance.now();
      await run(
        cluster.bin.kubectl,
        kubectlArgs(cluster, ['exec', podName, '--', 'touch', '/tmp/go']),
      );
      const { firstByteMs, scanner, chunks, endMs } = await f;
      firstBytes.push(firstByteMs);
      // From the first byte of the bulk (the first chunk after the trigger) to the marker,
      // so the trigger's own exec round trip is not counted.
      const bulk = chunks.find((c) => c.at > trigger) ?? { at: trigger, offset: 0 };
      logsMiBps.push(mibPerSecond((scanner.bytesBefore ?? 0) - bulk.offset, endMs - bulk.at));
    }
    const logsCpu = (await cpu()) - logsCpu0;
    log(`${name}: ${o.rounds} port-forward downloads of ${o.forwardBytes} bytes`);
    const forwardMiBps: (number | null)[] = [];
    const forwardCpu0 = await cpu();
    for (let r = 0; r < o.rounds; r++) {
      const child = spawn(
        cluster.bin.kubectl,
        kubectlArgs(cluster, ['port-forward', `pod/${prefix}-web`, ':8080']),
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      try {
        const port = await new Promise<number>((resolve, reject) => {
          let out = '';
          child.stdout.on('data', (c: Buffer) => {
            out += c.toString();
            const p = forwardedPort(out);
            if (p !== undefined) resolve(p);
          });
          child.on('exit', () => {
            reject(new Error(`kubectl port-forward exited: ${out}`));
          });
        });
        const got = await download(port);
        if (got.bytes !== o.forwardBytes)
          throw new Error(`port-forward moved ${got.bytes} bytes, not ${o.forwardBytes}`);
        forwardMiBps.push(mibPerSecond(got.bytes, got.ms));
      } finally {
        child.kill('SIGTERM');
      }
    }
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
    await run(
      cluster.bin.kubectl,
      kubectlArgs(cluster, [
        'delete',
        'pods',
        '--all',
        '--grace-period=0',
        '--force',
        '--wait=false',
      ]),
      { okCodes: [0, 1] },
    );
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
