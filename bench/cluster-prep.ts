/**
 * Set-up shared by the benchmarks: the cluster with its interrupt handling and an admin
 * API client, the namespace pods go to, an empty runtime, and the run's name.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { format, resolveConfig } from 'prettier';
import { BERTH_LAUNCHER } from '../test/harness/berth-node.ts';
import { pinnedVersions } from '../test/harness/binaries.ts';
import { startCluster, type Cluster } from '../test/harness/cluster.ts';
import { stopRunningAgents } from './agents.ts';
import { ApiError, KubeApi } from './kube-api.ts';
import { clearSandboxes, stopExtraRuntimes } from './runtimes.ts';

/** The run's name: the UTC start time, e.g. 20261203t103236. */
export function runName(): string {
  return new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').toLowerCase();
}

export interface BenchCluster {
  readonly cluster: Cluster;
  readonly api: KubeApi;
  /** True once SIGINT/SIGTERM started tearing everything down (then leave it be). */
  readonly interrupted: () => boolean;
}

/**
 * Starts the benchmark cluster (containerd 2.x) and connects as admin. SIGINT/SIGTERM
 * stop the agents still running first, then any extra runtime, then the cluster, then
 * exit 130: an agent left running restarts its pods while the runtime is torn down
 * under it.
 */
export async function startBenchCluster(log: (message: string) => void): Promise<BenchCluster> {
  const cluster = await startCluster({ runtime: 'containerd2', log });
  let interrupted = false;
  const onSignal = (): void => {
    if (interrupted) return;
    interrupted = true;
    log('interrupted: stopping the agents, then the cluster');
    void stopRunningAgents(log)
      .then(() => stopExtraRuntimes(log))
      .then(() => cluster.stop())
      .finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const api = await KubeApi.connect({
    server: cluster.controlPlane.server,
    caFile: cluster.pki.ca.cert,
    certFile: cluster.pki.admin.cert,
    keyFile: cluster.pki.admin.key,
  });
  return { cluster, api, interrupted: () => interrupted };
}

/** Creates `namespace` and waits for its default service account (pods need it). */
export async function prepareNamespace(api: KubeApi, namespace: string): Promise<void> {
  await api.send(
    'POST',
    '/api/v1/namespaces',
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } },
    [409],
  );
  const deadline = Date.now() + 60_000;
  for (;;) {
    const found = await api
      .send('GET', `/api/v1/namespaces/${namespace}/serviceaccounts/default`)
      .then(
        () => true,
        (err: unknown) => {
          if (err instanceof ApiError && err.status === 404) return false;
          throw err;
        },
      );
    if (found) return;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${namespace}/default`);
    await sleep(200);
  }
}

/** Removes whatever sandboxes the cluster's runtime still holds; returns how many. */
export function clearRuntime(cluster: Cluster): Promise<number> {
  return clearSandboxes(cluster.runtime.socket);
}

/** Closes the client and tears the cluster down, unless an interrupt is doing that. */
export async function stopBenchCluster(
  bench: BenchCluster,
  log: (message: string) => void,
): Promise<void> {
  bench.api.close();
  if (bench.interrupted()) return;
  await stopExtraRuntimes(log);
  await bench.cluster.stop();
  const leaks = await bench.cluster.leaks();
  if (leaks.length > 0) log(`teardown left:\n${leaks.join('\n')}`);
}

/**
 * Writes a result file, formatted as the repository's prettier would, so a committed
 * result passes `make lint`.
 */
export async function writeReport(out: string, report: unknown): Promise<void> {
  await mkdir(dirname(out), { recursive: true });
  const style = (await resolveConfig(out)) ?? {};
  await writeFile(out, await format(JSON.stringify(report), { ...style, parser: 'json' }));
}

/**
 * How berth was started in this run: the launcher (BERTH_LAUNCHER or bin/berth) and
 * its `exec` line, which carries the Node flags. A result is only comparable with
 * another one started the same way.
 */
export async function berthLauncher(): Promise<{ path: string; exec: string }> {
  const text = await readFile(BERTH_LAUNCHER, 'utf8').catch(() => '');
  const exec = text.split('\n').find((l) => l.trimStart().startsWith('exec ')) ?? '';
  return { path: BERTH_LAUNCHER, exec: exec.trim() };
}

/**
 * What every result file of the API benchmarks starts with: which benchmark and run,
 * the machine (its load average at the run's start and now), the pinned versions and
 * how berth was started.
 */
export async function reportHead(
  benchmark: string,
  run: string,
  loadAtStart: readonly number[],
): Promise<Record<string, unknown>> {
  const versions = pinnedVersions();
  return {
    benchmark,
    run,
    date: new Date().toISOString(),
    machine: {
      cpus: cpus().length,
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      kernel: release(),
      loadAverage: { atStart: loadAtStart, atEnd: loadavg() },
    },
    versions: {
      kubernetes: versions['KUBERNETES_VERSION'],
      containerd: versions['CONTAINERD_VERSION'],
    },
    berthLauncher: await berthLauncher(),
  };
}
