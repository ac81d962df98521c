/**
 * The upstream kubelet (the pinned Kubernetes release) as a node of a test cluster: the
 * reference berth is compared with, in tests and benchmarks. Every file it writes is
 * kept under <cluster root>/nodes/<node>/ and its cgroups under the cluster's cgroup
 * root, so `cluster.stop()` removes them and `cluster.leaks()` finds what it would not.
 *
 * What running it on this machine takes (cgroup v1 hybrid, no systemd as PID 1, root
 * without CAP_SYS_RESOURCE, no swap):
 * - failCgroupV1 false (refused by default since 1.35), failSwapOn false, cgroupfs;
 * - the cgroup root must exist in every v1 hierarchy before the kubelet starts (it
 *   checks cpu, cpuacct, cpuset, memory, pids and name=systemd);
 * - oomScoreAdj equal to our own score and maxOpenFiles at our hard limit: lowering
 *   the one and raising the other need CAP_SYS_RESOURCE;
 * - disk eviction thresholds lowered to 1% and image GC off (busybox is preloaded and
 *   pulled with policy Never: garbage-collecting it would fail every later pod);
 * - makeIPTablesUtilChains false: it would add KUBE-FIREWALL and hint chains to the
 *   machine's iptables.
 *
 * A few paths are compiled into the kubelet: /var/log/containers (log symlinks),
 * /var/lib/kubelet/device-plugins (device manager socket) and six kernel tunables it
 * sets at start (vm.overcommit_memory, kernel.panic, ...). Configuration cannot move
 * them, so the kubelet runs in its own mount namespace where /var/log and /var/lib are
 * directories of the node and each of those /proc/sys files is a plain file holding the
 * machine's value. Its root directory is a shared bind mount made before the namespace
 * is, so volume mounts it makes there still reach containerd in the machine's namespace.
 *
 * `--node-ip 127.0.0.1` keeps it from looking up addresses (DNS, default route), but
 * the kubelet refuses a loopback node IP and then publishes no address at all; the
 * harness publishes InternalIP 127.0.0.1 itself (the kubelet leaves addresses it cannot
 * compute alone), so the apiserver reaches the node's server for logs and exec.
 */
import { mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { GrpcCriClient } from '../../src/cri/index.ts';
import type { Cluster } from './cluster.ts';
import { run } from './exec.ts';
import { freePort } from './net.ts';
import { createNodeIdentity, type NodeIdentity } from './node-identity.ts';
import { ComponentProcess, waitFor } from './process.ts';

export interface UpstreamKubeletOptions {
  readonly nodeName: string;
  /** Port of the kubelet's HTTPS server on 127.0.0.1 (default: a free port). */
  readonly port?: number;
  /** Port of /healthz on 127.0.0.1 (default: a free port). */
  readonly healthzPort?: number;
  /**
   * Cgroup (cgroupfs path) under which the kubelet makes kubepods; must be inside the
   * cluster's cgroup root. Default <cluster cgroup root>/<nodeName>: a kubepods tree
   * per node, so node agents run one after another on one cluster never meet each
   * other's pod cgroups (a kubelet removes pod cgroups it does not know).
   */
  readonly cgroupRoot?: string;
  /** CRI socket of the runtime it drives (default: the cluster's containerd). */
  readonly runtimeSocket?: string;
  /** klog verbosity (default 0, the kubelet's own default). */
  readonly verbosity?: number;
  /** KubeletConfiguration fields merged over the harness's (shallow). */
  readonly config?: Readonly<Record<string, unknown>>;
  /**
   * A non-loopback node address (--node-ip, the server's listen address and a serving
   * SAN), which the kubelet publishes itself; the conformance suite's node uses the pod
   * bridge's gateway so the API server proxies to it. Default: 127.0.0.1, published by
   * the harness (see the file comment).
   */
  readonly nodeIp?: string;
  /** Publish InternalIP 127.0.0.1 on the Node (default true unless nodeIp); see the file comment. */
  readonly publishLoopbackAddress?: boolean;
  /**
   * The kubeconfig it reaches the API server with (default: its node identity's), e.g.
   * one naming a proxy in front of kube-apiserver.
   */
  readonly kubeconfig?: string;
  /** How long to wait for the Node to be Ready (default 120 s). */
  readonly readyTimeoutMs?: number;
  readonly log?: (message: string) => void;
}

export interface UpstreamKubelet {
  readonly nodeName: string;
  /** The kubelet process now (a new one after `restart`). */
  readonly process: ComponentProcess;
  readonly port: number;
  readonly healthzPort: number;
  readonly identity: NodeIdentity;
  /** <cluster root>/nodes/<nodeName>: everything the kubelet writes is under it. */
  readonly dir: string;
  readonly rootDir: string;
  readonly podLogsDir: string;
  readonly configFile: string;
  readonly cgroupRoot: string;
  /**
   * Stops the kubelet, removes its pod sandboxes through CRI, unmounts what it left
   * mounted, removes its cgroups, then deletes its Node and the pods bound to it.
   * Idempotent; the cluster keeps running.
   */
  stop(): Promise<void>;
  /** SIGKILL (a crash): the pods, mounts and cgroups stay as they are. */
  kill(): Promise<void>;
  /**
   * Starts the kubelet again with the same command line, in a new mount namespace of
   * its own, over the same root directory (after `kill`, or a stop of the process
   * alone); resolves once it runs, not once the Node is Ready.
   */
  restart(): Promise<void>;
}

const CGROUP_FS = '/sys/fs/cgroup';

/** The kernel tunables the kubelet's container manager sets (component-helpers sysctl). */
const KUBELET_SYSCTLS = [
  'vm/overcommit_memory',
  'vm/panic_on_oom',
  'kernel/panic',
  'kernel/panic_on_oops',
  'kernel/keys/root_maxkeys',
  'kernel/keys/root_maxbytes',
] as const;

/**
 * Run by `sh -c` inside the new mount namespace; fixed text, every path comes in as an
 * argument. Pairs "source target" up to "--", then the command. The mount holding
 * each target is made private first (not recursively), so the bind never propagates
 * back to the machine's namespace while other mounts, such as the node's root
 * directory, keep propagating.
 */
const NAMESPACE_SCRIPT = [
  'set -e',
  'while [ "$1" != "--" ]; do',
  '  mount --make-private "$(findmnt -n -o TARGET -T "$2")"',
  '  mount --bind "$1" "$2"',
  '  shift 2',
  'done',
  'shift',
  'exec "$@"',
].join('\n');

/** Every cgroup v1 hierarchy mounted under /sys/fs/cgroup (the kubelet needs each). */
async function v1Hierarchies(): Promise<string[]> {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const [before, after] = line.split(' - ');
    if (before === undefined || after === undefined) continue;
    const mountPoint = before.split(' ')[4] ?? '';
    if (after.startsWith('cgroup ') && mountPoint.startsWith(`${CGROUP_FS}/`)) out.push(mountPoint);
  }
  return out;
}

/** Creates `cgroupRoot` in every v1 hierarchy; new cpuset levels inherit cpus and mems. */
async function createCgroupRoot(cgroupRoot: string): Promise<void> {
  const levels = cgroupRoot.split('/').filter((s) => s !== '');
  for (const hierarchy of await v1Hierarchies()) {
    let dir = hierarchy;
    for (const level of levels) {
      const parent = dir;
      dir = join(dir, level);
      await mkdir(dir, { recursive: true });
      if (hierarchy.endsWith('/cpuset')) {
        for (const file of ['cpuset.cpus', 'cpuset.mems']) {
          const own = (await readFile(join(dir, file), 'utf8')).trim();
          if (own === '') await writeFile(join(dir, file), await readFile(join(parent, file)));
        }
      }
    }
  }
}

/**
 * Removes cgroup `cgroupRoot` and everything below it in every hierarchy, deepest
 * first; best effort (a cgroup still holding a process stays).
 */
export async function removeCgroupTree(cgroupRoot: string): Promise<void> {
  const walk = async (dir: string, out: string[]): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const e of entries) if (e.isDirectory()) await walk(join(dir, e.name), out);
    out.push(dir);
  };
  for (const hierarchy of await readdir(CGROUP_FS).catch(() => [])) {
    const dirs: string[] = [];
    await walk(join(CGROUP_FS, hierarchy, cgroupRoot), dirs);
    for (const d of dirs) await rmdir(d).catch(() => undefined);
  }
}

