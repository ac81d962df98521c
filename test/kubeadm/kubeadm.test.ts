/**
 * A kubeadm control-plane node on berth (issue 27's acceptance): `kubeadm init` with
 * berth as the node's kubelet, started by the test from exactly the files kubeadm
 * writes (/var/lib/kubelet/config.yaml, kubeadm-flags.env, the kubeconfigs), on a
 * private containerd from the harness with kubeadm's images (built from the project's
 * binaries, hack/images/kubeadm.ts) preloaded. Checks: etcd, kube-apiserver,
 * kube-controller-manager and kube-scheduler run as static pods with mirror pods in
 * kube-system; the node registered with the client certificate berth obtained through
 * the certificates API and is Ready; every pod, CoreDNS and kube-proxy included, is
 * Running. Then `kubeadm reset -f` and the harness's teardown leave nothing behind.
 *
 * Host-wide: kubeadm writes /etc/kubernetes, /var/lib/kubelet and /var/lib/etcd and binds
 * fixed ports, so the test holds a host-wide lock (and kube-proxy's, since kubeadm's
 * kube-proxy DaemonSet rewrites the host's iptables) and moves whatever it finds at those
 * paths aside, putting it back at the end. Its own tier: `make test-kubeadm`.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildKubeadmImages } from '../../hack/images/kubeadm.ts';
import { BERTH_LAUNCHER } from '../harness/berth-node.ts';
import { binaries, cacheDir, pinnedVersions, REPO_ROOT } from '../harness/binaries.ts';
import { pickSubnetPrefix } from '../harness/cluster.ts';
import { importImage, startContainerd, type Containerd } from '../harness/containerd.ts';
import { run } from '../harness/exec.ts';
import { cleanupKubeProxy, KUBE_PROXY_LOCK, kubeChains } from '../harness/kube-proxy.ts';
import { ComponentProcess, waitFor } from '../harness/process.ts';
import { findLeaks, teardownCluster, type ClusterState } from '../harness/teardown.ts';
import { kubeadmConfig, SERVICE_SUBNET } from './config.ts';
import {
  holdLock,
  hostLeftovers,
  kubeadmFlags,
  KUBEADM_LOCK,
  restoreHostPaths,
  saveHostPaths,
  type HeldLock,
} from './host.ts';

const NODE_NAME = 'berth-kubeadm';
const ADMIN_CONF = '/etc/kubernetes/admin.conf';
const CONTROL_PLANE = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'];
/**
 * Preflight checks that cannot hold on this host, by name:
 * - Swap: kubeadm's check; berth itself refuses swap (failSwapOn), so nothing is lost.
 * - SystemVerification: reads the kernel config and systemd's cgroup set-up, neither of
 *   which this container has.
 * - Service-Kubelet: the kubelet is no systemd unit here; the test starts berth.
 */
/*
 * - FileContent--proc-sys-net-ipv4-ip_forward: the harness keeps forwarding off so that
 *   pod traffic cannot leave the machine (containerd.ts); nothing here needs it: pods
 *   reach the API through the gateway (kube-proxy's DNAT to a local address).
 */
const IGNORED_PREFLIGHT = [
  'Swap',
  'SystemVerification',
  'Service-Kubelet',
  'FileContent--proc-sys-net-ipv4-ip_forward',
];

interface Pod {
  metadata: {
    name: string;
    namespace: string;
    annotations?: Record<string, string>;
    ownerReferences?: { kind: string; name: string }[];
  };
  status: {
    phase?: string;
    podIP?: string;
    hostIP?: string;
    conditions?: { type: string; status: string }[];
  };
}

