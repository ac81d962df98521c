/**
 * The kubelet composition root: builds every manager, starts them in order and stops
 * them in reverse. Its lifecycle is a small state machine:
 *
 *   NEW -> STARTING -> RUNNING -> STOPPING -> STOPPED      (any -> FAILED on start error)
 *
 * Stopping never kills pods: containers keep running and a restarted berth adopts them.
 */
import { AdmissionManager } from '../admission/manager.ts';
import { PodCgroups } from '../cm/pod-cgroups.ts';
import { ImageManager } from '../images/manager.ts';
import type { NodeAllocatable } from '../kuberuntime/downward.ts';
import { CriContainerLogManager, type ContainerLogManager } from '../logs/index.ts';
import { runtimeCounts } from '../metrics/pod-metrics.ts';
import { LeaseController } from '../nodelease/controller.ts';
import { hostAppArmorEnabled } from '../admission/apparmor.ts';
import { NodeStatusManager } from '../nodestatus/manager.ts';
import { RelistPleg } from '../pleg/generic.ts';
import type { PodLifecycleEvent } from '../pleg/types.ts';
import { ApiPodSource } from '../podsource/api-source.ts';
import { PodWorkers } from '../podworkers/pod-workers.ts';
import { ProberManager } from '../prober/manager.ts';
import type { KubeletServer } from '../server/server.ts';
import { StatusManager } from '../status/manager.ts';
import { Backoff } from '../util/backoff.ts';
import { isAborted } from '../util/errors.ts';
import { podObjectRefs, projectsTrustBundle } from '../volumes/sources/index.ts';
import { Housekeeping } from './housekeeping.ts';
import { resizeStackOf, type ResizeStack } from './resize-stack.ts';
import {
  nodeAllocatable,
  podsAllocatable,
  readNodeHosts,
  runtimeCgroupDriver,
} from './kubelet-util.ts';
import { podHostsFile } from '../kuberuntime/hosts-file.ts';
import { PodEnvironment } from './pod-env.ts';
import { ServiceLister } from './service-lister.ts';
import { createVolumeStack, type VolumeStack } from './volume-stack.ts';
import { CsiDriverRegistryImpl, type CsiDriverStore } from '../csi/registry.ts';
import { PodSync } from './pod-sync.ts';
import { kubeletServerOf, runtimeConfigOf, usernsManagerOf } from './wiring.ts';
import { RuntimeStatusReader } from '../kuberuntime/runtime-status.ts';
import { StaticPods } from './static-pods.ts';
import { podConsumer } from './pod-consumer.ts';
import { apiLoops } from './startup.ts';
import { pluginManagerLoop } from './plugin-wiring.ts';
import { nodeShutdownOf } from './node-shutdown.ts';
import type { NodeShutdownManager } from '../nodeshutdown/types.ts';
import { nodeShutdownAdmitHandler } from '../admission/node-shutdown.ts';
import { evictionStackOf, type EvictionStack } from './eviction-wiring.ts';
import { evictionAdmitHandler } from '../admission/eviction.ts';
import { OomWatcher } from '../oom/watcher.ts';
import { bootTimeMs } from '../oom/kmsg.ts';

const POD_BACKOFF = { initialMs: 10_000, maxMs: 300_000, resetAfterMs: 600_000 } as const;
import type { KubeletDeps, KubeletOptions, KubeletState } from './options.ts';

export type { KubeletDeps, KubeletOptions, KubeletState } from './options.ts';

export class Kubelet {
  readonly #o: KubeletOptions;
  readonly #d: KubeletDeps;
  #state: KubeletState = 'NEW';
  readonly #abort = new AbortController();
  #loops: Promise<void>[] = [];
  #runtimeName = 'containerd';
  readonly pleg: RelistPleg;
  readonly podWorkers: PodWorkers;
  readonly status: StatusManager;
  readonly source: ApiPodSource;
  /** Every source merged (API, manifests, URL) and the mirror pods. */
  readonly static: StaticPods;
  readonly nodeStatus: NodeStatusManager;
  readonly lease: LeaseController;
  readonly #housekeeping: Housekeeping;
  readonly prober: ProberManager;
  readonly server: KubeletServer | undefined;
  readonly admission: AdmissionManager;
  readonly services: ServiceLister;
  readonly volumes: VolumeStack;
  /** CSI drivers registered through the plugin manager; the volume manager's CSI plugin uses them. */
  readonly csiDrivers: CsiDriverStore;
  readonly podCgroups: PodCgroups | undefined;
  readonly containerLogs: ContainerLogManager | undefined;
  readonly shutdown: NodeShutdownManager | undefined;
  readonly eviction: EvictionStack | undefined;
  readonly resize: ResizeStack;
  #cgroupDriver: 'cgroupfs' | 'systemd';

