/**
 * The cluster upstream's e2e suite assumes, around one node agent at a time (berth or
 * the upstream kubelet), for `make conformance` and the conformance subset test:
 * - kube-proxy, so pods reach the kubernetes Service and each other's Services;
 * - the node's address on the pod bridge's gateway (the API server refuses to proxy to
 *   a loopback node address, which nodes/proxy specs and `kubectl logs` need), a
 *   machine-local address: nothing leaves the machine;
 * - cluster DNS: CoreDNS (built from its Go module) as a Deployment on the node behind
 *   the kube-dns Service at CLUSTER_DNS_IP, the node agent configured to use it;
 * - the suite's images under the names KUBE_TEST_REPO_LIST maps them to
 *   (conformance-registry.ts).
 * Both agents run as the same node name, so kube-proxy (which serves one node) stays.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { GrpcCriClient } from '../../src/cri/index.ts';
import { CONFORMANCE_REGISTRY, COREDNS_VERSION } from '../../hack/images/conformance.ts';
import { startBerth, type BerthNode } from './berth-node.ts';
import { startCluster, type Cluster } from './cluster.ts';
import { waitFor } from './process.ts';
import { startConformanceRegistry, type ConformanceRegistry } from './conformance-registry.ts';
import { startUpstreamKubelet, type UpstreamKubelet } from './upstream-kubelet.ts';

export type Agent = 'berth' | 'upstream';

/** The kube-dns Service's ClusterIP (in the control plane's 10.96.0.0/16). */
export const CLUSTER_DNS_IP = '10.96.0.10';
export const CLUSTER_DOMAIN = 'cluster.local';
export const CONFORMANCE_NODE = 'conformance-node';
/**
 * The kubelet API's port, upstream's default: the suite reaches the node through the
 * API server's node proxy at <node>:10250 in places (e.g. listing the node's pods),
 * not always at the port the Node reports. Bound on the bridge address only.
 */
export const KUBELET_PORT = 10250;

export interface ConformanceCluster {
  readonly cluster: Cluster;
  readonly nodeName: string;
  /** The node's address: the pod bridge's gateway. */
  readonly nodeIp: string;
  readonly registry: ConformanceRegistry;
  /** KUBE_TEST_REPO_LIST for e2e.test: every upstream registry mapped to CONFORMANCE_REGISTRY. */
  readonly repoListFile: string;
  /** The agent running now, if any. */
  agent(): Agent | undefined;
  /** Where the running agent logs. */
  agentLog(): string | undefined;
  /** Starts `agent` as the node and waits for it and CoreDNS to be ready. */
  startAgent(agent: Agent): Promise<void>;
  /** Stops the agent, removes its pods (API objects and sandboxes) and its Node. */
  stopAgent(): Promise<void>;
  stop(): Promise<void>;
}

/** The suite's registries (test/utils/image/manifest.go RegistryList), all local. */
function repoList(): string {
  const r = CONFORMANCE_REGISTRY;
  return [
    `promoterE2eRegistry: ${r}/e2e-test-images`,
    `buildImageRegistry: ${r}/build-image`,
    `gcEtcdRegistry: ${r}`,
    `gcRegistry: ${r}`,
    `sigStorageRegistry: ${r}/sig-storage`,
    `privateRegistry: ${r}/k8s-authenticated-test`,
    `dockerLibraryRegistry: ${r}/library`,
    `cloudProviderGcpRegistry: ${r}/cloud-provider-gcp`,
    // Stays unreachable on purpose: specs expect pulls from it to fail.
    'invalidRegistry: invalid.registry.k8s.io/invalid',
    '',
  ].join('\n');
}

function coreDnsManifest(): string {
  const image = `${CONFORMANCE_REGISTRY}/coredns/coredns:${COREDNS_VERSION}`;
  const corefile = [
    '.:53 {',
    '    errors',
    '    health',
    '    ready',
    `    kubernetes ${CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {`,
    '       pods insecure',
    '       fallthrough in-addr.arpa ip6.arpa',
    '       ttl 30',
    '    }',
    // Names outside the cluster go to the machine's resolver; specs that need the
    // internet are skipped (test/conformance/skips.yaml).
    '    forward . /etc/resolv.conf',
    '    cache 30',
    '    loadbalance',
    '}',
  ].join('\n');
  const objects = [
    {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'coredns', namespace: 'kube-system' },
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'system:coredns' },
      rules: [
        {
          apiGroups: [''],
          resources: ['endpoints', 'services', 'pods', 'namespaces'],
          verbs: ['list', 'watch'],
        },
        {
          apiGroups: ['discovery.k8s.io'],
          resources: ['endpointslices'],
          verbs: ['list', 'watch'],
        },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'system:coredns' },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'system:coredns',
      },
      subjects: [{ kind: 'ServiceAccount', name: 'coredns', namespace: 'kube-system' }],
    },
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'coredns', namespace: 'kube-system' },
      data: { Corefile: corefile },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'coredns', namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns' } },
      spec: {
        replicas: 1,
        selector: { matchLabels: { 'k8s-app': 'kube-dns' } },
        template: {
          metadata: { labels: { 'k8s-app': 'kube-dns' } },
          spec: {
            serviceAccountName: 'coredns',
            dnsPolicy: 'Default',
            priorityClassName: 'system-cluster-critical',
            containers: [
              {
                name: 'coredns',
                image,
                imagePullPolicy: 'IfNotPresent',
                args: ['-conf', '/etc/coredns/Corefile'],
                volumeMounts: [{ name: 'config', mountPath: '/etc/coredns', readOnly: true }],
                ports: [
                  { name: 'dns', containerPort: 53, protocol: 'UDP' },
                  { name: 'dns-tcp', containerPort: 53, protocol: 'TCP' },
                ],
                livenessProbe: { httpGet: { path: '/health', port: 8080 }, periodSeconds: 10 },
                readinessProbe: { httpGet: { path: '/ready', port: 8181 }, periodSeconds: 2 },
              },
            ],
            volumes: [{ name: 'config', configMap: { name: 'coredns' } }],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'kube-dns', namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns' } },
      spec: {
        clusterIP: CLUSTER_DNS_IP,
        selector: { 'k8s-app': 'kube-dns' },
        ports: [
          { name: 'dns', port: 53, protocol: 'UDP' },
          { name: 'dns-tcp', port: 53, protocol: 'TCP' },
        ],
      },
    },
  ];
  return JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects });
}

