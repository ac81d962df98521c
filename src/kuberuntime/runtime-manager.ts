/**
 * The runtime manager (upstream's kubeGenericRuntimeManager, kuberuntime_manager.go):
 * converges one pod's sandbox and containers to its spec through CRI. `syncPod` is
 * upstream's SyncPod, the runtime level of a pod sync: compute the plan
 * (computePodActions in plan.ts), kill what must go, create the sandbox when needed,
 * resize in place, then start ephemeral, init and app containers. The kubelet level
 * (kubelet/pod-sync.ts, upstream's Kubelet.SyncPod) sets up volumes, reads the pod's
 * runtime status before calling it, and reports status after it.
 */
import type { Pod, Secret } from 'kubernetes-types/core/v1.js';
import type { CriClient, cri } from '../cri/index.ts';
import { podDescription } from '../container/format.ts';
import type { RuntimePodStatus } from '../container/pod-status.ts';
import { containerTarget, podTarget } from '../events/targets.ts';
import type { EventRecorder, EventTarget } from '../events/types.ts';
import type { ImageEnsurer } from '../images/types.ts';
import type { KubeClient } from '../kube/types.ts';
import type { PodCgroups } from '../cm/pod-cgroups.ts';
import { HandlerRunner } from '../lifecycle/handler.ts';
import { runPostStart, type StopDeps } from '../lifecycle/stop.ts';
import { recordUserNamespacedPodStarted } from '../metrics/pod-metrics.ts';
import type { KubeletMetrics } from '../metrics/registry.ts';
import type { Pleg } from '../pleg/types.ts';
import type { UserNamespaceManager } from '../userns/types.ts';
import type { ProbeResultsReader } from '../prober/types.ts';
import type { WaitingReason } from '../status/generate.ts';
import type { Backoff } from '../util/backoff.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import type { PodVolumes, VolumeManager } from '../volumes/types.ts';
import {
  startContainer,
  type ContainerEnvProvider,
  type ContainerStartDeps,
} from './container-start.ts';
import { pullImageVolumes } from './image-volumes.ts';
import { computePodActions } from './plan.ts';
import type { ContainerToReset } from './restart-all.ts';
import { writeEtcHosts } from './pod-dirs.ts';
import {
  createPodSandbox,
  describeError,
  killContainer,
  killPod,
  runningSandboxConfig,
  specContainer,
} from './pod-sandbox.ts';
import type { PodResizer } from './resizer.ts';
import type { RuntimeConfigOptions } from './runtime-config.ts';
import type { RuntimeStatusReader } from './runtime-status.ts';
import type { LogSymlinks } from './log-symlinks.ts';

export interface RuntimeManagerOptions {
  readonly cri: CriClient;
  readonly kube: KubeClient;
  readonly pleg: Pleg;
  readonly reader: RuntimeStatusReader;
  readonly images: ImageEnsurer;
  readonly recorder: EventRecorder;
  readonly clock: Clock;
  readonly logger: Logger;
  /** CrashLoopBackOff: 10 s doubling to 300 s, reset after 10 min. */
  readonly crashBackoff: Backoff;
  readonly runtimeConfig: RuntimeConfigOptions;
  /** Liveness and startup results; without it every probe counts as passed. */
  readonly probes?: ProbeResultsReader;
  readonly rootDir: string;
  readonly volumes: VolumeManager;
  readonly env: ContainerEnvProvider;
  /** The pod's managed /etc/hosts content for its IPs. */
  readonly hostsFile: (pod: Pod, podIPs: readonly string[]) => string;
  /** QoS and pod cgroups (cgroupsPerQOS with a cgroup filesystem). */
  readonly podCgroups?: PodCgroups;
  readonly metrics?: KubeletMetrics;
  /** In-place resize: allocated resources, actuation, resize conditions. */
  readonly resize?: PodResizer;
  /** /var/log/containers, kept as upstream keeps it (kuberuntime/log-symlinks.ts). */
  readonly logSymlinks?: LogSymlinks;
  /** Each pod's user namespace (`hostUsers`); without it a `hostUsers: false` pod is refused. */
  readonly userns?: UserNamespaceManager;
}

