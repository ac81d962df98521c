/**
 * The Kubernetes control plane of a test cluster: etcd, kube-apiserver,
 * kube-controller-manager and kube-scheduler, every listener on 127.0.0.1.
 */
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Binaries } from './binaries.ts';
import { fetchLocal } from './net.ts';
import { kubeconfig, type ClusterPki, type FrontProxyPki } from './pki.ts';
import { ComponentProcess, waitFor } from './process.ts';

export interface ControlPlanePorts {
  readonly etcdClient: number;
  readonly etcdPeer: number;
  readonly apiserver: number;
  readonly controllerManager: number;
  readonly scheduler: number;
}

export interface ControlPlane {
  readonly server: string;
  readonly ports: ControlPlanePorts;
  readonly adminKubeconfig: string;
  readonly processes: readonly ComponentProcess[];
}

/** Service IPs: only kube-proxy (opt-in) makes them reachable, and only from pods. */
export const SERVICE_CIDR = '10.96.0.0/16';
/** The kubernetes Service's ClusterIP: the first address of SERVICE_CIDR. */
export const KUBERNETES_SERVICE_IP = '10.96.0.1';
export const CLUSTER_CIDR = '10.88.0.0/16';

async function healthy(
  url: string,
  ca: Buffer,
  client?: { cert: Buffer; key: Buffer },
): Promise<boolean> {
  const res = await fetchLocal(url, { ca, timeoutMs: 2000, ...(client ?? {}) });
  return res.status === 200 && res.body.toString().trim() === 'ok';
}

