/**
 * One call starts a whole single-node test cluster under a fresh directory: PKI,
 * registry (with the project's images pushed), containerd (2.x or 1.6, with the
 * images preloaded), etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
 * and (opt-in) kube-proxy for the node, so pods reach the API server through the
 * kubernetes Service, and (opt-in) metrics-server behind the aggregated metrics API.
 * One call (`stop`) removes every trace of it again.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildImages, type BuiltImage } from '../../hack/images/build.ts';
import { binaries, type Binaries } from './binaries.ts';
import { startContainerd, importImage, type Containerd, type RuntimeKind } from './containerd.ts';
import {
  KUBERNETES_SERVICE_IP,
  SERVICE_CIDR,
  startControlPlane,
  type ControlPlane,
} from './control-plane.ts';
import { run } from './exec.ts';
import { exposeApiserver, startKubeProxy, type KubeProxy } from './kube-proxy.ts';
import { startMetricsServer, type MetricsServer } from './metrics-server.ts';
import { freePort } from './net.ts';
import { createClusterPki, type ClusterPki } from './pki.ts';
import type { ComponentProcess } from './process.ts';
import { pushImage, startRegistry, type Registry } from './registry.ts';
import { findLeaks, teardownCluster, type ClusterState } from './teardown.ts';

export type { RuntimeKind } from './containerd.ts';

export interface ClusterOptions {
  readonly runtime?: RuntimeKind;
  /** Directory to use instead of a new temporary one (the demo uses .demo/cluster). */
  readonly root?: string;
  /** Leave the processes running after this Node process exits (the demo). */
  readonly detached?: boolean;
  /** Fixed apiserver port (the demo); tests take free ports. */
  readonly apiserverPort?: number;
  /**
   * Run kube-proxy (iptables mode) for the node, and advertise the apiserver on the pod
   * bridge's gateway, so pods reach it through the kubernetes Service. Takes a
   * host-wide lock: one such cluster per machine at a time.
   */
  readonly kubeProxy?: boolean;
  /** The node kube-proxy serves (its hostnameOverride); default berth-<id>, like startBerth. */
  readonly nodeName?: string;
  /** How long to wait for another cluster's kube-proxy to go away (default: fail at once). */
  readonly kubeProxyLockWaitMs?: number;
  /** kube-controller-manager's --cluster-signing-duration, e.g. "6m" (certificate rotation tests). */
  readonly clusterSigningDuration?: string;
  /**
   * Run metrics-server (a process, reached by the apiserver through API aggregation on
   * the pod bridge's gateway), so `kubectl top` works: adds the front-proxy PKI and the
   * apiserver's aggregation flags.
   */
  readonly metricsServer?: boolean;
  /**
   * Serve (and advertise) the apiserver on this host address rather than 127.0.0.1: the
   * VM tier's guests reach it on the host-only bridge (test/harness/vm.ts).
   */
  readonly apiserverAddress?: string;
  /**
   * containerd 2.x with a second runtime handler (USERNS_HANDLER in containerd.ts) on the
   * runc built from its module, which supports user namespaces (`hostUsers: false`).
   */
  readonly usernsHandler?: boolean;
  readonly log?: (message: string) => void;
}

export interface TestImages {
  /** Reference in the cluster's registry (needs credentials), e.g. 127.0.0.1:41234/berth/busybox:… */
  readonly busybox: string;
  /** Name under which the image is preloaded into the runtime. */
  readonly busyboxLocal: string;
  readonly pauseLocal: string;
  readonly pause: string;
  /** grpc.health.v1 server (/grpc-health) and the API client /kube-get, preloaded. */
  readonly grpcHealthLocal: string;
}

export interface Cluster {
  readonly id: string;
  readonly root: string;
  readonly state: ClusterState;
  readonly pki: ClusterPki;
  readonly bin: Binaries;
  readonly controlPlane: ControlPlane;
  readonly registry: Registry;
  readonly runtime: Containerd;
  readonly images: TestImages;
  readonly adminKubeconfig: string;
  /** The kubernetes Service's ClusterIP (pods reach the apiserver on :443 with kube-proxy). */
  readonly serviceIp: string;
  /** Present when started with `kubeProxy: true`. */
  readonly kubeProxy?: KubeProxy;
  /** Present when started with `metricsServer: true`. */
  readonly metricsServer?: MetricsServer;
  /** Runs kubectl against the cluster as admin. */
  kubectl(args: readonly string[], options?: { input?: string }): Promise<string>;
  /** Stops everything and removes all the cluster made. Idempotent. */
  stop(): Promise<void>;
  /** What survived `stop()` (empty when it was complete). */
  leaks(): Promise<string[]>;
}

