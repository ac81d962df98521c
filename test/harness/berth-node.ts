/**
 * Runs berth as a node of a test cluster: a separate process, as in production, so
 * tests can SIGTERM it, SIGKILL it and start it again over the same root directory.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Cluster } from './cluster.ts';
import { REPO_ROOT } from './binaries.ts';
import { freePort } from './net.ts';
import { createBootstrapToken, writeBootstrapKubeconfig } from './bootstrap.ts';
import { createNodeIdentity, type NodeIdentity } from './node-identity.ts';
import { ComponentProcess } from './process.ts';

export interface BerthNodeOptions {
  readonly nodeName?: string;
  /** Extra KubeletConfiguration fields (YAML lines, already indented at top level). */
  readonly extraConfig?: readonly string[];
  readonly extraArgs?: readonly string[];
  /** Keep running after this Node process exits (the demo). */
  readonly detached?: boolean;
  /**
   * Join with a bootstrap token instead of a ready-made identity: berth files the
   * client CSR itself (rotateCertificates) and a serving CSR (serverTLSBootstrap), which
   * the test must approve. The token: a valid one from createBootstrapToken by default.
   */
  readonly bootstrap?: { readonly token?: string };
  /** CRI socket of the runtime it drives (default: the cluster's containerd). */
  readonly runtimeSocket?: string;
  /**
   * Cgroup under which berth makes kubepods (default: the cluster's cgroup root). Must
   * be inside the cluster's cgroup root, or teardown would not remove it.
   */
  readonly cgroupRoot?: string;
  /**
   * The node's address (--node-ip, the API's listen address and a serving-certificate
   * SAN); default 127.0.0.1. The API server refuses to proxy to a loopback node
   * (nodes/proxy), so the conformance suite's node uses the pod bridge's gateway.
   */
  readonly nodeIp?: string;
  /** The kubelet API's port (default: a free port). */
  readonly port?: number;
  /**
   * Standalone mode: no --kubeconfig (static pods only), and the kubelet API with the
   * authentication that mode allows: x509 client certificates from the cluster CA,
   * webhook authentication off, authorization AlwaysAllow.
   */
  readonly standalone?: boolean;
  /** Extra environment for berth (e.g. DBUS_SYSTEM_BUS_ADDRESS), over this process's. */
  readonly env?: Readonly<Record<string, string>>;
}

export interface BerthNode {
  readonly nodeName: string;
  readonly identity: NodeIdentity;
  readonly dir: string;
  readonly configFile: string;
  readonly logFile: string;
  /** The kubelet API's HTTPS port and the healthz port (both on the node IP). */
  readonly port: number;
  readonly healthzPort: number;
  /** --container-log-symlink-dir: the node's /var/log/containers. */
  readonly containerLogSymlinkDir: string;
  /** --cert-dir (bootstrapped nodes keep their certificates here). */
  readonly certDir: string;
  readonly process: ComponentProcess;
  /** SIGTERM and wait (pods keep running). */
  stop(): Promise<void>;
  /** SIGKILL, no clean-up at all (crash). */
  kill(): Promise<void>;
  /** Starts berth again with the same identity, config and root. */
  restart(): Promise<BerthNode>;
}

/**
 * The launcher an operator runs (the pinned Node with berth's V8 heap settings).
 * BERTH_LAUNCHER in the environment replaces it, e.g. with one that adds --cpu-prof
 * to profile berth inside a benchmark.
 */
export const BERTH_LAUNCHER = process.env['BERTH_LAUNCHER'] ?? join(REPO_ROOT, 'bin/berth');

