/**
 * metrics-server for a test cluster, run as a process on this machine (not a pod), so
 * `kubectl top` works the way it does on a real cluster: kubectl -> kube-apiserver ->
 * (API aggregation) metrics-server -> each node's /metrics/resource.
 *
 * - To the nodes it is a client like any other: its own certificate (user
 *   system:metrics-server, with upstream's RBAC), the nodes' serving certificates
 *   verified against the cluster CA, the InternalIP address and the port each node
 *   publishes in its status. No --kubelet-insecure-tls.
 * - To the apiserver it is an aggregated API server behind APIService
 *   v1beta1.metrics.k8s.io, which points at a selector-less Service in kube-system. The
 *   apiserver (with --enable-aggregator-routing) dials the Service's EndpointSlice
 *   address, which must not be loopback: metrics-server listens on 127.0.0.1 and a
 *   forwarder process exposes it on the pod bridge's gateway, an address that exists only
 *   on this machine. Its serving certificate is signed by the cluster CA, the APIService's
 *   caBundle, for the name the apiserver checks (metrics-server.kube-system.svc).
 * - It authenticates the apiserver's proxied requests through the request-header
 *   configuration the apiserver publishes (the extension-apiserver-authentication
 *   ConfigMap) and authorizes them with SubjectAccessReviews (system:auth-delegator).
 */
import { accessSync, constants } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cacheDir, pinnedVersions, REPO_ROOT } from './binaries.ts';
import { run } from './exec.ts';
import { fetchLocal, freePort } from './net.ts';
import { kubeconfig, makeLeaf, type CertPair, type ClusterPki } from './pki.ts';
import { ComponentProcess, waitFor } from './process.ts';

export const METRICS_SERVER_NAMESPACE = 'kube-system';
export const METRICS_SERVER_SERVICE = 'metrics-server';
export const METRICS_APISERVICE = 'v1beta1.metrics.k8s.io';
/** The user name in metrics-server's client certificate, bound by the RBAC below. */
export const METRICS_SERVER_USER = 'system:metrics-server';

const NODE_BINARY = join(REPO_ROOT, 'node_modules/.bin/node');
const FORWARDER = join(REPO_ROOT, 'test/harness/tcp-forward.ts');

/** The metrics-server binary hack/build-go.sh built for the pinned version. */
export function metricsServerBinary(): string {
  const version = pinnedVersions()['METRICS_SERVER_VERSION'];
  if (version === undefined) {
    throw new Error('Cannot locate metrics-server: versions.env has no METRICS_SERVER_VERSION');
  }
  const path = join(cacheDir(), 'bin', `metrics-server-${version}`, 'metrics-server');
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(
      `Cannot find ${path}: run \`make deps\` (or hack/build-go.sh metrics-server) to build it`,
    );
  }
  return path;
}

export interface MetricsServerOptions {
  /** Directory for its certificates, kubeconfig and logs. */
  readonly dir: string;
  readonly pki: ClusterPki;
  /** The apiserver, https://127.0.0.1:<port>. */
  readonly server: string;
  readonly kubectl: string;
  readonly adminKubeconfig: string;
  /** The pod bridge's gateway: where the apiserver reaches metrics-server. */
  readonly gateway: string;
  readonly detached: boolean;
  /** --metric-resolution (default 10s, metrics-server's minimum: tests want the first rates soon). */
  readonly metricResolution?: string;
  /** Defaults to metricsServerBinary(). */
  readonly binary?: string;
  readonly log?: (message: string) => void;
}

export interface MetricsServer {
  /** metrics-server itself, on 127.0.0.1:<port>. */
  readonly process: ComponentProcess;
  /** The forwarder from <gateway>:<port> to 127.0.0.1:<port>. */
  readonly forwarder: ComponentProcess;
  readonly port: number;
  /** The EndpointSlice address the apiserver dials, <gateway>:<port>. */
  readonly endpoint: string;
  /** Its identity (user system:metrics-server) towards the apiserver and the nodes. */
  readonly kubeconfig: string;
  readonly client: CertPair;
  readonly serving: CertPair;
}