export async function startControlPlane(options: {
  readonly dir: string;
  readonly pki: ClusterPki;
  readonly ports: ControlPlanePorts;
  readonly bin: Binaries;
  readonly detached: boolean;
  /**
   * A non-loopback host address to publish as the kubernetes Service's endpoint (with
   * the lease reconciler); something must forward it to the loopback listener.
   * Without it the Service has no endpoints.
   */
  readonly advertiseAddress?: string;
  /** How long kube-controller-manager's CSR signer makes certificates valid (default 1 year). */
  readonly clusterSigningDuration?: string;
  /**
   * Serve aggregated APIs (metrics-server's metrics.k8s.io) with this front-proxy PKI:
   * request-header authentication for the aggregated servers, the proxy client
   * certificate, and routing to a Service's endpoints rather than its ClusterIP (which
   * only kube-proxy, opt-in and for pods, would make reachable).
   */
  readonly aggregation?: FrontProxyPki;
  /**
   * Serve the apiserver on this host address instead of 127.0.0.1 (the VM tier: guests
   * reach it on a host-only bridge), and advertise it unless advertiseAddress says otherwise.
   */
  readonly bindAddress?: string;
}): Promise<ControlPlane> {
  const { dir, pki, ports, bin, detached } = options;
  const bindAddress = options.bindAddress ?? '127.0.0.1';
  const advertiseAddress =
    options.advertiseAddress ?? (options.bindAddress !== undefined ? bindAddress : undefined);
  const advertise =
    advertiseAddress !== undefined
      ? ['--advertise-address', advertiseAddress, '--endpoint-reconciler-type', 'lease']
      : // The apiserver refuses to publish a loopback address as the kubernetes Service's
        // endpoint, so without an advertised address there is none.
        ['--advertise-address', '127.0.0.1', '--endpoint-reconciler-type', 'none'];
  const aggregation =
    options.aggregation !== undefined ? aggregationFlags(options.aggregation) : [];
  await mkdir(join(dir, 'etcd'), { recursive: true, mode: 0o700 });
  const server = `https://${bindAddress}:${ports.apiserver}`;
  const files = {
    admin: join(dir, 'admin.kubeconfig'),
    kcm: join(dir, 'controller-manager.kubeconfig'),
    scheduler: join(dir, 'scheduler.kubeconfig'),
  };
  await writeFile(files.admin, kubeconfig(server, pki.ca.cert, pki.admin, 'admin'), {
    mode: 0o600,
  });
  await writeFile(
    files.kcm,
    kubeconfig(server, pki.ca.cert, pki.controllerManager, 'system:kube-controller-manager'),
    { mode: 0o600 },
  );
  await writeFile(
    files.scheduler,
    kubeconfig(server, pki.ca.cert, pki.scheduler, 'system:kube-scheduler'),
    { mode: 0o600 },
  );
  const ca = await readFile(pki.ca.cert);
  const admin = { cert: await readFile(pki.admin.cert), key: await readFile(pki.admin.key) };
  const log = (name: string): string => join(dir, `${name}.log`);

  const etcd = ComponentProcess.start({
    name: 'etcd',
    command: bin.etcd,
    args: [
      '--name',
      'berth',
      '--data-dir',
      join(dir, 'etcd'),
      '--listen-client-urls',
      `http://127.0.0.1:${ports.etcdClient}`,
      '--advertise-client-urls',
      `http://127.0.0.1:${ports.etcdClient}`,
      '--listen-peer-urls',
      `http://127.0.0.1:${ports.etcdPeer}`,
      '--initial-advertise-peer-urls',
      `http://127.0.0.1:${ports.etcdPeer}`,
      '--initial-cluster',
      `berth=http://127.0.0.1:${ports.etcdPeer}`,
      // A test cluster's data is disposable: skip fsync-heavy safety for speed.
      '--unsafe-no-fsync',
      '--log-level',
      'warn',
    ],
    logFile: log('etcd'),
    detached,
  });
  const processes: ComponentProcess[] = [etcd];
  await waitFor(
    'etcd /health',
    async () => {
      if (!etcd.alive()) throw new Error(`etcd exited:\n${await etcd.tail()}`);
      const res = await fetchLocal(`http://127.0.0.1:${ports.etcdClient}/health`, {
        timeoutMs: 1000,
      });
      return res.status === 200;
    },
    { timeoutMs: 30_000, describe: () => etcd.tail() },
  );

  const apiserver = ComponentProcess.start({
    name: 'kube-apiserver',
    command: bin.kubeApiserver,
    args: [
      '--etcd-servers',
      `http://127.0.0.1:${ports.etcdClient}`,
      '--bind-address',
      bindAddress,
      ...advertise,
      '--secure-port',
      String(ports.apiserver),
      '--cert-dir',
      join(dir, 'apiserver-certs'),
      '--tls-cert-file',
      pki.apiserver.cert,
      '--tls-private-key-file',
      pki.apiserver.key,
      '--client-ca-file',
      pki.ca.cert,
      '--service-account-key-file',
      pki.serviceAccountPub,
      '--service-account-signing-key-file',
      pki.serviceAccountKey,
      '--service-account-issuer',
      'https://kubernetes.default.svc.cluster.local',
      '--service-cluster-ip-range',
      SERVICE_CIDR,
      '--authorization-mode',
      'Node,RBAC',
      '--enable-admission-plugins',
      'NodeRestriction',
      '--enable-bootstrap-token-auth',
      '--allow-privileged',
      '--kubelet-client-certificate',
      pki.kubeletClient.cert,
      '--kubelet-client-key',
      pki.kubeletClient.key,
      '--kubelet-certificate-authority',
      pki.ca.cert,
      '--kubelet-preferred-address-types',
      'InternalIP,Hostname',
      ...aggregation,
      '--profiling=false',
    ],
    logFile: log('kube-apiserver'),
    detached,
  });
  processes.push(apiserver);
  await waitFor(
    'kube-apiserver /readyz',
    async () => {
      if (!apiserver.alive()) throw new Error(`kube-apiserver exited:\n${await apiserver.tail()}`);
      return healthy(`${server}/readyz`, ca, admin);
    },
    { timeoutMs: 90_000, intervalMs: 200, describe: () => apiserver.tail() },
  );

  const kcm = ComponentProcess.start({
    name: 'kube-controller-manager',
    command: bin.kubeControllerManager,
    args: [
      '--kubeconfig',
      files.kcm,
      '--authentication-kubeconfig',
      files.kcm,
      '--authorization-kubeconfig',
      files.kcm,
      '--bind-address',
      '127.0.0.1',
      '--secure-port',
      String(ports.controllerManager),
      '--leader-elect=false',
      '--use-service-account-credentials',
      '--controllers',
      '*,bootstrapsigner,tokencleaner',
      '--cluster-signing-cert-file',
      pki.ca.cert,
      '--cluster-signing-key-file',
      pki.ca.key,
      ...(options.clusterSigningDuration !== undefined
        ? ['--cluster-signing-duration', options.clusterSigningDuration]
        : []),
      '--root-ca-file',
      pki.ca.cert,
      '--service-account-private-key-file',
      pki.serviceAccountKey,
      '--allocate-node-cidrs',
      '--cluster-cidr',
      CLUSTER_CIDR,
      '--node-cidr-mask-size',
      '24',
      '--service-cluster-ip-range',
      SERVICE_CIDR,
      '--profiling=false',
    ],
    logFile: log('kube-controller-manager'),
    detached,
  });
  const scheduler = ComponentProcess.start({
    name: 'kube-scheduler',
    command: bin.kubeScheduler,
    args: [
      '--kubeconfig',
      files.scheduler,
      '--authentication-kubeconfig',
      files.scheduler,
      '--authorization-kubeconfig',
      files.scheduler,
      '--bind-address',
      '127.0.0.1',
      '--secure-port',
      String(ports.scheduler),
      '--leader-elect=false',
      '--profiling=false',
    ],
    logFile: log('kube-scheduler'),
    detached,
  });
  processes.push(kcm, scheduler);
  // Both serve self-signed certificates on their secure ports; /healthz needs no auth.
  await Promise.all(
    [
      { proc: kcm, port: ports.controllerManager },
      { proc: scheduler, port: ports.scheduler },
    ].map(({ proc, port }) =>
      waitFor(
        `${proc.name} /healthz`,
        async () => {
          if (!proc.alive()) throw new Error(`${proc.name} exited:\n${await proc.tail()}`);
          const res = await fetchLocal(`https://127.0.0.1:${port}/healthz`, {
            timeoutMs: 2000,
            ...insecure,
          });
          return res.status === 200;
        },
        { timeoutMs: 60_000, intervalMs: 200, describe: () => proc.tail() },
      ),
    ),
  );
  // Pods cannot be created before the service-account controller made "default".
  await waitFor(
    'the default service account',
    async () => {
      const res = await fetchLocal(`${server}/api/v1/namespaces/default/serviceaccounts/default`, {
        ca,
        ...admin,
        timeoutMs: 2000,
      });
      return res.status === 200;
    },
    { timeoutMs: 60_000, intervalMs: 200, describe: () => kcm.tail() },
  );
  return { server, ports, adminKubeconfig: files.admin, processes };
}

/** kube-apiserver flags for API aggregation, with the header names kubeadm uses. */
function aggregationFlags(frontProxy: FrontProxyPki): string[] {
  return [
    '--requestheader-client-ca-file',
    frontProxy.ca.cert,
    '--requestheader-allowed-names',
    frontProxy.clientName,
    '--requestheader-username-headers',
    'X-Remote-User',
    '--requestheader-group-headers',
    'X-Remote-Group',
    '--requestheader-extra-headers-prefix',
    'X-Remote-Extra-',
    '--proxy-client-cert-file',
    frontProxy.client.cert,
    '--proxy-client-key-file',
    frontProxy.client.key,
    '--enable-aggregator-routing=true',
  ];
}

// kube-controller-manager and kube-scheduler sign their own serving certificates.
const insecure = { rejectUnauthorized: false } as const;