export async function startBerth(
  cluster: Cluster,
  options: BerthNodeOptions = {},
): Promise<BerthNode> {
  const nodeName = options.nodeName ?? `berth-${cluster.id}`;
  const cgroupRoot = options.cgroupRoot ?? cluster.state.cgroupRoot;
  if (
    cgroupRoot !== cluster.state.cgroupRoot &&
    !cgroupRoot.startsWith(`${cluster.state.cgroupRoot}/`)
  ) {
    throw new Error(
      `Cannot use cgroup root ${cgroupRoot} for node ${nodeName}: it must be under the cluster's ${cluster.state.cgroupRoot}`,
    );
  }
  const nodeIp = options.nodeIp ?? '127.0.0.1';
  const identity = await createNodeIdentity(cluster, nodeName, {
    ...(options.nodeIp !== undefined && { extraSans: [`IP:${options.nodeIp}`] }),
  });
  const dir = join(cluster.root, 'nodes', nodeName, 'berth');
  await mkdir(dir, { recursive: true });
  const port = options.port ?? (await freePort());
  const healthzPort = await freePort();
  const configFile = join(dir, 'config.yaml');
  const certDir = join(dir, 'pki');
  const bootstrap = options.bootstrap;
  const bootstrapKubeconfig = join(dir, 'bootstrap.kubeconfig');
  if (bootstrap !== undefined) {
    const token = bootstrap.token ?? (await createBootstrapToken(cluster)).token;
    await writeBootstrapKubeconfig(cluster, bootstrapKubeconfig, token);
  }
  const tls =
    bootstrap === undefined
      ? [
          `tlsCertFile: ${identity.servingCert.cert}`,
          `tlsPrivateKeyFile: ${identity.servingCert.key}`,
        ]
      : ['rotateCertificates: true', 'serverTLSBootstrap: true'];
  await writeFile(
    configFile,
    [
      'apiVersion: kubelet.config.k8s.io/v1beta1',
      'kind: KubeletConfiguration',
      `containerRuntimeEndpoint: unix://${options.runtimeSocket ?? cluster.runtime.socket}`,
      `cgroupRoot: ${cgroupRoot}`,
      'cgroupDriver: cgroupfs',
      `podLogsDir: ${join(dir, 'pod-logs')}`,
      `address: ${nodeIp}`,
      `port: ${port}`,
      `healthzPort: ${healthzPort}`,
      ...tls,
      'authentication:',
      '  x509:',
      `    clientCAFile: ${identity.caFile}`,
      ...(options.standalone === true
        ? ['  webhook:', '    enabled: false', 'authorization:', '  mode: AlwaysAllow']
        : []),
      'failSwapOn: false',
      'failCgroupV1: false',
      'maxParallelImagePulls: 5',
      'serializeImagePulls: false',
      ...(options.extraConfig ?? []),
      '',
    ].join('\n'),
  );
  const logFile = join(dir, 'berth.log');
  const containerLogSymlinkDir = join(dir, 'log-links');
  const args = [
    ...(options.standalone === true
      ? []
      : [
          '--kubeconfig',
          bootstrap === undefined ? identity.kubeconfig : join(dir, 'kubelet.kubeconfig'),
        ]),
    ...(bootstrap === undefined ? [] : ['--bootstrap-kubeconfig', bootstrapKubeconfig]),
    '--cert-dir',
    certDir,
    '--config',
    configFile,
    '--hostname-override',
    nodeName,
    '--node-ip',
    nodeIp,
    '--root-dir',
    dir,
    // Not the host's /var/log/containers: every node of every test has its own.
    '--container-log-symlink-dir',
    containerLogSymlinkDir,
    '--v',
    '2',
    ...(options.extraArgs ?? []),
  ];
  const start = (): BerthNode => {
    const proc = ComponentProcess.start({
      name: `berth-${nodeName}`,
      command: BERTH_LAUNCHER,
      args,
      logFile,
      detached: options.detached === true,
      ...(options.env !== undefined && { env: { ...process.env, ...options.env } }),
    });
    const node: BerthNode = {
      nodeName,
      identity,
      dir,
      configFile,
      logFile,
      port,
      healthzPort,
      containerLogSymlinkDir,
      certDir,
      process: proc,
      stop: () => proc.stop(30_000),
      kill: async () => {
        process.kill(proc.pid, 'SIGKILL');
        await proc.stop(1000);
      },
      restart: async () => {
        await proc.stop(30_000);
        return start();
      },
    };
    return node;
  };
  return start();
}
