/**
 * kube-proxy in the test cluster (issue #5): a pod on a berth node reaches the API
 * server through the kubernetes Service's ClusterIP, as on a real node, and teardown
 * removes every KUBE-* chain kube-proxy made.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { EndpointSlice } from 'kubernetes-types/discovery/v1.js';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { run } from '../harness/exec.ts';
import { busyboxPod, applyJson, getJson, waitForPod } from '../harness/kube-helpers.ts';
import {
  kubeChains,
  kubeProxyLeaks,
  startKubeProxy,
  type KubeProxy,
  type KubeProxyState,
} from '../harness/kube-proxy.ts';

/** Hex "AABBCCDD:PPPP" of /proc/net/tcp for an IPv4 address (little-endian) and port. */
function procNetAddress(ip: string, port: number): string {
  const hexIp = ip
    .split('.')
    .reverse()
    .map((o) => Number(o).toString(16).toUpperCase().padStart(2, '0'))
    .join('');
  return `${hexIp}:${port.toString(16).toUpperCase().padStart(4, '0')}`;
}

/** The host-wide settings a default kube-proxy would write; this one must not. */
const SYSCTLS = [
  'net/netfilter/nf_conntrack_max',
  'net/netfilter/nf_conntrack_tcp_timeout_established',
  'net/netfilter/nf_conntrack_tcp_timeout_close_wait',
  'net/ipv4/conf/all/route_localnet',
  'net/ipv4/ip_forward',
];

async function sysctls(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const key of SYSCTLS)
    out[key] = (await readFile(`/proc/sys/${key}`, 'utf8').catch(() => 'absent')).trim();
  return out;
}

async function listeners(): Promise<string[]> {
  return (await readFile('/proc/net/tcp', 'utf8'))
    .split('\n')
    .slice(1)
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f[3] === '0A')
    .map((f) => f[1] ?? '');
}