/** Stops and removes every pod sandbox of the runtime (the stopped agent's pods). */
async function removeAllSandboxes(socket: string): Promise<void> {
  const client = new GrpcCriClient(socket, { defaultTimeoutMs: 30_000 });
  try {
    const { items } = await client.runtime.listPodSandbox({});
    for (const sandbox of items) {
      await client.runtime.stopPodSandbox({ podSandboxId: sandbox.id }).catch(() => undefined);
      await client.runtime.removePodSandbox({ podSandboxId: sandbox.id }).catch(() => undefined);
    }
  } finally {
    client.close();
  }
}

export async function startConformanceCluster(
  options: { readonly log?: (m: string) => void } = {},
): Promise<ConformanceCluster> {
  const log = options.log ?? (() => undefined);
  const nodeName = CONFORMANCE_NODE;
  // kube-proxy is host-wide: wait for another test cluster's to go away.
  const cluster = await startCluster({
    kubeProxy: true,
    nodeName,
    kubeProxyLockWaitMs: 900_000,
    log,
  });
  let berth: BerthNode | undefined;
  let upstream: UpstreamKubelet | undefined;
  try {
    const registry = await startConformanceRegistry(cluster, log);
    const repoListFile = join(cluster.root, 'kube-test-repo-list.yaml');
    await writeFile(repoListFile, repoList());
    await cluster.kubectl(['apply', '-f', '-'], { input: coreDnsManifest() });
    const nodeIp = cluster.runtime.gateway;
    const kubectl = (args: readonly string[]): Promise<string> =>
      cluster.kubectl(['--cache-dir', join(cluster.root, 'kubectl-cache'), ...args]);
    const stopAgent = async (): Promise<void> => {
      if (berth !== undefined) {
        await kubectl([
          'delete',
          'pods',
          '--all-namespaces',
          '--field-selector',
          `spec.nodeName=${nodeName}`,
          '--force',
          '--grace-period=0',
          '--wait=false',
        ]).catch(() => '');
        await berth.stop();
        berth = undefined;
        await removeAllSandboxes(cluster.runtime.socket);
        await kubectl(['delete', 'node', nodeName, '--ignore-not-found', '--wait=false']);
      }
      if (upstream !== undefined) {
        await upstream.stop();
        upstream = undefined;
        await removeAllSandboxes(cluster.runtime.socket);
      }
    };
    const result: ConformanceCluster = {
      cluster,
      nodeName,
      nodeIp,
      registry,
      repoListFile,
      agent: () =>
        berth !== undefined ? 'berth' : upstream !== undefined ? 'upstream' : undefined,
      agentLog: () =>
        berth?.logFile ?? (upstream !== undefined ? join(upstream.dir, 'kubelet.log') : undefined),
      async startAgent(agent) {
        await stopAgent();
        log(`conformance: starting ${agent} as node ${nodeName} on ${nodeIp}`);
        if (agent === 'berth') {
          berth = await startBerth(cluster, {
            nodeName,
            nodeIp,
            port: KUBELET_PORT,
            extraConfig: [`clusterDNS: [${CLUSTER_DNS_IP}]`, `clusterDomain: ${CLUSTER_DOMAIN}`],
          });
          const node = berth;
          await waitFor(
            `node ${nodeName} (berth) to be Ready`,
            async () => {
              if (!node.process.alive())
                throw new Error(`berth exited:\n${await node.process.tail(40)}`);
              const out = await kubectl([
                'get',
                'node',
                nodeName,
                '--ignore-not-found',
                '-o',
                'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
              ]).catch(() => '');
              return out.trim() === 'True';
            },
            { timeoutMs: 120_000, intervalMs: 500, describe: () => node.process.tail(40) },
          );
        } else {
          upstream = await startUpstreamKubelet(cluster, {
            nodeName,
            nodeIp,
            port: KUBELET_PORT,
            config: { clusterDNS: [CLUSTER_DNS_IP], clusterDomain: CLUSTER_DOMAIN },
            log,
          });
        }
        await kubectl(['-n', 'kube-system', 'rollout', 'restart', 'deployment/coredns']);
        await kubectl([
          '-n',
          'kube-system',
          'rollout',
          'status',
          'deployment/coredns',
          '--timeout=180s',
        ]);
        log(`conformance: ${agent} ready, CoreDNS running`);
      },
      stopAgent,
      async stop() {
        await stopAgent().catch((e: unknown) => {
          log(`stopping the node agent: ${String(e)}`);
        });
        await registry.process.stop(10_000);
        await cluster.stop();
      },
    };
    return result;
  } catch (err) {
    await berth?.stop().catch(() => undefined);
    await upstream?.stop().catch(() => undefined);
    await cluster.stop();
    throw err;
  }
}
