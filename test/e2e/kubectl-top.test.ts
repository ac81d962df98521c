/**
 * `kubectl top node` and `kubectl top pod` for a berth node (issue #7): kubectl -> the
 * apiserver -> (API aggregation) metrics-server, built from sigs.k8s.io/metrics-server
 * -> berth's /metrics/resource over TLS verified against the cluster CA (no
 * --kubelet-insecure-tls), with metrics-server's own client identity and RBAC.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { run } from '../harness/exec.ts';
import { applyJson, busyboxPod, eventually, getJson, waitForPod } from '../harness/kube-helpers.ts';
import type { MetricsServer } from '../harness/metrics-server.ts';
import { fetchLocal } from '../harness/net.ts';

/** One row of `kubectl top ... --no-headers`: name, millicores, MiB (kubectl's units). */
interface TopRow {
  readonly name: string;
  readonly milliCpu: number;
  readonly memoryMi: number;
  readonly columns: readonly string[];
}

function parseTop(stdout: string): TopRow[] {
  return stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const columns = l.trim().split(/\s+/);
      const name = columns[0] ?? '';
      const cpu = columns.find((c) => /^\d+m$/.test(c));
      const memory = columns.find((c) => /^\d+Mi$/.test(c));
      return {
        name,
        milliCpu: cpu === undefined ? NaN : Number(cpu.slice(0, -1)),
        memoryMi: memory === undefined ? NaN : Number(memory.slice(0, -2)),
        columns,
      };
    });
}

interface NodeMetrics {
  readonly timestamp: string;
  readonly window: string;
  readonly usage: { readonly cpu: string; readonly memory: string };
}

// The first CPU rate needs two scrapes (10 s apart), after the node's first status; the
// machine is shared, so allow for slowness.
const FIRST_METRICS_MS = 150_000;

