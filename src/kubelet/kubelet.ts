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
import type { NodeAllocatable } from '../kuberuntime/downward.ts';
import { CriContainerLogManager, type ContainerLogManager } from '../logs/index.ts';
import { LogSymlinks } from '../kuberuntime/log-symlinks.ts';
import { runtimeCounts } from '../metrics/pod-metrics.ts';
import { LeaseController } from '../nodelease/controller.ts';
import { hostAppArmorEnabled } from '../admission/apparmor.ts';
import type { NodeStatusController } from '../nodestatus/types.ts';
import type { NodeLeaseController } from '../nodelease/types.ts';
import type { PodAdmission } from '../admission/types.ts';
import type { PodSource } from '../podsource/types.ts';
import type { ProbeManager } from '../prober/types.ts';
import type { PodStatusManager } from '../status/types.ts';
import { RelistPleg } from '../pleg/generic.ts';
import { ApiPodSource } from '../podsource/api-source.ts';
import { PodWorkers } from '../podworkers/pod-workers.ts';
import { ProberManager } from '../prober/manager.ts';
import type { KubeletServer } from '../server/server.ts';
import { StatusManager } from '../status/manager.ts';
import { Housekeeping } from './housekeeping.ts';
import { resizeStackOf, type ResizeStack } from './resize-stack.ts';
import { nodeAllocatable, podsAllocatable, runtimeCgroupDriver } from './kubelet-util.ts';
import { ServiceLister } from './service-lister.ts';
import { createVolumeStack, syncPodsOnSourceChange, type VolumeStack } from './volume-stack.ts';
import { CsiDriverRegistryImpl, type CsiDriverStore } from '../csi/registry.ts';
import { kubeletServerOf, nodeStatusManagerOf, unifiedOf, usernsManagerOf } from './wiring.ts';
import { podSyncOf } from './pod-sync-wiring.ts';
import { RuntimeStatusReader } from '../kuberuntime/runtime-status.ts';
import { StaticPods } from './static-pods.ts';
import { configChannel, SyncLoop } from './sync-loop.ts';
import { apiLoops } from './startup.ts';
import { pluginManagerLoop } from './plugin-wiring.ts';
import { nodeShutdownOf } from './node-shutdown.ts';
import type { NodeShutdownManager } from '../nodeshutdown/types.ts';
import { nodeShutdownAdmitHandler } from '../admission/node-shutdown.ts';
import { evictionStackOf, type EvictionStack } from './eviction-wiring.ts';
import { evictionAdmitHandler } from '../admission/eviction.ts';
import { OomWatcher } from '../oom/watcher.ts';
import { bootTimeMs } from '../oom/kmsg.ts';
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
  readonly status: PodStatusManager;
  readonly source: PodSource;
  /** Every source merged (API, manifests, URL) and the mirror pods. */
  readonly static: StaticPods;
  readonly nodeStatus: NodeStatusController;
  readonly lease: NodeLeaseController;
  readonly #housekeeping: Housekeeping;
  /** Upstream's syncLoop: pod source updates, PLEG events, probe results, the tickers. */
  readonly syncLoop: SyncLoop;
  readonly prober: ProbeManager;
  readonly server: KubeletServer | undefined;
  readonly admission: PodAdmission;
  readonly services: ServiceLister;
  readonly volumes: VolumeStack;
  /** CSI drivers registered through the plugin manager; the volume manager's CSI plugin uses them. */
  readonly csiDrivers: CsiDriverStore;
  readonly podCgroups: PodCgroups | undefined;
  readonly containerLogs: ContainerLogManager | undefined;
  readonly logSymlinks: LogSymlinks | undefined;
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
    const api = options.standalone !== true;
    const gates = options.featureGates ?? {};
    this.volumes = createVolumeStack({
      ...{ kube, clock, logger, recorder, metrics, csiDrivers: this.csiDrivers },
      ...{ nodeName: options.nodeName, rootDir: options.rootDir, hostIPs: options.nodeIPs },
      nodeAllocatable: allocatable,
      ...(deps.mounter !== undefined && { mounter: deps.mounter }),
      pods: () => this.static.config.pods().values(),
      volumeStatsAggPeriodMs: options.volumeStatsAggPeriodMs,
      clusterTrustBundleProjection: api && gates['ClusterTrustBundleProjection'] !== false,
      podCertificates: api && gates['PodCertificateRequest'] !== false,
      nodeUID: () => this.nodeStatus.node?.metadata?.uid,
    });
    syncPodsOnSourceChange(
      this.volumes,
      () => this.static.config.pods(),
      (pod) => {
        this.podWorkers.update(pod, 'update');
      },
    );
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
    this.containerLogs =
      options.logRotation === undefined
        ? undefined
        : new CriContainerLogManager(options.logRotation, {
            cri,
            clock,
            logger: logger.child({ component: 'container-logs' }),
            podLogsDir: options.podLogsDir,
          });
    this.logSymlinks =
      options.containerLogSymlinkDir === undefined
        ? undefined
        : new LogSymlinks({
            dir: options.containerLogSymlinkDir,
            logger: logger.child({ component: 'container-logs' }),
          });
    this.status = new StatusManager({
      ...{ client: kube, clock, logger: logger.child({ component: 'status' }) },
      target: (pod) => this.static.mirrors.statusTarget(pod),
    });
    this.pleg = new RelistPleg({
      ...{ runtime: cri.runtime, clock, logger: logger.child({ component: 'pleg' }) },
      evented: true,
      ...(metrics !== undefined && { metrics }),
      onEvents: (events) => {
        this.syncLoop.dispatch({ kind: 'pleg', events });
      },
    });
    // kubelet_running_pods / kubelet_running_containers, counted at scrape time from
    // the PLEG's cache (what upstream's collectors read from its runtime cache).
    metrics?.observeRuntime(() => runtimeCounts(this.pleg));
    const reader = new RuntimeStatusReader(cri.runtime);
    const userns = usernsManagerOf(options, cri, logger);
    this.resize = resizeStackOf({
      ...{ rootDir: options.rootDir, runtime: cri.runtime, podCgroups: this.podCgroups },
      ...{ node: () => this.nodeStatus.node, pods: () => this.static.config.pods() },
      ...{ rejected: (u) => this.admission.isRejected(u), phase: (u) => this.status.get(u)?.phase },
      sourcesReady: () => this.static.config.synced,
      ...{ podWorkers: () => this.podWorkers, reader },
      ...{ allowedUnsafeSysctls: options.allowedUnsafeSysctls ?? [], recorder, clock, logger },
      // Beta and on by default since v1.36, as upstream's gate.
      podLevelResize: options.featureGates?.['InPlacePodLevelResourcesVerticalScaling'] !== false,
      unified: unifiedOf(options, () => this.nodeStatus.node?.status, deps.cgroups?.version),
    });
    this.prober = new ProberManager({
      runtime: cri.runtime,
      clock,
      recorder,
      logger: logger.child({ component: 'prober' }),
      ...(metrics !== undefined && { metrics: metrics.prober }),
      // A changed result is acted on by the next sync (kill, ready flag): run it now.
      onChange: (podUID, probe) => {
        this.syncLoop.dispatch({ kind: 'probe', probe, podUID });
      },
    });
    const { sync, backoffs } = podSyncOf(options, {
      ...{ kube, cri, recorder, clock, logger, metrics, pleg: this.pleg, reader },
      ...{ status: this.status, prober: this.prober, volumes: this.volumes.volumes },
      ...{ services: this.services, nodeAllocatable: allocatable },
      nodeStatus: () => this.nodeStatus.node?.status,
      ...{ podCgroups: this.podCgroups, cgroupVersion: deps.cgroups?.version },
      ...{ containerLogs: this.containerLogs, resizer: this.resize.resizer },
      logSymlinks: this.logSymlinks,
      runtimeName: () => this.#runtimeName,
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
      consumer: configChannel(() => this.syncLoop),
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
    this.nodeStatus = nodeStatusManagerOf(options, {
      ...{ kube, cri, recorder, clock, logger, host: deps.host },
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
      ...{ client: kube, clock, logger: logger.child({ component: 'lease' }) },
      nodeName: options.nodeName,
      leaseDurationSeconds: options.nodeLeaseDurationSeconds,
      nodeUID: () => this.nodeStatus.node?.metadata?.uid,
    });
    this.#housekeeping = new Housekeeping({
      ...{ cri, pleg: this.pleg, source: this.static.config, podWorkers: this.podWorkers },
      ...{ clock, logger: logger.child({ component: 'housekeeping' }) },
      volumes: this.volumes.volumes,
      ...(this.podCgroups !== undefined && { podCgroups: this.podCgroups }),
      allocations: this.resize,
      userns,
      runtimeCaches: [reader],
      backoffs,
      ...(this.containerLogs !== undefined && { containerLogs: this.containerLogs }),
      ...(this.logSymlinks !== undefined && { logSymlinks: this.logSymlinks }),
    });
    this.syncLoop = new SyncLoop({
      ...{ clock, logger, kube, signal: this.#abort.signal },
      pods: () => this.static.config.pods(),
      ...{ admission: this.admission, podWorkers: this.podWorkers, prober: this.prober },
      ...{ objects: this.volumes.objects, status: this.status },
      allocation: this.resize.allocation,
      housekeeping: this.#housekeeping,
      syncFrequencyMs: options.syncFrequencyMs,
    });
    this.server = kubeletServerOf(options, {
      ...{ kube, cri, clock, logger },
      ...(metrics !== undefined && { metrics }),
      ...(deps.servingCertificate !== undefined && {
        servingCertificate: deps.servingCertificate,
      }),
      pods: () => this.static.config.pods(),
      runtimeCache: this.pleg,
      syncLoopHealth: () => (this.#state === 'RUNNING' ? this.syncLoop.health() : undefined),
      volumes: (uid) => this.volumes.stats.podStats(uid),
    });
  }

  get state(): KubeletState {
    return this.#state;
  }

  /** Whether the host enforces AppArmor (read once at start, as upstream). */
  #appArmorEnabled = false;

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
      // Upstream makes /var/log/containers at start, for the container log links.
      await this.logSymlinks?.ensureDir();
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
      this.#loop('sync-loop', (s) => this.syncLoop.run(s));
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
