/**
 * kube-proxy for a test cluster's node, in iptables mode, so pods reach the API server
 * through the kubernetes Service the way they do on a real node.
 *
 * iptables is host-global: two kube-proxies would rewrite each other's KUBE-* chains.
 * A host-wide flock (KUBE_PROXY_LOCK) is held by kube-proxy's supervisor process
 * (`flock -F` execs it, so the lock lives exactly as long as the proxy), and the
 * `--cleanup` at teardown runs under the same lock. Its configuration writes no
 * host-wide sysctl: conntrack limits and timeouts are left alone, localhost NodePorts
 * (route_localnet) are off, NodePorts only open on the pod bridge's gateway address.
 *
 * The kube-apiserver listens on loopback only; a forwarder process exposes it on the
 * gateway address (which exists only on this machine), the address the apiserver
 * advertises as the kubernetes Service's endpoint.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BerthError } from '../../src/util/errors.ts';
import { REPO_ROOT } from './binaries.ts';
import { run } from './exec.ts';
import { fetchLocal, freePort } from './net.ts';
import { kubeconfig, type CertPair } from './pki.ts';
import { ComponentProcess, waitFor } from './process.ts';

/** The host-wide lock that one kube-proxy (of any berth cluster) holds at a time. */
export const KUBE_PROXY_LOCK = '/run/berth-kube-proxy.lock';
/** flock's exit code when the lock is busy (EX_TEMPFAIL). */
const LOCK_BUSY = 75;
const NODE_BINARY = join(REPO_ROOT, 'node_modules/.bin/node');
const FORWARDER = join(REPO_ROOT, 'test/harness/tcp-forward.ts');
const SUPERVISOR = join(REPO_ROOT, 'test/harness/supervise.ts');

/** Another cluster (a demo, another test run) owns the host's KUBE-* chains. */
export class KubeProxyLockError extends BerthError {
  constructor(message: string) {
    super('BERTH_KUBE_PROXY_LOCK_HELD', message);
  }
}

/** What teardown needs to undo kube-proxy's host-wide changes (in cluster-state.json). */
export interface KubeProxyState {
  readonly binary: string;
  readonly lockFile: string;
  /** KUBE-* chains that existed before (e.g. the upstream kubelet's): not leaks. */
  readonly chainsBefore: readonly string[];
}

export interface KubeProxyOptions {
  readonly dir: string;
  readonly binary: string;
  readonly clusterId: string;
  /** https://127.0.0.1:<port> */
  readonly server: string;
  readonly caFile: string;
  /** Client certificate of user system:kube-proxy (bound to system:node-proxier). */
  readonly client: CertPair;
  /** The node kube-proxy serves (hostnameOverride); it need not exist yet. */
  readonly nodeName: string;
  /** The pod subnet (clusterCIDR: traffic from it is not masqueraded). */
  readonly podSubnet: string;
  /** The pod bridge's gateway address: NodePorts open only there. */
  readonly gateway: string;
  readonly detached: boolean;
  /** How long to wait for another cluster's kube-proxy to release the lock (default 0). */
  readonly lockWaitMs?: number;
  readonly log?: (message: string) => void;
}

export interface KubeProxy {
  readonly process: ComponentProcess;
  readonly nodeName: string;
  readonly configFile: string;
  readonly kubeconfig: string;
  readonly healthzPort: number;
  readonly metricsPort: number;
  readonly state: KubeProxyState;
}

/** Every KUBE-* chain of every table, IPv4 and IPv6, as "<family> <table> <chain>". */
export async function kubeChains(): Promise<string[]> {
  const out: string[] = [];
  for (const [family, save] of [
    ['ipv4', 'iptables-save'],
    ['ipv6', 'ip6tables-save'],
  ] as const) {
    const { stdout } = await run(save, []).catch(() => ({ stdout: '' }));
    let table = '';
    for (const line of stdout.split('\n')) {
      if (line.startsWith('*')) table = line.slice(1);
      const m = /^:(KUBE-\S+)/.exec(line);
      if (m?.[1] !== undefined) out.push(`${family} ${table} ${m[1]}`);
    }
  }
  return out;
}

/** True when nobody holds the lock right now (checked by taking it for an instant). */
async function lockFree(lockFile: string): Promise<boolean> {
  const { exitCode } = await run('flock', ['-n', '-E', String(LOCK_BUSY), lockFile, 'true'], {
    okCodes: [0, LOCK_BUSY],
  });
  return exitCode === 0;
}

/** Who wrote themselves into the lock file last (informational only). */
export async function lockHolder(lockFile = KUBE_PROXY_LOCK): Promise<string> {
  return (await readFile(lockFile, 'utf8').catch(() => '')).trim() || 'unknown';
}