export const STATE_FILE = 'cluster-state.json';

export async function pickSubnetPrefix(): Promise<string> {
  const { stdout } = await run('ip', ['-o', '-4', 'addr', 'show']);
  for (let i = 0; i < 50; i++) {
    const prefix = `10.88.${1 + Math.floor(Math.random() * 250)}`;
    if (!stdout.includes(` ${prefix}.`)) return prefix;
  }
  throw new Error('Cannot pick a pod subnet: every 10.88.x.0/24 tried is in use on this machine');
}

export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const log = options.log ?? (() => undefined);
  const detached = options.detached === true;
  const kind: RuntimeKind = options.runtime ?? 'containerd2';
  const bin = binaries();
  const id = randomBytes(3).toString('hex');
  const root = options.root ?? (await mkdtemp(join(tmpdir(), `berth-cluster-${id}-`)));
  // A user-namespaced container's init resolves its rootfs under containerd's state dir
  // as the pod's root, an unprivileged host ID: every directory above must let it pass
  // (mkdtemp makes 0700; containerd's own /run/containerd is 0711 for the same reason).
  if (options.usernsHandler === true) await chmod(root, 0o711);
  await mkdir(root, { recursive: true });
  const processes: ComponentProcess[] = [];
  const bridge = `bth${id}`;
  let kubeProxy: KubeProxy | undefined;
  const state = (): ClusterState => ({
    id,
    root,
    bridge,
    cgroupRoot: `/berth-${id}`,
    runtimeSocket: join(root, 'containerd', 'containerd.sock'),
    ...(kubeProxy !== undefined && { kubeProxy: kubeProxy.state }),
    processes: processes.map((p) => ({ name: p.name, pid: p.pid, logFile: p.logFile })),
  });
  const saveState = (): Promise<void> =>
    writeFile(join(root, STATE_FILE), JSON.stringify(state(), null, 2));
  await saveState();
  try {
    log(`cluster ${id}: PKI and images`);
    const subnetPrefix = await pickSubnetPrefix();
    const gateway = `${subnetPrefix}.1`;
    const withProxy = options.kubeProxy === true;
    const withMetrics = options.metricsServer === true;
    const [pki, images] = await Promise.all([
      // Pods reach the apiserver by the Service IP, which kube-proxy turns into the gateway.
      createClusterPki(join(root, 'pki'), {
        apiserverSans: [
          `IP:${gateway}`,
          `IP:${KUBERNETES_SERVICE_IP}`,
          ...(options.apiserverAddress !== undefined ? [`IP:${options.apiserverAddress}`] : []),
        ],
        ...(withMetrics && { frontProxy: true }),
      }),
      buildImages(),
    ]);
    const [etcdClient, etcdPeer, apiserver, controllerManager, scheduler, registryPort] =
      await Promise.all([
        freePort(),
        freePort(),
        options.apiserverPort ?? freePort(),
        freePort(),
        freePort(),
        freePort(),
      ]);
    log(`cluster ${id}: registry on 127.0.0.1:${registryPort}`);
    const registry = await startRegistry({
      dir: join(root, 'registry'),
      port: registryPort,
      pki,
      bin,
      detached,
    });
    processes.push(registry.process);
    await saveState();
    await pushImage(registry, images.busybox.layout, images.busybox.repoTag);
    await pushImage(registry, images.pause.layout, images.pause.repoTag);

    log(`cluster ${id}: ${kind}`);
    const runtime = await startContainerd({
      kind,
      dir: join(root, 'containerd'),
      bin,
      detached,
      sandboxImage: images.pause.localRef,
      registryHost: registry.host,
      registryCa: pki.ca.cert,
      bridge,
      subnetPrefix,
      // Without kube-proxy nothing answers there, so pods get no route at all.
      ...(withProxy && { serviceCidr: SERVICE_CIDR }),
      ...(options.usernsHandler === true && { usernsHandler: true }),
    });
    processes.push(runtime.process);
    await saveState();
    await Promise.all([
      importImage(runtime, images.pause.archive),
      importImage(runtime, images.busybox.archive),
      importImage(runtime, images.grpcHealth.archive),
    ]);

    log(`cluster ${id}: control plane`);
    const controlPlane = await startControlPlane({
      dir: join(root, 'control-plane'),
      pki,
      bin,
      detached,
      ports: { etcdClient, etcdPeer, apiserver, controllerManager, scheduler },
      ...(withProxy && { advertiseAddress: gateway }),
      ...(options.apiserverAddress !== undefined && { bindAddress: options.apiserverAddress }),
      ...(options.clusterSigningDuration !== undefined && {
        clusterSigningDuration: options.clusterSigningDuration,
      }),
      ...(pki.frontProxy !== undefined && { aggregation: pki.frontProxy }),
    });
    processes.push(...controlPlane.processes);
    await saveState();
    if (withProxy) {
      const nodeName = options.nodeName ?? `berth-${id}`;
      log(`cluster ${id}: kube-proxy for node ${nodeName}, apiserver on ${gateway}:${apiserver}`);
      processes.push(
        await exposeApiserver({
          dir: join(root, 'kube-proxy'),
          gateway,
          port: apiserver,
          detached,
        }),
      );
      await saveState();
      kubeProxy = await startKubeProxy({
        dir: join(root, 'kube-proxy'),
        binary: bin.kubeProxy,
        clusterId: id,
        server: controlPlane.server,
        caFile: pki.ca.cert,
        client: pki.kubeProxy,
        nodeName,
        podSubnet: runtime.podSubnet,
        gateway,
        detached,
        ...(options.kubeProxyLockWaitMs !== undefined && {
          lockWaitMs: options.kubeProxyLockWaitMs,
        }),
        log,
      });
      processes.push(kubeProxy.process);
      await saveState();
    }
    let metricsServer: MetricsServer | undefined;
    if (withMetrics) {
      log(`cluster ${id}: metrics-server, reached on ${gateway}`);
      metricsServer = await startMetricsServer({
        dir: join(root, 'metrics-server'),
        pki,
        server: controlPlane.server,
        kubectl: bin.kubectl,
        adminKubeconfig: controlPlane.adminKubeconfig,
        gateway,
        detached,
        log,
      });
      // Teardown stops in reverse: metrics-server before its forwarder.
      processes.push(metricsServer.forwarder, metricsServer.process);
      await saveState();
    }
    log(`cluster ${id}: ready, apiserver ${controlPlane.server}`);
    return makeCluster({
      id,
      root,
      state: state(),
      pki,
      bin,
      controlPlane,
      registry,
      runtime,
      images,
      ...(kubeProxy !== undefined && { kubeProxy }),
      ...(metricsServer !== undefined && { metricsServer }),
    });
  } catch (err) {
    await teardownCluster(state(), log).catch(() => undefined);
    throw err;
  }
}