/**
 * The hard limit on open files of this process (the kubelet inherits it): raising its
 * own limit above that needs CAP_SYS_RESOURCE, so the kubelet is asked for no more.
 */
async function openFilesHardLimit(): Promise<number> {
  const limits = await readFile('/proc/self/limits', 'utf8');
  const hard = /^Max open files\s+\S+\s+(\d+)/m.exec(limits)?.[1];
  // "unlimited" never applies to open files; the kubelet's default is 1000000.
  return hard === undefined ? 1_000_000 : Number(hard);
}

/** Mount points at or below `dir` in this namespace, deepest first. */
async function mountsUnder(dir: string): Promise<string[]> {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  return text
    .split('\n')
    .map((l) =>
      (l.split(' ')[4] ?? '').replace(/\\(\d{3})/g, (_m, o: string) =>
        String.fromCharCode(parseInt(o, 8)),
      ),
    )
    .filter((m) => m === dir || m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

export async function unmountAll(dir: string): Promise<void> {
  for (const m of await mountsUnder(dir)) {
    await run('umount', [m]).catch(() => run('umount', ['-l', m]).catch(() => undefined));
  }
}

interface NodeCondition {
  readonly type?: string;
  readonly status?: string;
  readonly reason?: string;
  readonly message?: string;
}

interface NodeView {
  readonly status?: {
    readonly conditions?: readonly NodeCondition[];
    readonly addresses?: readonly { readonly type?: string; readonly address?: string }[];
  };
}

/**
 * kubectl as admin with its discovery cache under the cluster root (kubectl's default,
 * ~/.kube/cache, would outlive the cluster).
 */
function kubectl(cluster: Cluster, args: readonly string[]): Promise<string> {
  return cluster.kubectl(['--cache-dir', join(cluster.root, 'kubectl-cache'), ...args]);
}

async function getNode(cluster: Cluster, nodeName: string): Promise<NodeView | undefined> {
  const out = await kubectl(cluster, [
    'get',
    'node',
    nodeName,
    '-o',
    'json',
    '--ignore-not-found',
  ]).catch(() => '');
  return out.trim() === '' ? undefined : (JSON.parse(out) as NodeView);
}

/**
 * Removes the sandboxes of the pods this kubelet made: those whose cgroups are under
 * its cgroup root (containerd reports the runtime spec's cgroupsPath when verbose).
 */
async function removeNodeSandboxes(
  socket: string,
  cgroupRoot: string,
  log: (m: string) => void,
): Promise<void> {
  const client = new GrpcCriClient(socket, { defaultTimeoutMs: 30_000 });
  try {
    const { items } = await client.runtime.listPodSandbox({});
    for (const sandbox of items) {
      const status = await client.runtime
        .podSandboxStatus({ podSandboxId: sandbox.id, verbose: true })
        .catch(() => undefined);
      const info = status?.info['info'] ?? '';
      if (!info.includes(`"${cgroupRoot}/`)) continue;
      await client.runtime.stopPodSandbox({ podSandboxId: sandbox.id }).catch((e: unknown) => {
        log(`stop sandbox ${sandbox.id}: ${String(e)}`);
      });
      await client.runtime.removePodSandbox({ podSandboxId: sandbox.id }).catch((e: unknown) => {
        log(`remove sandbox ${sandbox.id}: ${String(e)}`);
      });
    }
  } finally {
    client.close();
  }
}

/** The KubeletConfiguration the harness runs with (before `options.config`). */
function kubeletConfiguration(p: {
  cluster: Cluster;
  identity: NodeIdentity;
  port: number;
  healthzPort: number;
  cgroupRoot: string;
  runtimeSocket: string;
  podLogsDir: string;
  volumePluginDir: string;
  oomScoreAdj: number;
  maxOpenFiles: number;
}): Record<string, unknown> {
  return {
    kind: 'KubeletConfiguration',
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    address: '127.0.0.1',
    port: p.port,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: p.healthzPort,
    tlsCertFile: p.identity.servingCert.cert,
    tlsPrivateKeyFile: p.identity.servingCert.key,
    authentication: {
      x509: { clientCAFile: p.cluster.pki.ca.cert },
      webhook: { enabled: true },
      anonymous: { enabled: false },
    },
    authorization: { mode: 'Webhook' },
    containerRuntimeEndpoint: `unix://${p.runtimeSocket}`,
    cgroupDriver: 'cgroupfs',
    cgroupRoot: p.cgroupRoot,
    cgroupsPerQOS: true,
    failCgroupV1: false,
    failSwapOn: false,
    podLogsDir: p.podLogsDir,
    volumePluginDir: p.volumePluginDir,
    serializeImagePulls: false,
    registerNode: true,
    oomScoreAdj: p.oomScoreAdj,
    maxOpenFiles: p.maxOpenFiles,
    makeIPTablesUtilChains: false,
    evictionHard: {
      'memory.available': '100Mi',
      'nodefs.available': '1%',
      'nodefs.inodesFree': '1%',
      'imagefs.available': '1%',
      'imagefs.inodesFree': '1%',
    },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
  };
}

/** Starts the upstream kubelet as node `nodeName` and waits until the Node is Ready. */
export async function startUpstreamKubelet(
  cluster: Cluster,
  options: UpstreamKubeletOptions,
): Promise<UpstreamKubelet> {
  const { nodeName } = options;
  const log = options.log ?? (() => undefined);
  const identity = await createNodeIdentity(cluster, nodeName, {
    ...(options.nodeIp !== undefined && { extraSans: [`IP:${options.nodeIp}`] }),
  });
  const dir = join(cluster.root, 'nodes', nodeName);
  const cgroupRoot = options.cgroupRoot ?? `${cluster.state.cgroupRoot}/${nodeName}`;
  const runtimeSocket = options.runtimeSocket ?? cluster.runtime.socket;
  if (!cgroupRoot.startsWith(`${cluster.state.cgroupRoot}/`)) {
    throw new Error(
      `Cannot use cgroup root ${cgroupRoot} for node ${nodeName}: it must be under the cluster's ${cluster.state.cgroupRoot}, or teardown would not remove it`,
    );
  }
  for (const hidden of ['/var/lib', '/var/log']) {
    if (cluster.root === hidden || cluster.root.startsWith(`${hidden}/`)) {
      throw new Error(
        `Cannot run the upstream kubelet for a cluster under ${cluster.root}: ${hidden} is replaced in the kubelet's mount namespace`,
      );
    }
  }
  const rootDir = join(dir, 'kubelet');
  const podLogsDir = join(dir, 'pod-logs');
  const volumePluginDir = join(dir, 'volume-plugins');
  const standIns = join(dir, 'host');
  const varLog = join(standIns, 'var-log');
  const varLib = join(standIns, 'var-lib');
  for (const d of [rootDir, podLogsDir, volumePluginDir, varLog, varLib]) {
    await mkdir(d, { recursive: true, mode: 0o750 });
  }
  const binds: string[] = [varLog, '/var/log', varLib, '/var/lib'];
  for (const name of KUBELET_SYSCTLS) {
    const file = join(standIns, `sysctl-${name.replaceAll('/', '.')}`);
    await writeFile(file, await readFile(join('/proc/sys', name)));
    binds.push(file, join('/proc/sys', name));
  }
  const [port, healthzPort] = await Promise.all([
    options.port ?? freePort(),
    options.healthzPort ?? freePort(),
  ]);
  const oomScoreAdj = Number((await readFile('/proc/self/oom_score_adj', 'utf8')).trim());
  const maxOpenFiles = await openFilesHardLimit();
  const configFile = join(dir, 'kubelet-config.json');
  const config = {
    ...kubeletConfiguration({
      cluster,
      identity,
      port,
      healthzPort,
      cgroupRoot,
      runtimeSocket,
      podLogsDir,
      volumePluginDir,
      oomScoreAdj,
      maxOpenFiles,
    }),
    ...(options.nodeIp !== undefined && { address: options.nodeIp }),
    ...options.config,
  };
  await writeFile(configFile, JSON.stringify(config, null, 2) + '\n');
  await createCgroupRoot(cgroupRoot);

  // The root directory as a shared mount of the machine's namespace: the namespace made
  // next holds a peer of it, so the kubelet's volume mounts propagate out to containerd.
  await run('mount', ['--bind', rootDir, rootDir]);
  await run('mount', ['--make-shared', rootDir]);

  const spec = {
    name: `kubelet-${nodeName}`,
    command: 'unshare',
    args: [
      '--mount',
      '--propagation',
      'unchanged',
      '--',
      '/bin/sh',
      '-c',
      NAMESPACE_SCRIPT,
      'berth-kubelet-namespace',
      ...binds,
      '--',
      cluster.bin.kubelet,
      '--config',
      configFile,
      '--kubeconfig',
      options.kubeconfig ?? identity.kubeconfig,
      '--hostname-override',
      nodeName,
      '--node-ip',
      options.nodeIp ?? '127.0.0.1',
      '--root-dir',
      rootDir,
      '--cert-dir',
      join(identity.dir, 'kubelet-certs'),
      '--v',
      String(options.verbosity ?? 0),
    ],
    logFile: join(dir, 'kubelet.log'),
  };
  let proc = ComponentProcess.start(spec);

  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      await proc.stop(10_000);
      await removeNodeSandboxes(runtimeSocket, cgroupRoot, log).catch((e: unknown) => {
        log(`removing sandboxes of ${nodeName}: ${String(e)}`);
      });
      await unmountAll(rootDir);
      await removeCgroupTree(cgroupRoot);
      await kubectl(cluster, [
        'delete',
        'pods',
        '--all-namespaces',
        '--field-selector',
        `spec.nodeName=${nodeName}`,
        '--force',
        '--grace-period=0',
        '--wait=false',
      ]).catch((e: unknown) => {
        log(`deleting pods of ${nodeName}: ${String(e)}`);
      });
      await kubectl(cluster, [
        'delete',
        'node',
        nodeName,
        '--ignore-not-found',
        '--wait=false',
      ]).catch((e: unknown) => {
        log(`deleting node ${nodeName}: ${String(e)}`);
      });
    })();
    return stopped;
  };

  try {
    let last: NodeView | undefined;
    let published = options.publishLoopbackAddress === false || options.nodeIp !== undefined;
    await waitFor(
      `node ${nodeName} to be Ready`,
      async () => {
        if (!proc.alive()) throw new Error(`the kubelet exited:\n${await proc.tail(40)}`);
        last = await getNode(cluster, nodeName);
        if (last === undefined) return false;
        if (!published) {
          await publishLoopbackAddress(cluster, nodeName);
          published = true;
        }
        const ready = last.status?.conditions?.find((c) => c.type === 'Ready');
        return ready?.status === 'True';
      },
      {
        timeoutMs: options.readyTimeoutMs ?? 120_000,
        intervalMs: 250,
        describe: async () =>
          `conditions: ${JSON.stringify(last?.status?.conditions ?? [])}\n${await proc.tail(40)}`,
      },
    );
  } catch (err) {
    await stop();
    throw err;
  }
  log(`kubelet ${nodeName}: Ready (pid ${proc.pid}, port ${port})`);
  return {
    nodeName,
    get process() {
      return proc;
    },
    port,
    healthzPort,
    identity,
    dir,
    rootDir,
    podLogsDir,
    configFile,
    cgroupRoot,
    stop,
    async kill() {
      try {
        process.kill(proc.pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
      while (proc.alive()) await sleep(20);
    },
    async restart() {
      if (stopped !== undefined) throw new Error(`Cannot restart ${nodeName}: it was stopped`);
      if (proc.alive()) throw new Error(`Cannot restart ${nodeName}: pid ${proc.pid} runs`);
      proc = ComponentProcess.start(spec);
      await waitFor(`the kubelet ${nodeName} to run`, () => Promise.resolve(proc.alive()), {
        timeoutMs: 5000,
      });
    },
  };
}

/** Sets InternalIP 127.0.0.1 and Hostname on the Node's status (as admin). */
async function publishLoopbackAddress(cluster: Cluster, nodeName: string): Promise<void> {
  const patch = {
    status: {
      addresses: [
        { type: 'InternalIP', address: '127.0.0.1' },
        { type: 'Hostname', address: nodeName },
      ],
    },
  };
  await kubectl(cluster, [
    'patch',
    'node',
    nodeName,
    '--subresource=status',
    '--type=merge',
    '-p',
    JSON.stringify(patch),
  ]);
}