describe('kube-proxy on a berth node (containerd2)', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let proxy: KubeProxy;
  // before() may fail half-way (startCluster then cleans up after itself).
  let started = { cluster: false, berth: false };
  let gateway: string;
  let sysctlsBefore: Record<string, string>;

  before(async () => {
    sysctlsBefore = await sysctls();
    cluster = await startCluster({ runtime: 'containerd2', kubeProxy: true });
    started = { ...started, cluster: true };
    assert.ok(cluster.kubeProxy !== undefined, 'the cluster runs kube-proxy');
    proxy = cluster.kubeProxy;
    gateway = cluster.runtime.gateway;
    berth = await startBerth(cluster, { nodeName: proxy.nodeName });
    started = { ...started, berth: true };
  });

  after(async () => {
    if (!started.cluster) return;
    if (started.berth) await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
    const before = new Set(proxy.state.chainsBefore);
    assert.deepEqual(
      (await kubeChains()).filter((c) => !before.has(c)),
      [],
      'no KUBE-* chain of this cluster is left',
    );
  });

  test('the kubernetes Service has the gateway as its endpoint', async () => {
    const list = await getJson<{ items: EndpointSlice[] }>(cluster, [
      '-n',
      'default',
      'get',
      'endpointslices',
      '-l',
      'kubernetes.io/service-name=kubernetes',
    ]);
    const addresses = (list?.items ?? []).flatMap((s) => s.endpoints.flatMap((e) => e.addresses));
    assert.deepEqual(addresses, [gateway]);
    const ports = (list?.items ?? []).flatMap((s) => (s.ports ?? []).map((p) => p.port));
    assert.deepEqual(ports, [cluster.controlPlane.ports.apiserver]);
  });

  test('kube-proxy programmed the Service IP in the nat table', async () => {
    const { stdout } = await run('iptables-save', ['-t', 'nat']);
    assert.match(
      stdout,
      new RegExp(`-d ${cluster.serviceIp.replaceAll('.', '\\.')}/32 .*--dport 443`),
    );
    assert.match(stdout, /^:KUBE-SERVICES /m);
  });

  test('a pod reaches the API server on <service IP>:443', async () => {
    // busybox's wget segfaults in its TLS code on this machine, so the pod speaks plain
    // HTTP to the TLS port: only a Go TLS server (the apiserver behind the Service)
    // answers that with this 400.
    // busybox nc quits at EOF on stdin: keep it open until the answer is in.
    const request = String.raw`(printf 'GET /version HTTP/1.0\r\n\r\n'; sleep 2)`;
    await applyJson(
      cluster,
      busyboxPod(cluster, 'via-service', berth.nodeName, {
        restartPolicy: 'Never',
        // Retries: kube-proxy restarts once when the node registers.
        command: [
          'sh',
          '-c',
          `for i in $(seq 30); do ${request} | nc -w 3 ${cluster.serviceIp} 443 > /tmp/out; grep -q 'HTTPS server' /tmp/out && cat /tmp/out && exit 0; sleep 1; done; cat /tmp/out; exit 1`,
        ],
      }),
    );
    const pod = await waitForPod(
      cluster,
      'default',
      'via-service',
      'to finish',
      (p) => p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed',
      150_000,
    ).catch(async (err: unknown) => {
      const state = await cluster.kubectl([
        '-n',
        'default',
        'get',
        'pod',
        'via-service',
        '-o',
        'yaml',
      ]);
      throw new Error(`${String(err)}\n${state}\nkube-proxy:\n${await proxy.process.tail(30)}`);
    });
    const logs = await cluster.kubectl(['-n', 'default', 'logs', 'via-service']).catch(String);
    assert.equal(
      pod.status?.phase,
      'Succeeded',
      `the pod's output:\n${logs}\nkube-proxy:\n${await proxy.process.tail(30)}`,
    );
    assert.match(logs, /^HTTP\/1\.0 400 Bad Request/);
    assert.match(logs, /Client sent an HTTP request to an HTTPS server/);
  });

  test('kube-proxy listens on loopback only, the forwarder on the gateway only', async () => {
    const open = await listeners();
    for (const port of [proxy.healthzPort, proxy.metricsPort]) {
      const mine = open.filter((a) =>
        a.endsWith(`:${port.toString(16).toUpperCase().padStart(4, '0')}`),
      );
      assert.deepEqual(mine, [procNetAddress('127.0.0.1', port)], `kube-proxy port ${port}`);
    }
    const api = cluster.controlPlane.ports.apiserver;
    const apiListeners = open.filter((a) =>
      a.endsWith(`:${api.toString(16).toUpperCase().padStart(4, '0')}`),
    );
    assert.deepEqual(
      apiListeners.sort(),
      [procNetAddress('127.0.0.1', api), procNetAddress(gateway, api)].sort(),
    );
  });

  test('kube-proxy changed no host-wide sysctl', async () => {
    assert.deepEqual(await sysctls(), sysctlsBefore);
  });

  test('a second kube-proxy is refused while this one holds the host-wide lock', async () => {
    await assert.rejects(
      startKubeProxy({
        dir: join(cluster.root, 'second-kube-proxy'),
        binary: cluster.bin.kubeProxy,
        clusterId: 'second',
        server: cluster.controlPlane.server,
        caFile: cluster.pki.ca.cert,
        client: cluster.pki.kubeProxy,
        nodeName: 'second',
        podSubnet: cluster.runtime.podSubnet,
        gateway,
        detached: false,
      }),
      (err: unknown) =>
        err instanceof Error &&
        (err as { code?: unknown }).code === 'BERTH_KUBE_PROXY_LOCK_HELD' &&
        err.message.includes(`cluster ${cluster.id}`),
    );
  });

  test('the leak check sees KUBE-* chains (while they exist)', async () => {
    // An unheld lock file stands in for "kube-proxy has stopped": the chains of the
    // running proxy must then count as leaks, so the check after teardown can fail.
    const state: KubeProxyState = {
      ...proxy.state,
      lockFile: join(cluster.root, 'unheld.lock'),
    };
    const leaks = await kubeProxyLeaks(state);
    assert.ok(
      leaks.some((l) => l.includes('nat KUBE-SERVICES')),
      `leaks: ${leaks.join('\n')}`,
    );
  });
});