function makeCluster(parts: {
  id: string;
  root: string;
  state: ClusterState;
  pki: ClusterPki;
  bin: Binaries;
  controlPlane: ControlPlane;
  registry: Registry;
  runtime: Containerd;
  images: { pause: BuiltImage; busybox: BuiltImage; grpcHealth: BuiltImage };
  kubeProxy?: KubeProxy;
  metricsServer?: MetricsServer;
}): Cluster {
  let stopped: Promise<void> | undefined;
  const { registry, images } = parts;
  return {
    ...parts,
    images: {
      busybox: `${registry.host}/${images.busybox.repoTag}`,
      busyboxLocal: images.busybox.localRef,
      pause: `${registry.host}/${images.pause.repoTag}`,
      pauseLocal: images.pause.localRef,
      grpcHealthLocal: images.grpcHealth.localRef,
    },
    adminKubeconfig: parts.controlPlane.adminKubeconfig,
    serviceIp: KUBERNETES_SERVICE_IP,
    async kubectl(args, options) {
      const { stdout } = await run(
        parts.bin.kubectl,
        ['--kubeconfig', parts.controlPlane.adminKubeconfig, ...args],
        {
          ...(options?.input !== undefined && { input: options.input }),
        },
      );
      return stdout;
    },
    stop() {
      stopped ??= teardownCluster(parts.state);
      return stopped;
    },
    leaks: () => findLeaks(parts.state),
  };
}

/** Reads the state a detached cluster recorded (for `make demo-stop`). */
export async function readClusterState(root: string): Promise<ClusterState> {
  return JSON.parse(await readFile(join(root, STATE_FILE), 'utf8')) as ClusterState;
}