/** The RBAC metrics-server needs, as upstream's manifests grant it (to a user, not a service account). */
export function metricsServerRbac(user = METRICS_SERVER_USER): unknown[] {
  const subjects = [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }];
  const roleRef = (kind: 'Role' | 'ClusterRole', name: string) => ({
    apiGroup: 'rbac.authorization.k8s.io',
    kind,
    name,
  });
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'system:metrics-server' },
      rules: [
        // /metrics/resource on the kubelet maps to nodes/metrics.
        { apiGroups: [''], resources: ['nodes/metrics'], verbs: ['get'] },
        { apiGroups: [''], resources: ['pods', 'nodes'], verbs: ['get', 'list', 'watch'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'system:metrics-server' },
      roleRef: roleRef('ClusterRole', 'system:metrics-server'),
      subjects,
    },
    {
      // TokenReviews and SubjectAccessReviews for the requests the apiserver proxies.
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'metrics-server:system:auth-delegator' },
      roleRef: roleRef('ClusterRole', 'system:auth-delegator'),
      subjects,
    },
    {
      // The request-header CA and allowed names the apiserver publishes.
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'metrics-server-auth-reader', namespace: METRICS_SERVER_NAMESPACE },
      roleRef: roleRef('Role', 'extension-apiserver-authentication-reader'),
      subjects,
    },
  ];
}

/**
 * The Service (no selector), its hand-made EndpointSlice and the APIService. The slice
 * carries a managed-by of its own so neither endpoint controller claims it; its port
 * name matches the Service port's, which is how the apiserver pairs them.
 */
export function metricsServerApi(o: {
  readonly gateway: string;
  readonly port: number;
  /** PEM of the CA that signed metrics-server's serving certificate. */
  readonly caPem: string;
}): unknown[] {
  const ns = METRICS_SERVER_NAMESPACE;
  const name = METRICS_SERVER_SERVICE;
  return [
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: ns, labels: { 'k8s-app': name } },
      spec: { ports: [{ name: 'https', port: 443, protocol: 'TCP', targetPort: o.port }] },
    },
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: `${name}-host`,
        namespace: ns,
        labels: {
          'kubernetes.io/service-name': name,
          'endpointslice.kubernetes.io/managed-by': 'berth-test-harness',
        },
      },
      addressType: 'IPv4',
      endpoints: [{ addresses: [o.gateway], conditions: { ready: true } }],
      ports: [{ name: 'https', port: o.port, protocol: 'TCP' }],
    },
    {
      apiVersion: 'apiregistration.k8s.io/v1',
      kind: 'APIService',
      metadata: { name: METRICS_APISERVICE, labels: { 'k8s-app': name } },
      spec: {
        group: 'metrics.k8s.io',
        version: 'v1beta1',
        service: { name, namespace: ns, port: 443 },
        caBundle: Buffer.from(o.caPem).toString('base64'),
        groupPriorityMinimum: 100,
        versionPriority: 100,
      },
    },
  ];
}

/** metrics-server's command line: secure serving on loopback, verified TLS to the nodes. */
export function metricsServerArgs(o: {
  readonly port: number;
  readonly kubeconfig: string;
  readonly serving: CertPair;
  readonly caFile: string;
  readonly certDir: string;
  readonly metricResolution: string;
}): string[] {
  return [
    '--bind-address',
    '127.0.0.1',
    '--secure-port',
    String(o.port),
    '--cert-dir',
    o.certDir,
    '--tls-cert-file',
    o.serving.cert,
    '--tls-private-key-file',
    o.serving.key,
    '--kubeconfig',
    o.kubeconfig,
    '--authentication-kubeconfig',
    o.kubeconfig,
    '--authorization-kubeconfig',
    o.kubeconfig,
    '--kubelet-certificate-authority',
    o.caFile,
    '--kubelet-preferred-address-types',
    'InternalIP',
    // Test nodes do not listen on 10250: each publishes its port in status.daemonEndpoints.
    '--kubelet-use-node-status-port',
    '--metric-resolution',
    o.metricResolution,
    // It must stay below the resolution (metrics-server refuses to start otherwise).
    '--kubelet-request-timeout',
    '5s',
    '--profiling=false',
    '--v',
    '2',
  ];
}

async function apply(o: MetricsServerOptions, objects: readonly unknown[]): Promise<void> {
  await run(o.kubectl, ['--kubeconfig', o.adminKubeconfig, 'apply', '-f', '-'], {
    input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }),
    timeoutMs: 60_000,
  });
}

interface Condition {
  readonly type?: string;
  readonly status?: string;
  readonly reason?: string;
  readonly message?: string;
}

/** The APIService's Available condition, as the apiserver's availability check sees it. */
async function availability(o: MetricsServerOptions): Promise<Condition | undefined> {
  const { stdout } = await run(
    o.kubectl,
    ['--kubeconfig', o.adminKubeconfig, 'get', 'apiservice', METRICS_APISERVICE, '-o', 'json'],
    { timeoutMs: 30_000 },
  );
  const obj = JSON.parse(stdout) as { status?: { conditions?: Condition[] } };
  return obj.status?.conditions?.find((c) => c.type === 'Available');
}