/**
 * The image pull secrets of the pod. Fetched only when a container is to be started,
 * so a steady pod costs no API call per sync.
 */
export type PullSecrets = (signal: AbortSignal) => Promise<Secret[]>;

/** What the kubelet level hands the runtime level besides upstream's arguments. */
export interface SyncPodContext {
  /** The pod's mounted volumes (upstream's volume manager GetMountedVolumesForPod). */
  readonly volumes: PodVolumes;
  /** Filled with why containers are not running, for the status (upstream's reasonCache). */
  readonly waiting: Map<string, WaitingReason>;
  /** The pod is restarting all its containers (restart-all.ts): this sync removes them. */
  readonly restartAll?: boolean;
}

/** The outcome of {@link KubeRuntimeManager.syncPod}. */
export type RuntimeSyncResult =
  | {
      /**
       * `sandbox-failed`: the sandbox could not be created (the event says why), nothing
       * was started. `no-sandbox`: the plan wants no sandbox (a finished pod).
       */
      readonly outcome: 'sandbox-failed' | 'no-sandbox';
      /** The pod's runtime status as last read. */
      readonly podStatus: RuntimePodStatus;
    }
  | {
      readonly outcome: 'synced';
      /** When the pod must be synced again (back-off, image pull, ...), if sooner than the resync. */
      readonly requeueAfterMs?: number;
    };

function podRef(pod: Pod, container?: string): EventTarget {
  return container === undefined ? podTarget(pod) : containerTarget(pod, container);
}

export class KubeRuntimeManager {
  readonly #o: RuntimeManagerOptions;
  readonly #hooks: StopDeps;