/** The KubeProxyConfiguration: nothing in it may change a host-wide setting. */
export function kubeProxyConfig(o: {
  kubeconfig: string;
  nodeName: string;
  podSubnet: string;
  gateway: string;
  healthzPort: number;
  metricsPort: number;
}): string {
  return [
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1',
    'kind: KubeProxyConfiguration',
    'mode: iptables',
    'clientConnection:',
    `  kubeconfig: ${o.kubeconfig}`,
    `hostnameOverride: ${o.nodeName}`,
    // Without a Node object kube-proxy would guess its IP; the gateway is this node's.
    `bindAddress: ${o.gateway}`,
    `clusterCIDR: ${o.podSubnet}`,
    'detectLocalMode: ClusterCIDR',
    `healthzBindAddress: 127.0.0.1:${o.healthzPort}`,
    `metricsBindAddress: 127.0.0.1:${o.metricsPort}`,
    `nodePortAddresses: ["${o.gateway}/32"]`,
    // Zero means "leave the kernel's value": no nf_conntrack_max, hashsize or timeouts.
    'conntrack:',
    '  maxPerCore: 0',
    '  min: 0',
    '  tcpEstablishedTimeout: 0s',
    '  tcpCloseWaitTimeout: 0s',
    'iptables:',
    // localhost NodePorts need net.ipv4.conf.all.route_localnet=1, a host-wide sysctl.
    '  localhostNodePorts: false',
    '  masqueradeAll: false',
    '  syncPeriod: 30s',
    '  minSyncPeriod: 0s',
    'enableProfiling: false',
    '',
  ].join('\n');
}

/**
 * Starts a forwarder process from <gateway>:<port> to 127.0.0.1:<port>, the address
 * the apiserver advertises, so the kubernetes Service's endpoint reaches it.
 */
export async function exposeApiserver(o: {
  dir: string;
  gateway: string;
  port: number;
  detached: boolean;
}): Promise<ComponentProcess> {
  await mkdir(o.dir, { recursive: true, mode: 0o700 });
  const proc = ComponentProcess.start({
    name: 'apiserver-forwarder',
    command: NODE_BINARY,
    args: [FORWARDER, o.gateway, String(o.port), '127.0.0.1', String(o.port)],
    logFile: join(o.dir, 'apiserver-forwarder.log'),
    detached: o.detached,
  });
  await waitFor(
    `the apiserver forwarder on ${o.gateway}:${o.port}`,
    async () => {
      if (!proc.alive()) throw new Error(`the forwarder exited:\n${await proc.tail()}`);
      return (await proc.tail()).includes('listening on');
    },
    { timeoutMs: 15_000, intervalMs: 50, describe: () => proc.tail() },
  );
  return proc;
}

async function waitForLock(o: KubeProxyOptions): Promise<void> {
  const deadline = Date.now() + (o.lockWaitMs ?? 0);
  let said = false;
  while (!(await lockFree(KUBE_PROXY_LOCK))) {
    const holder = await lockHolder();
    if (Date.now() >= deadline) {
      throw new KubeProxyLockError(
        `Cannot start kube-proxy for cluster ${o.clusterId}: another berth cluster's kube-proxy holds ${KUBE_PROXY_LOCK} (${holder}); iptables is host-global, so only one may run. Stop that cluster (e.g. make demo-stop) or pass kubeProxyLockWaitMs to wait.`,
      );
    }
    if (!said) o.log?.(`kube-proxy: waiting for ${KUBE_PROXY_LOCK}, held by ${holder}`);
    said = true;
    await sleep(500);
  }
}