  constructor(options: KubeletOptions, deps: KubeletDeps) {
    this.#o = options;
    this.#d = deps;
    const { kube, cri, recorder, clock, logger, metrics } = deps;
    this.#cgroupDriver = options.cgroupDriver;
    this.services = new ServiceLister({ client: kube, clock, logger });
    const allocatable = (): NodeAllocatable => nodeAllocatable(this.nodeStatus.node);
    this.csiDrivers = new CsiDriverRegistryImpl();
    this.volumes = createVolumeStack({
      kube,
      nodeName: options.nodeName,
      csiDrivers: this.csiDrivers,
      clock,
      logger,
      rootDir: options.rootDir,
      hostIPs: options.nodeIPs,
      nodeAllocatable: allocatable,
      ...(deps.mounter !== undefined && { mounter: deps.mounter }),
      pods: () => this.static.config.pods().values(),
      volumeStatsAggPeriodMs: options.volumeStatsAggPeriodMs,
      metrics,
      clusterTrustBundleProjection:
        options.standalone !== true &&
        options.featureGates?.['ClusterTrustBundleProjection'] !== false,
      podCertificates:
        options.standalone !== true && options.featureGates?.['PodCertificateRequest'] !== false,
      recorder,
      nodeUID: () => this.nodeStatus.node?.metadata?.uid,
    });
    this.volumes.objects.onChange((kind, ns, name) => {
      this.#resyncUsers(kind, ns, name);
    });
    // Upstream waits for the next periodic sync; resyncing the projecting pods at once
    // writes the new bundle as soon as it is seen.
    this.volumes.trustBundles?.onChange(() => {
      for (const pod of this.static.config.pods().values()) {
        if (projectsTrustBundle(pod)) this.podWorkers.update(pod, 'update');
      }
    });
    // Issued, renewed, denied or failed credentials: the pod's volumes follow at once.
    this.volumes.podCertificates?.onChange((uid) => {
      const pod = this.static.config.pods().get(uid);
      if (pod !== undefined) this.podWorkers.update(pod, 'update');
    });
    this.podCgroups =
      deps.cgroups === undefined || !options.cgroupsPerQOS
        ? undefined
        : new PodCgroups({
            cgroups: deps.cgroups,
            ...(deps.systemdCgroups !== undefined && { systemdCgroups: deps.systemdCgroups }),
            cgroupRoot: options.cgroupRoot,
            driver: () => this.#cgroupDriver,
            podPidsLimit: options.podPidsLimit,
            logger: logger.child({ component: 'cgroups' }),
          });
    const nodeHosts = readNodeHosts(options.nodeHostsFile ?? '/etc/hosts');
    this.containerLogs =
      options.logRotation === undefined
        ? undefined
        : new CriContainerLogManager(options.logRotation, {
            cri,
            clock,
            logger: logger.child({ component: 'container-logs' }),
            podLogsDir: options.podLogsDir,
          });
    this.status = new StatusManager({
      client: kube,
      clock,
      logger: logger.child({ component: 'status' }),
      target: (pod) => this.static.mirrors.statusTarget(pod),
    });
    this.pleg = new RelistPleg({
      runtime: cri.runtime,
      clock,
      logger: logger.child({ component: 'pleg' }),
      evented: true,
      ...(metrics !== undefined && { metrics }),
      onEvents: (events) => {
        this.#onPlegEvents(events);
      },
    });
    // kubelet_running_pods / kubelet_running_containers, counted at scrape time from
    // the PLEG's cache (what upstream's collectors read from its runtime cache).
    metrics?.observeRuntime(() => runtimeCounts(this.pleg));
    // Upstream's image pull and container restart back-offs: 10 s doubling to 5 min.
    const imageBackoff = new Backoff(clock, POD_BACKOFF);
    const crashBackoff = new Backoff(clock, POD_BACKOFF);
    const reader = new RuntimeStatusReader(cri.runtime);
    const userns = usernsManagerOf(options, cri, logger);
    this.resize = resizeStackOf({
      ...{ rootDir: options.rootDir, runtime: cri.runtime, podCgroups: this.podCgroups },
      ...{ node: () => this.nodeStatus.node, pods: () => this.static.config.pods() },
      ...{ rejected: (u) => this.admission.isRejected(u), phase: (u) => this.status.get(u)?.phase },
      sourcesReady: () => this.static.config.synced,
      ...{ podWorkers: () => this.podWorkers, reader },
      ...{ allowedUnsafeSysctls: options.allowedUnsafeSysctls ?? [], recorder, clock, logger },
    });
    const images = new ImageManager({
      images: cri.image,
      recorder,
      clock,
      logger: logger.child({ component: 'images' }),
      backoff: imageBackoff,
      maxParallelPulls: options.maxParallelImagePulls,
      ...(options.registryPull !== undefined && { pullRate: options.registryPull }),
      ...(metrics !== undefined && { metrics }),
    });
    this.prober = new ProberManager({
      runtime: cri.runtime,
      clock,
      recorder,
      logger: logger.child({ component: 'prober' }),
      ...(metrics !== undefined && { metrics: metrics.prober }),
      // A changed result is acted on by the next sync (kill, ready flag): run it now.
      onChange: (uid) => {
        const pod = this.static.config.pods().get(uid);
        if (pod !== undefined) this.podWorkers.update(pod, 'runtime-event');
      },
    });
    const sync = new PodSync({
      cri,
      kube,
      pleg: this.pleg,
      reader,
      images,
      status: this.status,
      recorder,
      clock,
      logger,
      crashBackoff,
      runtimeConfig: runtimeConfigOf(
        options,
        recorder,
        () => this.nodeStatus.node?.status,
        this.podCgroups,
        deps.cgroups?.version,
      ),
      runtimeName: () => this.#runtimeName,
      hostIPs: options.nodeIPs,
      prober: this.prober,
      rootDir: options.rootDir,
      volumes: this.volumes.volumes,
      env: new PodEnvironment({
        kube,
        services: this.services,
        hostIPs: options.nodeIPs,
        nodeAllocatable: allocatable,
        recorder,
      }),
      hostsFile: (pod, podIPs) => podHostsFile(pod, podIPs, options, nodeHosts),
      ...(this.podCgroups !== undefined && { podCgroups: this.podCgroups }),
      ...(metrics !== undefined && { metrics }),
      ...(this.containerLogs !== undefined && { containerLogs: this.containerLogs }),
      resize: this.resize.resizer,
      userns,
      onPodGone: (uid) => {
        this.volumes.tokens.deletePodTokens(uid);
        this.volumes.podCertificates?.forgetPod(uid);
      },
    });
    this.podWorkers = new PodWorkers({
      syncer: sync,
      clock,
      logger: logger.child({ component: 'pod-workers' }),
      ...(metrics !== undefined && { metrics }),
    });
    const staticOptions = { ...options.staticPods, api: options.standalone !== true };
    this.static = new StaticPods(staticOptions, {
      nodeName: options.nodeName,
      kube,
      recorder,
      clock,
      logger,
      podWorkers: () => this.podWorkers,
      nodeUID: () => this.nodeStatus.node?.metadata?.uid,
      apiSynced: () => this.source.synced,
      onMirror: (uid) => {
        this.status.resend(uid);
      },
      forget: (uid) => {
        this.status.remove(uid);
      },
      consumer: podConsumer({
        kube,
        logger,
        signal: this.#abort.signal,
        admission: () => this.admission,
        volumes: () => this.volumes,
        podWorkers: () => this.podWorkers,
        status: () => this.status,
        allocation: () => this.resize.allocation,
      }),
    });
    this.source = new ApiPodSource({
      client: kube,
      clock,
      logger,
      nodeName: options.nodeName,
      consumer: this.static.config.api,
    });
    this.shutdown = nodeShutdownOf(options.nodeShutdown ?? { periods: [] }, {
      nodeName: options.nodeName,
      pods: () => this.static.config.pods(),
      podWorkers: () => this.podWorkers,
      status: () => this.status,
      // Standalone: there is no Node to post the shutdown condition to.
      syncNodeStatus: (s) =>
        options.standalone === true ? Promise.resolve(false) : this.nodeStatus.syncOnce(s),
      recorder,
      clock,
      logger,
      rootDir: options.rootDir,
      ...(metrics !== undefined && { metrics }),
    });
    this.nodeStatus = new NodeStatusManager({
      client: kube,
      clock,
      logger: logger.child({ component: 'node-status' }),
      host: deps.host,
      runtime: cri.runtime,
      images: cri.image,
      maxImages: options.nodeStatusMaxImages,
      recorder,
      nodeName: options.nodeName,
      labels: options.nodeLabels,
      taints: options.registerWithTaints,
      ...(options.providerID !== undefined && { providerID: options.providerID }),
      nodeIPs: options.nodeIPs,
      kubeletPort: options.kubeletPort,
      maxPods: options.maxPods,
      updateFrequencyMs: options.nodeStatusUpdateFrequencyMs,
      reportFrequencyMs: options.nodeStatusReportFrequencyMs,
      evictionMemoryBytes: options.evictionMemoryBytes,
      evictionNodefsFraction: options.evictionNodefsFraction,
      ...(options.reserved !== undefined && { reserved: options.reserved }),
      pressure: () => this.eviction?.manager.conditions() ?? [],
      volumesInUse: () => this.volumes.volumes.volumesInUse(),
      healthProblems: () =>
        [
          this.pleg.healthProblem(),
          this.source.healthProblem(),
          this.shutdown?.shutdownStatus(),
        ].filter((p) => p !== undefined),
    });
    this.eviction = evictionStackOf(options, {
      cri,
      clock,
      logger,
      recorder,
      metrics,
      pods: () => this.static.config.pods(),
      isRejected: (uid) => this.admission.isRejected(uid),
      podWorkers: () => this.podWorkers,
      status: () => this.status,
      memoryCapacity: () => this.nodeStatus.node?.status?.capacity?.['memory'],
      deleteAllUnusedContainers: (s) =>
        this.#housekeeping.garbageCollect(s, { allOfTerminatedPods: true }),
      volumes: (uid) => this.volumes.stats.podStats(uid),
    });
    this.admission = new AdmissionManager({
      node: () => this.nodeStatus.node,
      pods: () => this.static.config.pods(),
      phase: (uid) => this.status.get(uid)?.phase,
      setStatus: (pod, status) => {
        this.status.set(pod, status);
      },
      recorder,
      logger: logger.child({ component: 'admission' }),
      allowedUnsafeSysctls: options.allowedUnsafeSysctls ?? [],
      appArmorEnabled: () => this.#appArmorEnabled,
      handlers: [
        ...(this.eviction === undefined ? [] : [evictionAdmitHandler(this.eviction.manager)]),
        nodeShutdownAdmitHandler(() => this.shutdown?.shutdownStatus() !== undefined),
      ],
    });
    this.lease = new LeaseController({
      client: kube,
      clock,
      logger: logger.child({ component: 'lease' }),
      nodeName: options.nodeName,
      leaseDurationSeconds: options.nodeLeaseDurationSeconds,
      nodeUID: () => this.nodeStatus.node?.metadata?.uid,
    });
    this.#housekeeping = new Housekeeping({
      cri,
      pleg: this.pleg,
      source: this.static.config,
      podWorkers: this.podWorkers,
      clock,
      logger: logger.child({ component: 'housekeeping' }),
      volumes: this.volumes.volumes,
      ...(this.podCgroups !== undefined && { podCgroups: this.podCgroups }),
      allocations: this.resize,
      userns,
      runtimeCaches: [reader],
      backoffs: [crashBackoff, imageBackoff],
      ...(options.podHousekeepingPeriodMs !== undefined && {
        periodMs: options.podHousekeepingPeriodMs,
      }),
    });
    this.server = kubeletServerOf(options, {
      kube,
      cri,
      clock,
      logger,
      ...(metrics !== undefined && { metrics }),
      ...(deps.servingCertificate !== undefined && {
        servingCertificate: deps.servingCertificate,
      }),
      pods: () => this.static.config.pods(),
      runtimeCache: this.pleg,
      syncLoopHealth: () => this.#syncLoopHealth(),
      volumes: (uid) => this.volumes.stats.podStats(uid),
    });
  }

  get state(): KubeletState {
    return this.#state;
  }

  /** A referenced configMap or secret changed: its pods' volumes are refreshed by a sync. */
  #resyncUsers(kind: 'configmap' | 'secret', namespace: string, name: string): void {
    for (const pod of this.static.config.pods().values()) {
      if ((pod.metadata?.namespace ?? 'default') !== namespace) continue;
      const refs = podObjectRefs(pod);
      const names = kind === 'configmap' ? refs.configMaps : refs.secrets;
      if (names.has(name)) this.podWorkers.update(pod, 'update');
    }
  }

  #lastResync = 0;
  /** Whether the host enforces AppArmor (read once at start, as upstream). */
  #appArmorEnabled = false;

  /** Upstream's syncloop health check: the loop ran within twice its period (and 30 s). */
  #syncLoopHealth(): string | undefined {
    if (this.#state !== 'RUNNING' || this.#lastResync === 0) return undefined;
    const age = this.#d.clock.now() - this.#lastResync;
    const limit = Math.max(2 * this.#o.syncFrequencyMs, 30_000);
    return age > limit
      ? `sync loop took too long: last ran ${Math.round(age / 1000)}s ago`
      : undefined;
  }

  #onPlegEvents(events: readonly PodLifecycleEvent[]): void {
    const pods = this.static.config.pods();
    for (const uid of new Set(events.map((e) => e.podUID))) {
      const pod = pods.get(uid);
      if (pod !== undefined) this.podWorkers.update(pod, 'runtime-event');
    }
  }

  #loop(name: string, run: (signal: AbortSignal) => Promise<void>): void {
    const signal = this.#abort.signal;
    this.#loops.push(
      run(signal).catch((err: unknown) => {
        if (!signal.aborted)
          this.#d.logger.error('Component loop ended with an error', {
            component: name,
            error: String(err),
          });
      }),
    );
  }

  /**
   * Starts every manager; resolves once the loops run. Nothing waits for the API
   * server (see startup.ts): the static pods start while it is unreachable.
   */
  async start(): Promise<void> {
    if (this.#state !== 'NEW') throw new Error(`Cannot start the kubelet in state ${this.#state}`);
    this.#state = 'STARTING';
    const signal = this.#abort.signal;
    const { cri, logger, recorder } = this.#d;
    try {
      const version = await cri.runtime.version({ version: '0.1.0' }, { signal });
      this.#cgroupDriver = await runtimeCgroupDriver(cri, this.#o.cgroupDriver, logger, signal);
      this.#runtimeName = version.runtimeName;
      logger.info('Container runtime initialized', {
        runtime: version.runtimeName,
        version: version.runtimeVersion,
        apiVersion: version.runtimeApiVersion,
      });
      this.#appArmorEnabled = await hostAppArmorEnabled();
      // The first relist fills the runtime cache before any pod is synced (adoption).
      await this.pleg.relist(signal);
      // Admission and the pod cgroups use this Node until the API has the real one.
      await this.nodeStatus.buildLocal(signal);
      recorder.event(
        { kind: 'Node', name: this.#o.nodeName, uid: this.#o.nodeName },
        'Normal',
        'Starting',
        'Starting kubelet.',
      );
      await this.podCgroups?.start(podsAllocatable(this.nodeStatus.node));
      // Allocations and actuated resources as the last run left them (mid-resize too).
      await this.resize.load();
      this.#loop('allocation', (s) => this.resize.allocation.run(s));
      const logs = this.containerLogs;
      if (logs !== undefined) this.#loop('container-logs', (s) => logs.run(s));
      this.#loop('pleg', (s) => this.pleg.run(s));
      for (const [name, run] of this.static.loops()) this.#loop(name, run);
      if (this.#o.standalone !== true) {
        for (const [name, run] of apiLoops(this)) this.#loop(name, run);
        this.#loop('plugin-manager', pluginManagerLoop(this, this.#o, this.#d));
      }
      this.#loop('housekeeping', (s) => this.#housekeeping.run(s));
      this.#loop('volume-stats', (s) => this.volumes.stats.run(s));
      const kmsg = this.#d.kmsg;
      if (kmsg !== undefined) {
        const oom = new OomWatcher({
          ...{ source: kmsg, bootTimeMs: (now) => bootTimeMs(now), recorder },
          ...{ nodeName: this.#o.nodeName, clock: this.#d.clock, logger },
        });
        this.#loop('oom-watcher', (s) => oom.run(s));
      }
      const shutdown = this.shutdown;
      if (shutdown !== undefined) this.#loop('node-shutdown', (s) => shutdown.run(s));
      const eviction = this.eviction;
      if (eviction !== undefined) this.#loop('eviction', (s) => eviction.run(s));
      // Logs and exec of the static pods are served while the API is unreachable too.
      await this.server?.start();
      this.#loop('resync', async (s) => {
        while (!s.aborted) {
          await this.#d.clock.sleep(this.#o.syncFrequencyMs, s).catch(() => undefined);
          if (isAborted(s)) continue;
          this.#lastResync = this.#d.clock.now();
          this.podWorkers.resyncAll();
        }
      });
      this.#state = 'RUNNING';
    } catch (err) {
      this.#state = 'FAILED';
      this.#abort.abort();
      await this.server?.stop();
      await Promise.allSettled(this.#loops);
      throw err;
    }
  }

  /** Stops in order: pod source and workers, then status and heartbeats. Pods keep running. */
  async stop(): Promise<void> {
    if (this.#state === 'STOPPED' || this.#state === 'STOPPING') return;
    this.#state = 'STOPPING';
    // First: no new logs/exec requests while the managers wind down.
    await this.server?.stop();
    this.#abort.abort();
    await this.podWorkers.close();
    await this.prober.stop();
    await Promise.allSettled(this.#loops);
    await this.volumes.objects.stop();
    await this.status.drain();
    this.#state = 'STOPPED';
  }
}