describe('kubectl top through metrics-server (containerd2)', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let ms: MetricsServer;
  let port: number;
  // before() may fail half-way (startCluster then cleans up after itself).
  let started = { cluster: false, berth: false };
  const kubectl = (args: readonly string[]) =>
    run(cluster.bin.kubectl, ['--kubeconfig', cluster.adminKubeconfig, ...args], {
      timeoutMs: 60_000,
    });

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2', metricsServer: true });
    started = { ...started, cluster: true };
    assert.ok(cluster.metricsServer !== undefined, 'the cluster runs metrics-server');
    ms = cluster.metricsServer;
    berth = await startBerth(cluster);
    started = { ...started, berth: true };
    port = Number(/^port: (\d+)$/m.exec(await readFile(berth.configFile, 'utf8'))?.[1]);
    const pod = busyboxPod(cluster, 'burner', berth.nodeName, {
      containers: [
        {
          name: 'burn',
          // Holds ~20 MB in a shell variable, then spins: both show in its metrics.
          command: [
            'sh',
            '-c',
            'x=$(head -c 20000000 /dev/zero | tr "\\0" a); while :; do :; done',
          ],
        },
      ],
    });
    const [container] = pod.spec?.containers ?? [];
    assert.ok(container !== undefined);
    // The limit keeps the busy loop to a quarter of a core on this shared machine.
    container.resources = { limits: { cpu: '250m', memory: '128Mi' } };
    await applyJson(cluster, pod);
    await waitForPod(cluster, 'default', 'burner', 'running', (p) => p.status?.phase === 'Running');
  });

  after(async () => {
    if (!started.cluster) return;
    if (started.berth) await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  test('metrics-server verifies berth against the cluster CA and is reached off loopback', async () => {
    const argv = (await readFile(`/proc/${ms.process.pid}/cmdline`, 'utf8')).split('\0');
    assert.ok(!argv.some((a) => a.startsWith('--kubelet-insecure-tls')), argv.join(' '));
    assert.equal(argv[argv.indexOf('--kubelet-certificate-authority') + 1], cluster.pki.ca.cert);
    assert.equal(argv[argv.indexOf('--kubelet-preferred-address-types') + 1], 'InternalIP');
    const slice = await getJson<{ endpoints: { addresses: string[] }[] }>(cluster, [
      '-n',
      'kube-system',
      'get',
      'endpointslice',
      'metrics-server-host',
    ]);
    const address = slice?.endpoints[0]?.addresses[0] ?? '';
    assert.equal(address, cluster.runtime.gateway);
    assert.doesNotMatch(address, /^127\./);
    // What metrics-server's identity may read on berth: /metrics/resource (nodes/metrics).
    const [ca, cert, key] = await Promise.all([
      readFile(cluster.pki.ca.cert),
      readFile(ms.client.cert),
      readFile(ms.client.key),
    ]);
    const res = await fetchLocal(`https://127.0.0.1:${port}/metrics/resource`, { ca, cert, key });
    assert.equal(res.status, 200, res.body.toString());
    assert.match(res.body.toString(), /^node_cpu_usage_seconds_total /m);
  });

  test('kubectl top node shows the berth node with CPU and memory', async (t) => {
    const row = await eventually(
      `kubectl top node ${berth.nodeName}`,
      async () => {
        const { stdout } = await kubectl(['top', 'node', berth.nodeName, '--no-headers']);
        return parseTop(stdout).find((r) => r.name === berth.nodeName);
      },
      FIRST_METRICS_MS,
      2000,
    ).catch(async (err: unknown) => {
      throw new Error(
        `${err instanceof Error ? err.message : String(err)}\nmetrics-server:\n${await ms.process.tail(40)}`,
        { cause: err },
      );
    });
    t.diagnostic(`kubectl top node: ${row.columns.join(' ')}`);
    assert.ok(row.milliCpu > 0, `CPU: ${row.columns.join(' ')}`);
    assert.ok(row.memoryMi > 0, `memory: ${row.columns.join(' ')}`);
    // NAME CPU(cores) CPU(%) MEMORY(bytes) MEMORY(%): the percentages need the node's allocatable.
    assert.equal(row.columns.length, 5, row.columns.join(' '));
    assert.match(row.columns[2] ?? '', /^\d+%$/);
    assert.match(row.columns[4] ?? '', /^\d+%$/);
    const raw = await kubectl([
      'get',
      '--raw',
      `/apis/metrics.k8s.io/v1beta1/nodes/${berth.nodeName}`,
    ]);
    const metrics = JSON.parse(raw.stdout) as NodeMetrics;
    assert.match(metrics.usage.cpu, /^\d+(n|u|m)?$/);
    assert.match(metrics.usage.memory, /^\d+(Ki|Mi|Gi)?$/);
    assert.ok(Date.now() - Date.parse(metrics.timestamp) < 5 * 60_000, metrics.timestamp);
    assert.match(metrics.window, /^\d+(\.\d+)?s$/);
  });

  test('kubectl top pod shows the busy pod and its container', async (t) => {
    const row = await eventually(
      'kubectl top pod burner',
      async () => {
        const { stdout } = await kubectl(['top', 'pod', 'burner', '--no-headers']);
        return parseTop(stdout).find((r) => r.name === 'burner');
      },
      FIRST_METRICS_MS,
      2000,
    ).catch(async (err: unknown) => {
      throw new Error(
        `${err instanceof Error ? err.message : String(err)}\nmetrics-server:\n${await ms.process.tail(40)}`,
        { cause: err },
      );
    });
    t.diagnostic(`kubectl top pod: ${row.columns.join(' ')}`);
    // A busy loop: well above idle even on a loaded machine.
    assert.ok(row.milliCpu >= 20, `CPU: ${row.columns.join(' ')}`);
    assert.ok(row.memoryMi >= 15, `memory: ${row.columns.join(' ')}`);
    const { stdout } = await kubectl(['top', 'pod', 'burner', '--containers', '--no-headers']);
    const cols = stdout.trim().split(/\s+/);
    assert.deepEqual(cols.slice(0, 2), ['burner', 'burn'], stdout);
  });
});