/**
 * Starts metrics-server and registers it with the apiserver; resolves once the APIService
 * is Available (metrics come with the first scrapes of the nodes, after that).
 * The caller owns both processes (stop metrics-server first).
 */
export async function startMetricsServer(o: MetricsServerOptions): Promise<MetricsServer> {
  const log = o.log ?? (() => undefined);
  const pkiDir = join(o.dir, 'pki');
  await mkdir(pkiDir, { recursive: true, mode: 0o700 });
  const [client, serving, port] = await Promise.all([
    makeLeaf(pkiDir, o.pki.ca, {
      name: 'metrics-server-client',
      subject: `/CN=${METRICS_SERVER_USER}`,
      usage: 'clientAuth',
    }),
    makeLeaf(pkiDir, o.pki.ca, {
      name: 'metrics-server-serving',
      subject: `/CN=${METRICS_SERVER_SERVICE}`,
      usage: 'serverAuth',
      sans: [
        `DNS:${METRICS_SERVER_SERVICE}.${METRICS_SERVER_NAMESPACE}.svc`,
        'IP:127.0.0.1',
        `IP:${o.gateway}`,
      ],
    }),
    freePort(),
  ]);
  const kubeconfigFile = join(o.dir, 'metrics-server.kubeconfig');
  await writeFile(
    kubeconfigFile,
    kubeconfig(o.server, o.pki.ca.cert, client, METRICS_SERVER_USER),
    {
      mode: 0o600,
    },
  );
  // Before it starts: without the auth reader it cannot load the request-header CA and exits.
  await apply(o, metricsServerRbac());

  const proc = ComponentProcess.start({
    name: 'metrics-server',
    command: o.binary ?? metricsServerBinary(),
    args: metricsServerArgs({
      port,
      kubeconfig: kubeconfigFile,
      serving,
      caFile: o.pki.ca.cert,
      certDir: join(o.dir, 'certs'),
      metricResolution: o.metricResolution ?? '10s',
    }),
    logFile: join(o.dir, 'metrics-server.log'),
    detached: o.detached,
  });
  const forwarder = ComponentProcess.start({
    name: 'metrics-server-forwarder',
    command: NODE_BINARY,
    args: [FORWARDER, o.gateway, String(port), '127.0.0.1', String(port)],
    logFile: join(o.dir, 'metrics-server-forwarder.log'),
    detached: o.detached,
  });
  const ms: MetricsServer = {
    process: proc,
    forwarder,
    port,
    endpoint: `${o.gateway}:${port}`,
    kubeconfig: kubeconfigFile,
    client,
    serving,
  };
  try {
    const ca = await readFile(o.pki.ca.cert);
    // /livez, not /readyz: readiness waits for the first scrape of a node, and the
    // cluster may have no node yet.
    await waitFor(
      'metrics-server /livez and its forwarder',
      async () => {
        if (!proc.alive()) throw new Error(`metrics-server exited:\n${await proc.tail()}`);
        if (!forwarder.alive()) throw new Error(`the forwarder exited:\n${await forwarder.tail()}`);
        const res = await fetchLocal(`https://127.0.0.1:${port}/livez`, { ca, timeoutMs: 2000 });
        return res.status === 200 && (await forwarder.tail()).includes('listening on');
      },
      { timeoutMs: 60_000, intervalMs: 200, describe: () => proc.tail() },
    );
    await apply(o, metricsServerApi({ gateway: o.gateway, port, caPem: ca.toString() }));
    let last: Condition | undefined;
    await waitFor(
      `APIService ${METRICS_APISERVICE} Available`,
      async () => {
        if (!proc.alive()) throw new Error(`metrics-server exited:\n${await proc.tail()}`);
        last = await availability(o);
        return last?.status === 'True';
      },
      {
        timeoutMs: 60_000,
        intervalMs: 500,
        describe: async () =>
          `Available: ${JSON.stringify(last)}\nmetrics-server:\n${await proc.tail()}`,
      },
    );
  } catch (err) {
    // Not yet the caller's: stop both here.
    await Promise.all([proc.stop(5000), forwarder.stop(5000)]);
    throw err;
  }
  log(`metrics-server on 127.0.0.1:${port}, APIService ${METRICS_APISERVICE} via ${ms.endpoint}`);
  return ms;
}