/** Starts kube-proxy under the host-wide lock; throws KubeProxyLockError when it is held. */
export async function startKubeProxy(o: KubeProxyOptions): Promise<KubeProxy> {
  await mkdir(o.dir, { recursive: true, mode: 0o700 });
  const kubeconfigFile = join(o.dir, 'kube-proxy.kubeconfig');
  await writeFile(kubeconfigFile, kubeconfig(o.server, o.caFile, o.client, 'system:kube-proxy'), {
    mode: 0o600,
  });
  const [healthzPort, metricsPort] = await Promise.all([freePort(), freePort()]);
  const configFile = join(o.dir, 'kube-proxy.yaml');
  await writeFile(
    configFile,
    kubeProxyConfig({ kubeconfig: kubeconfigFile, ...o, healthzPort, metricsPort }),
  );
  await waitForLock(o);
  const state: KubeProxyState = {
    binary: o.binary,
    lockFile: KUBE_PROXY_LOCK,
    chainsBefore: await kubeChains(),
  };
  const proc = ComponentProcess.start({
    name: 'kube-proxy',
    command: 'flock',
    // -F: flock execs the supervisor, which (like kube-proxy, its child) inherits the
    // locked descriptor; no flock process stays in between to swallow teardown's
    // SIGTERM. The supervisor restarts kube-proxy, which exits by design when its Node
    // object appears or changes addresses.
    args: [
      '-n',
      '-F',
      '-E',
      String(LOCK_BUSY),
      KUBE_PROXY_LOCK,
      NODE_BINARY,
      SUPERVISOR,
      o.binary,
      '--config',
      configFile,
      '--v',
      '2',
    ],
    logFile: join(o.dir, 'kube-proxy.log'),
    detached: o.detached,
  });
  try {
    await waitFor(
      'kube-proxy /livez and its first sync',
      async () => {
        if (!proc.alive()) {
          throw new Error(
            `kube-proxy exited (a kube-proxy of another cluster may have taken ${KUBE_PROXY_LOCK}: ${await lockHolder()}):\n${await proc.tail()}`,
          );
        }
        // /livez: /healthz also answers 503 while the Node object does not exist, and the
        // node may register only after kube-proxy runs.
        const res = await fetchLocal(`http://127.0.0.1:${healthzPort}/livez`, {
          timeoutMs: 1000,
        });
        return res.status === 200 && (await proc.tail(400)).includes('SyncProxyRules complete');
      },
      { timeoutMs: 60_000, intervalMs: 200, describe: () => proc.tail() },
    );
  } catch (err) {
    // Not yet recorded in the cluster's state: undo its iptables changes here.
    await proc.stop(5000);
    await cleanupKubeProxy(state, o.log);
    throw err;
  }
  await writeFile(
    KUBE_PROXY_LOCK,
    `cluster ${o.clusterId}, kube-proxy pid ${proc.pid}, config ${configFile}\n`,
  );
  return {
    process: proc,
    nodeName: o.nodeName,
    configFile,
    kubeconfig: kubeconfigFile,
    healthzPort,
    metricsPort,
    state,
  };
}

/**
 * Removes kube-proxy's iptables rules and chains (`kube-proxy --cleanup`) after the
 * proxy stopped, under the lock; if another cluster's kube-proxy took the lock in the
 * meantime, the chains are its now and stay.
 */
export async function cleanupKubeProxy(
  state: KubeProxyState,
  log: (m: string) => void = () => undefined,
): Promise<void> {
  const res = await run(
    'flock',
    ['-w', '10', '-E', String(LOCK_BUSY), state.lockFile, state.binary, '--cleanup', '--v', '0'],
    { okCodes: [0, 1, LOCK_BUSY] },
  ).catch((err: unknown) => {
    log(`kube-proxy --cleanup: ${String(err)}`);
    return undefined;
  });
  if (res?.exitCode === LOCK_BUSY) {
    log(`kube-proxy --cleanup skipped: ${state.lockFile} is held by ${await lockHolder()}`);
  } else if (res !== undefined && res.exitCode !== 0) {
    // Cleanup also tries the ipvs and nftables back-ends; their errors are expected
    // here, and what matters (the KUBE-* chains) is checked by the leak check.
    log(`kube-proxy --cleanup exited ${res.exitCode}: ${res.stderr.trim().slice(-500)}`);
  }
  if (res?.exitCode === LOCK_BUSY) return;
  // --cleanup leaves the filter table's KUBE-FIREWALL (kube-proxy shares it with the
  // kubelet, so it never deletes it): on a machine where no kubelet made it first, it is
  // this proxy's and goes too, with the INPUT/OUTPUT jumps to it.
  const before = new Set(state.chainsBefore);
  for (const chain of await kubeChains()) {
    if (before.has(chain)) continue;
    await removeChain(chain).catch((err: unknown) => {
      log(`removing ${chain}: ${String(err)}`);
    });
  }
}

/** Deletes "<family> <table> <chain>": every rule jumping to it, its rules, then it. */
async function removeChain(chain: string): Promise<void> {
  const [family, table, name] = chain.split(' ');
  if (table === undefined || name === undefined) return;
  const bin = family === 'ipv6' ? 'ip6tables' : 'iptables';
  const { stdout } = await run(bin, ['-w', '5', '-t', table, '-S']);
  for (const rule of stdout.split('\n')) {
    if (!rule.startsWith('-A ') || !rule.endsWith(` -j ${name}`)) continue;
    // Only plain jumps ("-A INPUT -j KUBE-FIREWALL") are undone: their words need no quoting.
    const words = rule.slice(3).split(' ');
    if (words.length !== 3) continue;
    await run(bin, ['-w', '5', '-t', table, '-D', ...words]);
  }
  await run(bin, ['-w', '5', '-t', table, '-F', name]);
  await run(bin, ['-w', '5', '-t', table, '-X', name]);
}

/** KUBE-* chains kube-proxy left behind, unless another cluster's kube-proxy owns them now. */
export async function kubeProxyLeaks(state: KubeProxyState): Promise<string[]> {
  if (!(await lockFree(state.lockFile))) return [];
  const before = new Set(state.chainsBefore);
  return (await kubeChains())
    .filter((c) => !before.has(c))
    .map((c) => `iptables chain ${c} still exists`);
}