  constructor(options: RuntimeManagerOptions) {
    this.#o = options;
    const logger = options.logger.child({ component: 'lifecycle' });
    this.#hooks = {
      cri: options.cri,
      recorder: options.recorder,
      clock: options.clock,
      logger,
      runner: new HandlerRunner({
        runtime: options.cri.runtime,
        recorder: options.recorder,
        clock: options.clock,
        logger,
        // The API status may not have the IP yet right after the sandbox started.
        podIP: async (pod, signal) =>
          (await this.getPodStatus(pod, signal)).sandboxes.find((x) => x.state === 'ready')?.ip,
      }),
    };
  }

  /** The pod's runtime status (upstream's GetPodStatus), from the PLEG's last relist. */
  async getPodStatus(pod: Pod, signal: AbortSignal): Promise<RuntimePodStatus> {
    const m = pod.metadata ?? {};
    return this.#o.reader.read(
      this.#o.pleg.get(m.uid ?? ''),
      { name: m.name ?? '', namespace: m.namespace ?? '' },
      signal,
    );
  }

  /**
   * Stops every container and the sandbox of the pod (upstream's KillPod), with
   * preStop hooks, within `gracePeriodSeconds`; `message` goes on the Killing events.
   */
  async killPod(
    pod: Pod,
    podStatus: RuntimePodStatus,
    gracePeriodSeconds: number,
    signal: AbortSignal,
    message?: string,
  ): Promise<void> {
    await killPod(
      this.#hooks,
      this.#o.cri.runtime,
      pod,
      podStatus,
      gracePeriodSeconds,
      message,
      signal,
    );
  }

  /**
   * RestartAllContainers: kills (without grace, upstream's "killing" with reason
   * RestartAllContainers) and removes each container; the logs stay until the pod goes.
   */
  async #reset(pod: Pod, containers: readonly ContainerToReset[], signal: AbortSignal) {
    for (const c of containers) {
      if (c.kill) await killContainer(this.#hooks, pod, c, 0, 'killing', signal);
      await this.#o.cri.runtime.removeContainer({ containerId: c.id }, { signal });
      this.#o.logger.info('Removed container before pod restarts', {
        pod: `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`,
        podUID: pod.metadata?.uid ?? '',
        container: c.name,
        containerID: c.id,
      });
    }
    await this.#o.pleg.relist(signal);
  }

  /** Upstream's SyncPod: one pass of the plan over `podStatus` (see the module comment). */
  async syncPod(
    pod: Pod,
    podStatus: RuntimePodStatus,
    pullSecrets: PullSecrets,
    signal: AbortSignal,
    { volumes, waiting, restartAll }: SyncPodContext,
  ): Promise<RuntimeSyncResult> {
    const { recorder, clock } = this.#o;
    const uid = pod.metadata?.uid ?? '';
    // Upstream's V(4) lines, by its texts: they time a pod's start phase by phase
    // (bench/pod-start.ts --trace reads them from both agents' logs).
    const log = this.#o.logger.child({
      component: 'kuberuntime',
      pod: `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`,
      podUID: uid,
    });
    let runtime = podStatus;
    const resize = this.#o.resize?.plan(pod, runtime);
    const plan = computePodActions({
      pod,
      status: runtime,
      now: clock.now(),
      backoff: this.#o.crashBackoff,
      ...(this.#o.probes !== undefined && { probes: this.#o.probes }),
      ...(resize !== undefined && { resizeRestarts: resize.restarts }),
      ...(restartAll === true && { restartAll }),
    });
    for (const [name, w] of Object.entries(plan.waiting)) {
      waiting.set(name, w);
      recorder.event(
        podRef(pod, name),
        'Warning',
        'BackOff',
        `Back-off restarting failed container ${name} in pod ${podDescription(pod)}`,
      );
    }
    let requeue: number | undefined;
    const grace = pod.spec?.terminationGracePeriodSeconds ?? 30;

    if (plan.killPod) {
      await this.killPod(
        pod,
        runtime,
        grace,
        signal,
        'Pod sandbox changed, it will be killed and re-created.',
      );
    }
    for (const k of plan.containersToKill) {
      // A probe kill uses the probe's own grace period when it sets one, as upstream.
      const spec = specContainer(pod, k.name);
      const probe =
        k.reason === 'liveness'
          ? spec?.livenessProbe
          : k.reason === 'startup'
            ? spec?.startupProbe
            : undefined;
      const seconds = probe?.terminationGracePeriodSeconds ?? grace;
      await killContainer(this.#hooks, pod, k, seconds, k.message, signal);
    }
    if (plan.containersToReset.length > 0) {
      await this.#reset(pod, plan.containersToReset, signal);
      // The next sync finds the pod empty and starts it over (upstream requeues at once).
      return { outcome: 'synced', requeueAfterMs: 0 };
    }
    let sandboxId = plan.sandboxId;
    let sandbox: cri.PodSandboxConfig | undefined;
    // Upstream counts each sandbox made for a hostUsers: false pod, and that sync's failure.
    const userNamespaced = plan.createSandbox && pod.spec?.hostUsers === false;
    if (userNamespaced) recordUserNamespacedPodStarted(this.#o.metrics);
    if (plan.createSandbox) {
      log.debug('Creating PodSandbox for pod');
      const created = await createPodSandbox(this.#o, pod, plan.attempt, signal);
      if (created === undefined) {
        if (userNamespaced) recordUserNamespacedPodStarted(this.#o.metrics, false);
        return { outcome: 'sandbox-failed', podStatus: runtime };
      }
      ({ id: sandboxId, config: sandbox } = created);
      log.debug('Created PodSandbox for pod', { podSandboxID: sandboxId });
      await this.#o.pleg.relist(signal);
      runtime = await this.getPodStatus(pod, signal);
    }
    if (sandboxId === undefined) return { outcome: 'no-sandbox', podStatus: runtime };
    // Upstream's step 6: resize the pod cgroup and running containers, then start.
    if (resize !== undefined && !plan.killPod) {
      const killed = new Set(plan.containersToKill.map((k) => k.name));
      if (await this.#o.resize?.actuate(pod, resize, killed, signal)) {
        await this.#o.pleg.relist(signal);
        runtime = await this.getPodStatus(pod, signal);
      }
    }
    const starting =
      plan.ephemeralContainersToStart.length +
      plan.initContainersToStart.length +
      plan.containersToStart.length;
    if (starting > 0) {
      const podSandbox = sandbox ?? (await this.#runningSandbox(pod, plan.attempt, signal));
      if (typeof podSandbox === 'string') {
        // Upstream fails each container's config the same way (CreateContainerConfigError).
        const names = [
          ...plan.ephemeralContainersToStart,
          ...plan.initContainersToStart,
          ...plan.containersToStart,
        ];
        for (const name of names) {
          recorder.event(podRef(pod, name), 'Warning', 'Failed', `Error: ${podSandbox}`);
          waiting.set(name, { reason: 'CreateContainerConfigError', message: podSandbox });
        }
        return { outcome: 'synced', requeueAfterMs: 10_000 };
      }
      const secrets = await pullSecrets(signal);
      const podIPs = runtime.sandboxes.find((s) => s.id === sandboxId)?.ips ?? [];
      const hosts = await writeEtcHosts(this.#o.rootDir, uid, this.#o.hostsFile(pod, podIPs));
      const deps = this.#startDeps(hosts);
      // Every image volume, before any container (upstream's getImageVolumes).
      const imageVolumes = await pullImageVolumes(
        this.#o.images,
        pod,
        secrets,
        podSandbox,
        podRef(pod),
        signal,
      );
      const start = async (containerType: string, name: string): Promise<void> => {
        const spec = specContainer(pod, name);
        if (spec === undefined) return;
        log.debug('Creating container in pod', { containerType, container: name });
        await this.#o.resize?.containerStarting(pod, name);
        const r = await startContainer(
          deps,
          {
            pod,
            spec,
            runtime,
            sandboxId,
            sandbox: podSandbox,
            podIPs,
            secrets,
            volumes,
            imageVolumes,
            waiting,
            target: podRef(pod, name),
          },
          signal,
        );
        if (r !== undefined) requeue = Math.min(requeue ?? r, r);
      };
      // Init containers (and sidecars) in order; app containers in parallel, since their
      // images and start-up do not depend on each other.
      // Ephemeral containers first (kubectl debug into a pod whose init is stuck), as upstream.
      for (const name of plan.ephemeralContainersToStart) await start('ephemeral container', name);
      for (const name of plan.initContainersToStart) await start('init container', name);
      await Promise.all(plan.containersToStart.map((name) => start('container', name)));
      await this.#o.pleg.relist(signal);
      // A container started now and left waiting failed to start (its reason says how).
      const started = [
        ...plan.ephemeralContainersToStart,
        ...plan.initContainersToStart,
        ...plan.containersToStart,
      ];
      if (userNamespaced && started.some((name) => waiting.has(name)))
        recordUserNamespacedPodStarted(this.#o.metrics, false);
    }
    // Synced again when the first held-back container is due (its delay counts from its exit).
    for (const w of Object.values(plan.waiting)) {
      const remaining = Math.max(0, w.retryAt - clock.now());
      requeue = Math.min(requeue ?? remaining, remaining);
    }
    return { outcome: 'synced', ...(requeue !== undefined && { requeueAfterMs: requeue }) };
  }

  /**
   * The running sandbox's config for CreateContainer, or why it cannot be made (a
   * hostUsers: false pod whose RuntimeClass or user namespace support went away).
   */
  async #runningSandbox(
    pod: Pod,
    attempt: number,
    signal: AbortSignal,
  ): Promise<cri.PodSandboxConfig | string> {
    try {
      return await runningSandboxConfig(this.#o, pod, attempt, signal);
    } catch (err) {
      if (signal.aborted) throw err;
      return describeError(err);
    }
  }

  #startDeps(hostsFile: string): ContainerStartDeps {
    const o = this.#o;
    return {
      cri: o.cri,
      images: o.images,
      recorder: o.recorder,
      crashBackoff: o.crashBackoff,
      rootDir: o.rootDir,
      env: o.env,
      volumes: o.volumes,
      etcHosts: () => hostsFile,
      seccomp: o.runtimeConfig,
      ...(o.metrics !== undefined && { metrics: o.metrics }),
      ...(o.logSymlinks !== undefined && { logSymlinks: o.logSymlinks }),
      postStart: async (pod, container, containerId, signal) => {
        const r = await runPostStart(this.#hooks, { pod, container, containerId }, signal);
        return r.ok ? undefined : r.message;
      },
    };
  }
}