describe('kubeadm init with berth as the kubelet', { timeout: 900_000 }, () => {
  const id = randomBytes(3).toString('hex');
  const bin = binaries();
  const k8sVersion = pinnedVersions()['KUBERNETES_VERSION'] ?? '';
  const kubeadm = join(cacheDir(), 'bin', `kubernetes-${k8sVersion}`, 'kubeadm');
  const log = (m: string): void => {
    process.stderr.write(`# kubeadm ${id}: ${m}\n`);
  };
  let root = '';
  let backup = '';
  const saved: string[] = [];
  let locks: HeldLock[] = [];
  let runtime: Containerd | undefined;
  let berth: ComponentProcess | undefined;
  let state: ClusterState | undefined;
  let init: Promise<{ stdout: string; stderr: string; exitCode: number }> | undefined;
  const processes: ClusterState['processes'][number][] = [];

  const kubectl = async (args: readonly string[]): Promise<string> =>
    (await run(bin.kubectl, ['--kubeconfig', ADMIN_CONF, ...args])).stdout;
  const pods = async (): Promise<Pod[]> =>
    (JSON.parse(await kubectl(['get', 'pods', '-A', '-o', 'json'])) as { items: Pod[] }).items;

  before(async () => {
    locks.push(await holdLock(KUBEADM_LOCK, 'the kubeadm test'));
    locks.push(await holdLock(KUBE_PROXY_LOCK, "the kubeadm test's kube-proxy DaemonSet"));
    await writeFile(KUBE_PROXY_LOCK, `kubeadm test ${id} (pid ${String(process.pid)})\n`);
    root = await mkdtemp(join(tmpdir(), `berth-kubeadm-${id}-`));
    // Next to the paths it saves, so moving them aside and back is a rename.
    backup = `/var/lib/berth-kubeadm-saved-${id}`;
    const chainsBefore = await kubeChains();
    await saveHostPaths(backup, saved);
    log(`saved ${saved.join(', ') || 'nothing'}; working in ${root}`);

    const subnetPrefix = await pickSubnetPrefix();
    const gateway = `${subnetPrefix}.1`;
    const cgroupRoot = `/berth-kubeadm-${id}`;
    state = {
      id,
      root,
      bridge: `bthk${id}`,
      cgroupRoot,
      runtimeSocket: join(root, 'containerd', 'containerd.sock'),
      kubeProxy: { binary: bin.kubeProxy, lockFile: KUBE_PROXY_LOCK, chainsBefore },
      processes,
    };
    const configFile = join(root, 'kubeadm.yaml');
    await writeFile(
      configFile,
      kubeadmConfig({
        nodeName: NODE_NAME,
        kubernetesVersion: k8sVersion,
        advertiseAddress: gateway,
        criSocket: state.runtimeSocket,
        cgroupRoot,
        podSubnet: `${subnetPrefix}.0/24`,
        ignorePreflightErrors: IGNORED_PREFLIGHT,
      }),
    );
    const refs = (await run(kubeadm, ['config', 'images', 'list', '--config', configFile])).stdout
      .split('\n')
      .filter((l) => l !== '');
    log(`building ${refs.join(' ')}`);
    const images = await buildKubeadmImages(refs);
    const pause = refs.find((r) => r.includes('/pause:')) ?? '';
    runtime = await startContainerd({
      kind: 'containerd2',
      dir: join(root, 'containerd'),
      bin,
      sandboxImage: pause,
      // No registry: every image is preloaded and kubeadm's imagePullPolicy is Never.
      registryHost: 'no-registry.berth.local',
      registryCa: '/dev/null',
      bridge: state.bridge,
      subnetPrefix,
      serviceCidr: SERVICE_SUBNET,
      detached: false,
    });
    processes.push({
      name: runtime.process.name,
      pid: runtime.process.pid,
      logFile: runtime.process.logFile,
    });
    for (const image of images) await importImage(runtime, image.archive);

    log('kubeadm init');
    const initLog = join(root, 'kubeadm-init.log');
    // berth is the node's kubelet binary: kubeadm's preflight runs `kubelet --version`.
    const pathDir = join(root, 'bin');
    await mkdir(pathDir);
    await symlink(BERTH_LAUNCHER, join(pathDir, 'kubelet'));
    init = run(kubeadm, ['init', '--config', configFile, '--v', '1'], {
      timeoutMs: 600_000,
      env: { ...process.env, PATH: `${pathDir}:${process.env['PATH'] ?? ''}` },
    });
    init
      .then(
        async (r) => writeFile(initLog, r.stdout + r.stderr),
        async (e: unknown) => writeFile(initLog, String(e)),
      )
      .catch(() => undefined);
    // kubeadm writes the kubelet's files, cannot start it (no systemd), and waits for
    // its /healthz: berth is started here as the systemd drop-in would start the kubelet.
    // A failed init (preflight) ends the wait at once instead of after its timeout.
    const initFailed = init.then(
      () => new Promise<never>(() => undefined),
      (err: unknown) => {
        throw err;
      },
    );
    await Promise.race([
      initFailed,
      waitFor(
        "kubeadm's kubelet files",
        async () => {
          const files = ['/var/lib/kubelet/config.yaml', '/var/lib/kubelet/kubeadm-flags.env'];
          const present = await Promise.all(
            files.map((f) =>
              readFile(f).then(
                () => true,
                () => false,
              ),
            ),
          );
          return present.every(Boolean);
        },
        {
          timeoutMs: 180_000,
          intervalMs: 250,
          describe: () => readFile(initLog, 'utf8').catch(() => ''),
        },
      ),
    ]);
    const flags = kubeadmFlags(await readFile('/var/lib/kubelet/kubeadm-flags.env', 'utf8'));
    log(`berth with kubeadm's flags: ${flags.join(' ')}`);
    await mkdir(join(root, 'berth'), { recursive: true });
    berth = ComponentProcess.start({
      name: 'berth',
      command: BERTH_LAUNCHER,
      // The kubeadm drop-in's command line (10-kubeadm.conf), then KUBELET_KUBEADM_ARGS.
      args: [
        '--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf',
        '--kubeconfig=/etc/kubernetes/kubelet.conf',
        '--config=/var/lib/kubelet/config.yaml',
        ...flags,
      ],
      logFile: join(root, 'berth', 'berth.log'),
      cwd: REPO_ROOT,
    });
    processes.push({ name: berth.name, pid: berth.pid, logFile: berth.logFile });
    const result = await init.catch(async (err: unknown) => {
      throw new Error(
        `kubeadm init failed: ${String(err)}\nberth:\n${(await berth?.tail(40)) ?? ''}`,
      );
    });
    log(`kubeadm init done:\n${result.stdout.split('\n').slice(-12).join('\n')}`);
  });

  after(async () => {
    // Without both locks nothing was moved aside: the host paths are another run's.
    if (backup === '') {
      for (const lock of locks.reverse()) await lock.release();
      return;
    }
    if (berth !== undefined) await berth.stop(30_000);
    if (init !== undefined) await init.catch(() => undefined);
    const socket = state?.runtimeSocket;
    if (socket !== undefined) {
      // As an operator would: kubeadm removes the containers through the CRI socket and
      // cleans its directories; the kubelet is stopped first (no systemd to do it).
      const reset = await run(kubeadm, ['reset', '-f', '--cri-socket', `unix://${socket}`], {
        okCodes: [0, 1],
        timeoutMs: 300_000,
      }).catch((err: unknown) => ({ stdout: '', stderr: String(err), exitCode: -1 }));
      log(`kubeadm reset -f exited ${String(reset.exitCode)}`);
    }
    const leftovers = await hostLeftovers();
    // The runtime, the bridge, cgroups, mounts under the test's directory, then
    // kube-proxy's chains (under its lock, which this test holds until now).
    if (state !== undefined) {
      const { id: clusterId, root: dir, bridge, cgroupRoot, runtimeSocket } = state;
      await teardownCluster(
        { id: clusterId, root: dir, bridge, cgroupRoot, runtimeSocket, processes },
        log,
      );
    }
    for (const lock of locks.reverse()) await lock.release();
    locks = [];
    const leaks = state === undefined ? [] : await findLeaksAfterProxyCleanup(state);
    await restoreHostPaths(backup, saved);
    assert.deepEqual([...leftovers, ...leaks], [], 'kubeadm reset -f and teardown left these');
  });

  it('runs etcd, kube-apiserver, kube-controller-manager and kube-scheduler as static pods with mirror pods', async () => {
    await waitFor(
      'the four mirror pods in kube-system',
      async () => {
        const mirrors = (await pods()).filter(
          (p) =>
            p.metadata.namespace === 'kube-system' &&
            p.metadata.annotations?.['kubernetes.io/config.mirror'] !== undefined,
        );
        return CONTROL_PLANE.every((c) =>
          mirrors.some((p) => p.metadata.name === `${c}-${NODE_NAME}`),
        );
      },
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
    for (const c of CONTROL_PLANE) {
      const pod = (await pods()).find((p) => p.metadata.name === `${c}-${NODE_NAME}`);
      assert.equal(pod?.metadata.annotations?.['kubernetes.io/config.source'], 'file', c);
      // hostNetwork: the pod's IP is the node's.
      assert.ok(pod.status.hostIP !== undefined && pod.status.hostIP !== '', c);
      assert.equal(pod.status.podIP, pod.status.hostIP, c);
      assert.deepEqual(
        pod?.metadata.ownerReferences?.map((o) => `${o.kind}/${o.name}`),
        [`Node/${NODE_NAME}`],
        c,
      );
    }
    // They run under berth: the runtime's containers carry its labels for these pods.
    const { stdout } = await run(bin.ctr2, [
      '--address',
      state?.runtimeSocket ?? '',
      '-n',
      'k8s.io',
      'containers',
      'ls',
    ]);
    for (const c of CONTROL_PLANE) assert.match(stdout, new RegExp(`/${c}:`), `${c} container`);
  });

  it('registers the node with a client certificate from the certificates API, and it is Ready', async () => {
    await waitFor(
      `node ${NODE_NAME} Ready`,
      async () => {
        const node = JSON.parse(await kubectl(['get', 'node', NODE_NAME, '-o', 'json'])) as {
          status: { conditions: { type: string; status: string }[] };
        };
        return node.status.conditions.some((c) => c.type === 'Ready' && c.status === 'True');
      },
      { timeoutMs: 180_000, intervalMs: 1000, describe: async () => (await berth?.tail(30)) ?? '' },
    );
    // kubeadm's kubelet.conf carries a client pair of its own: berth stores it as the
    // bootstrap certificate and at once requests its own through a CSR, which the
    // controller-manager approves (kubeadm's node-autoapprove bindings) and signs.
    let usernames = '';
    await waitFor(
      'an approved and issued kubelet client CSR',
      async () => {
        const csrs = JSON.parse(await kubectl(['get', 'csr', '-o', 'json'])) as {
          items: {
            spec: { signerName: string; username: string };
            status: { conditions?: { type: string }[]; certificate?: string };
          }[];
        };
        const client = csrs.items.filter(
          (c) => c.spec.signerName === 'kubernetes.io/kube-apiserver-client-kubelet',
        );
        usernames = JSON.stringify(client.map((c) => c.spec.username));
        return client.some(
          (c) =>
            c.spec.username === `system:node:${NODE_NAME}` &&
            c.status.conditions?.some((x) => x.type === 'Approved') === true &&
            c.status.certificate !== undefined,
        );
      },
      { timeoutMs: 60_000, intervalMs: 1000, describe: () => Promise.resolve(usernames) },
    );
    // kubeadm's kubelet-finalize found the store's pair and pointed kubelet.conf at it.
    const kubeletConf = await readFile('/etc/kubernetes/kubelet.conf', 'utf8');
    assert.match(
      kubeletConf,
      /client-certificate: \/var\/lib\/kubelet\/pki\/kubelet-client-current\.pem/,
    );
    const node = JSON.parse(await kubectl(['get', 'node', NODE_NAME, '-o', 'json'])) as {
      status: { nodeInfo: { kubeletVersion: string } };
    };
    assert.match(node.status.nodeInfo.kubeletVersion, /-berth\./);
    // berth serves the kubelet API with the self-signed pair upstream would make.
    const cert = await readFile('/var/lib/kubelet/pki/kubelet.crt', 'utf8');
    assert.match(cert, /BEGIN CERTIFICATE/);
    const logs = await kubectl([
      'logs',
      '-n',
      'kube-system',
      `kube-apiserver-${NODE_NAME}`,
      '--tail',
      '1',
    ]);
    assert.notEqual(logs.trim(), '', 'kubectl logs through the kubelet API');
  });

  it('has every pod Running, CoreDNS and kube-proxy included', async () => {
    let last = '';
    await waitFor(
      'every pod Running and Ready',
      async () => {
        const all = await pods();
        last = all
          .map((p) => `${p.metadata.namespace}/${p.metadata.name} ${p.status.phase ?? '?'}`)
          .join('\n');
        const ready = (p: Pod): boolean =>
          p.status.phase === 'Running' &&
          p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
        return (
          all.length > 0 &&
          all.every(ready) &&
          all.some((p) => p.metadata.name.startsWith('coredns-')) &&
          all.some((p) => p.metadata.name.startsWith('kube-proxy-'))
        );
      },
      {
        timeoutMs: 300_000,
        intervalMs: 2000,
        describe: async () => `${last}\n${(await berth?.tail(30)) ?? ''}`,
      },
    );
    log(`kubectl get pods -A:\n${await kubectl(['get', 'pods', '-A', '-o', 'wide'])}`);
  });
});

/** The harness's leak check, with kube-proxy's chains removed first (its lock is free now). */
async function findLeaksAfterProxyCleanup(state: ClusterState): Promise<string[]> {
  if (state.kubeProxy !== undefined) await cleanupKubeProxy(state.kubeProxy);
  return findLeaks(state);
}
