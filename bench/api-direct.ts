/**
 * The kubelet API's own answer time, side by side: each node agent on the same cluster,
 * one after another, asked directly on its port with the API server's kubelet client
 * certificate, so kubectl and the API server (most of a kubectl round trip, and most of
 * its noise on this machine) are left out.
 *
 *   node_modules/.bin/node bench/api-direct.ts [--requests 200] [--agents berth,upstream]
 *                                              [--out file.json]
 *
 * Per agent, with one running pod: GET /containerLogs/{ns}/{pod}/{container} on a
 * kept-alive connection (as the API server sends logs requests) and on a new one each
 * time (TLS handshake included, as for every exec and follow), and GET /healthz on a new
 * connection (the handshake alone, nearly). Time to the first body byte, p50/p90/p99.
 * Writes JSON under bench/results/ and prints a markdown table.
 */
import { readFile } from 'node:fs/promises';
import { Agent, request } from 'node:https';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { REPO_ROOT } from '../test/harness/binaries.ts';
import type { Cluster } from '../test/harness/cluster.ts';
import { run } from '../test/harness/exec.ts';
import { AGENTS } from './agents.ts';
import { busyboxPod } from './api-phases.ts';
import { positiveInteger } from './api-stats.ts';
import {
  clearRuntime,
  prepareNamespace,
  reportHead,
  runName,
  startBenchCluster,
  stopBenchCluster,
  writeReport,
} from './cluster-prep.ts';
import { summarize, type Summary } from './stats.ts';

const NAMESPACE = 'berth-bench-api-direct';
/** Requests sent before measuring, so neither agent pays for its first ones. */
const WARMUP = 10;

const log = (message: string): void => {
  console.error(`[bench] ${message}`);
};

interface Case {
  readonly name: string;
  readonly path: (pod: string) => string;
  readonly keepAlive: boolean;
}

const CASES: readonly Case[] = [
  {
    name: 'logs, kept-alive connection',
    path: (pod) => `/containerLogs/${NAMESPACE}/${pod}/main`,
    keepAlive: true,
  },
  {
    name: 'logs, new connection',
    path: (pod) => `/containerLogs/${NAMESPACE}/${pod}/main`,
    keepAlive: false,
  },
  { name: 'healthz, new connection', path: () => '/healthz', keepAlive: false },
];

interface Credentials {
  readonly key: Buffer;
  readonly cert: Buffer;
}

/** Milliseconds to the first byte of the body; rejects on anything but a 200. */
function firstByte(port: number, path: string, creds: Credentials, agent: Agent | false) {
  return new Promise<number>((resolve, reject) => {
    const started = performance.now();
    const req = request(
      { host: '127.0.0.1', port, path, ...creds, rejectUnauthorized: false, agent },
      (res) => {
        let at = -1;
        res.on('data', () => {
          if (at < 0) at = performance.now() - started;
        });
        res.on('end', () => {
          if (res.statusCode === 200 && at >= 0) resolve(at);
          else reject(new Error(`GET ${path}: ${String(res.statusCode)} with no body`));
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function measure(
  cluster: Cluster,
  name: string,
  requests: number,
): Promise<{ agent: string; cases: Record<string, Summary> }> {
  const agent = AGENTS[name];
  if (agent === undefined) throw new Error(`Cannot benchmark agent ${name}`);
  const running = await agent.start(cluster, { maxPods: 10, log });
  const kubectl = (args: readonly string[], input?: string) =>
    run(
      cluster.bin.kubectl,
      ['--kubeconfig', cluster.adminKubeconfig, '-n', NAMESPACE, ...args],
      input === undefined ? {} : { input },
    );
  try {
    const pod = `${name}-logs`;
    await kubectl(
      ['apply', '-f', '-'],
      JSON.stringify(
        busyboxPod(cluster, pod, running.nodeName, 'echo ready; sleep 3600', NAMESPACE),
      ),
    );
    await kubectl(['wait', '--for=condition=Ready', `pod/${pod}`, '--timeout=120s']);
    const port = Number(
      (
        await kubectl([
          'get',
          'node',
          running.nodeName,
          '-o',
          'jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port}',
        ])
      ).stdout.trim(),
    );
    // Let the agent finish the pod's start before timing it.
    await sleep(3000);
    const creds = {
      key: await readFile(cluster.pki.kubeletClient.key),
      cert: await readFile(cluster.pki.kubeletClient.cert),
    };
    const cases: Record<string, Summary> = {};
    for (const c of CASES) {
      log(`${name}: ${requests} x ${c.name}`);
      const keepAlive = c.keepAlive ? new Agent({ keepAlive: true, maxSockets: 1 }) : false;
      const samples: number[] = [];
      try {
        for (let i = 0; i < WARMUP + requests; i++) {
          const ms = await firstByte(port, c.path(pod), creds, keepAlive);
          if (i >= WARMUP) samples.push(ms);
        }
      } finally {
        if (keepAlive !== false) keepAlive.destroy();
      }
      cases[c.name] = summarize(samples);
    }
    await kubectl(['delete', 'pod', pod, '--grace-period=0', '--force', '--wait=false']);
    return { agent: name, cases };
  } finally {
    await running.stop();
  }
}

function table(results: readonly { agent: string; cases: Record<string, Summary> }[]): string {
  const cell = (s: Summary | undefined) =>
    s === undefined ? '—' : `${s.p50Ms} / ${s.p90Ms} / ${s.p99Ms}`;
  return [
    `| agent | ${CASES.map((c) => `${c.name}: first byte p50 / p90 / p99 (ms)`).join(' | ')} |`,
    `| --- | ${CASES.map(() => '---').join(' | ')} |`,
    ...results.map(
      (r) => `| ${r.agent} | ${CASES.map((c) => cell(r.cases[c.name])).join(' | ')} |`,
    ),
  ].join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      requests: { type: 'string', default: '200' },
      agents: { type: 'string', default: 'berth,upstream' },
      out: { type: 'string' },
    },
  });
  const requests = positiveInteger('requests', values.requests);
  const agents = values.agents.split(',').filter((a) => a !== '');
  for (const a of agents)
    if (AGENTS[a] === undefined)
      throw new Error(`Cannot benchmark agent ${a}: known are ${Object.keys(AGENTS).join(', ')}`);
  const runId = runName();
  log(`run ${runId}: ${agents.join(', ')}`);
  const loadAtStart = loadavg();
  const bench = await startBenchCluster(log);
  try {
    await prepareNamespace(bench.api, NAMESPACE);
    const results = [];
    for (const name of agents) {
      results.push(await measure(bench.cluster, name, requests));
      await clearRuntime(bench.cluster);
    }
    const out = values.out ?? join(REPO_ROOT, 'bench', 'results', `api-direct-${runId}.json`);
    await writeReport(out, {
      ...(await reportHead('api-direct', runId, loadAtStart)),
      options: { requests, agents },
      agents: results,
    });
    log(`results in ${out}`);
    console.log(table(results));
  } finally {
    await stopBenchCluster(bench, log);
  }
}

await main();
