/**
 * The kubelet's per-pod work (PodSyncer): converge the runtime to the pod spec through
 * CRI, following the plan from kuberuntime/plan.ts, then report status. Every CRI call
 * takes the worker's signal, so a sync is cancelled when termination begins.
 */
import type { Pod, Secret } from 'kubernetes-types/core/v1.js';
import { CriError, cri, type CriClient } from '../cri/index.ts';
import type { EventRecorder, EventTarget } from '../events/types.ts';
import type { ImageManager } from '../images/manager.ts';
import { inNamespace, isNotFound, PODS, SECRETS, type KubeClient } from '../kube/types.ts';
import { podDescription } from '../container/format.ts';
import { computePodActions, containerBackoffKey } from '../kuberuntime/plan.ts';
import type { RuntimePodStatus } from '../container/pod-status.ts';
import type { Pleg } from '../pleg/types.ts';
import type { PodSyncer, SyncResult } from '../podworkers/types.ts';
import type { ProberManager } from '../prober/manager.ts';
import { generatePodStatus, type WaitingReason } from '../status/generate.ts';
import type { StatusManager } from '../status/manager.ts';
import type { Backoff } from '../util/backoff.ts';
import type { PodCgroups } from '../cm/pod-cgroups.ts';
import { HandlerRunner } from '../lifecycle/handler.ts';
import { runPostStart, type StopDeps } from '../lifecycle/stop.ts';
import type { ContainerLogManager } from '../logs/index.ts';
import { recordPodStartDuration } from '../metrics/pod-metrics.ts';
import type { KubeletMetrics } from '../metrics/registry.ts';
import type { Clock } from '../util/clock.ts';
import { VolumeError, type PodVolumes, type VolumeManager } from '../volumes/types.ts';
import type { Logger } from '../util/logger.ts';
import { sandboxConfig, type RuntimeConfigOptions } from './runtime-config.ts';
import { createPodSandbox, killContainer, killPod, specContainer } from './pod-sandbox.ts';
import type { RuntimeStatusReader } from './runtime-status.ts';
import {
  startContainer,
  type ContainerEnvProvider,
  type ContainerStartDeps,
} from './container-start.ts';
import { writeEtcHosts } from './pod-dirs.ts';
import { containerTarget, podTarget } from '../events/targets.ts';
import type { PodResizer } from '../kuberuntime/resizer.ts';
import { pullImageVolumes } from '../kuberuntime/image-volumes.ts';

export interface PodSyncOptions {
  readonly cri: CriClient;
  readonly kube: KubeClient;
  readonly pleg: Pleg;
  readonly reader: RuntimeStatusReader;
  readonly images: ImageManager;
  readonly status: StatusManager;
  readonly recorder: EventRecorder;
  readonly clock: Clock;
  readonly logger: Logger;
  /** CrashLoopBackOff: 10 s doubling to 300 s, reset after 10 min. */
  readonly crashBackoff: Backoff;
  readonly runtimeConfig: RuntimeConfigOptions;
  readonly runtimeName: () => string;
  readonly hostIPs: readonly string[];
  /** Probe workers and results; without it no probe runs and every probe counts as passed. */
  readonly prober?: ProberManager;
  readonly rootDir: string;
  readonly volumes: VolumeManager;
  readonly env: ContainerEnvProvider;
  /** The pod's managed /etc/hosts content for its IPs. */
  readonly hostsFile: (pod: Pod, podIPs: readonly string[]) => string;
  /** QoS and pod cgroups (cgroupsPerQOS with a cgroup filesystem). */
  readonly podCgroups?: PodCgroups;
  readonly metrics?: KubeletMetrics;
  /** Rotates container logs; removes a container's rotated logs with it. */
  readonly containerLogs?: Pick<ContainerLogManager, 'clean'>;
  /** In-place resize: allocated resources, actuation, resize conditions. */
  readonly resize?: PodResizer;
  /** The pod's containers, sandboxes and volumes are gone (drop per-pod caches). */
  readonly onPodGone?: (uid: string) => void;
}

function podRef(pod: Pod, container?: string): EventTarget {
  return container === undefined ? podTarget(pod) : containerTarget(pod, container);
}

export class PodSync implements PodSyncer {
  readonly #o: PodSyncOptions;
  /** Why containers are not running, per pod UID (what the status shows as waiting). */
  readonly #waiting = new Map<string, Map<string, WaitingReason>>();
  /** Why a pod failed as a whole (deadline), kept for every later status of it. */
  readonly #failed = new Map<string, { reason: string; message: string }>();
  /**
   * When each pod was first synced (right after the source handed it over), for
   * kubelet_pod_start_duration_seconds; dropped with the pod's other state when it goes.
   */
  readonly #firstSeen = new Map<string, number>();

  readonly #hooks: StopDeps;

  constructor(options: PodSyncOptions) {
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
          (await this.#runtimeStatus(pod, signal)).sandboxes.find((x) => x.state === 'ready')?.ip,
      }),
    };
  }

  async #runtimeStatus(pod: Pod, signal: AbortSignal): Promise<RuntimePodStatus> {
    const m = pod.metadata ?? {};
    return this.#o.reader.read(
      this.#o.pleg.get(m.uid ?? ''),
      { name: m.name ?? '', namespace: m.namespace ?? '' },
      signal,
    );
  }

  /** Computes and records the pod's status; returns its phase. */
  #report(
    pod: Pod,
    runtime: RuntimePodStatus,
    extra: { podFailure?: { reason: string; message: string }; terminating?: boolean } = {},
  ): string | undefined {
    const uid = pod.metadata?.uid ?? '';
    const podFailure = extra.podFailure ?? this.#failed.get(uid);
    const prober = this.#o.prober;
    // Every runtime read ends here, so this is where probe workers follow the containers.
    if (prober !== undefined && extra.terminating !== true) prober.syncPod(pod, runtime);
    const previous = this.#o.status.get(uid) ?? pod.status;
    const resize = this.#o.resize?.statusInputs(pod, runtime, extra.terminating === true);
    const status = generatePodStatus({
      pod,
      runtime,
      ...(previous !== undefined && { previous }),
      ...(extra.terminating === true && { terminal: true }),
      waiting: this.#waiting.get(uid) ?? new Map(),
      runtimeName: this.#o.runtimeName(),
      hostIPs: this.#o.hostIPs,
      now: new Date(this.#o.clock.now()),
      ...(prober !== undefined && {
        readiness: prober.readiness(pod, runtime),
        started: prober.started(pod, runtime),
      }),
      ...(podFailure !== undefined && { podFailure }),
      ...resize,
    });
    if (status.phase === 'Running' && (previous?.phase ?? 'Pending') === 'Pending') {
      // kubelet_pod_start_duration_seconds: first seen by this kubelet to Running.
      const seen = this.#firstSeen.get(uid);
      if (seen !== undefined) recordPodStartDuration(this.#o.metrics, seen, this.#o.clock.now());
    }
    this.#o.status.set(pod, status);
    return status.phase;
  }

  async #pullSecrets(pod: Pod, signal: AbortSignal): Promise<Secret[]> {
    const ns = pod.metadata?.namespace ?? 'default';
    const out: Secret[] = [];
    for (const ref of pod.spec?.imagePullSecrets ?? []) {
      if (ref.name === undefined || ref.name === '') continue;
      try {
        out.push(await this.#o.kube.get<Secret>(inNamespace(SECRETS, ns), ref.name, { signal }));
      } catch (err) {
        if (signal.aborted) throw err;
        this.#o.logger.warn('Unable to retrieve pull secret, the image pull may fail', {
          pod: `${ns}/${pod.metadata?.name ?? ''}`,
          secret: ref.name,
          error: String(err),
        });
      }
    }
    return out;
  }

  async syncPod(desired: Pod, signal: AbortSignal): Promise<SyncResult> {
    const { recorder, clock } = this.#o;
    // Synced at its allocated resources: a resize not (yet) allocated is not applied.
    const pod = (await this.#o.resize?.prepare(desired)) ?? desired;
    const uid = pod.metadata?.uid ?? '';
    if (!this.#firstSeen.has(uid)) this.#firstSeen.set(uid, clock.now());
    const waiting = new Map<string, WaitingReason>();
    this.#waiting.set(uid, waiting);
    const deadlineMs = this.#activeDeadlineRemaining(pod);
    if (deadlineMs !== undefined && deadlineMs <= 0) return this.#deadlineExceeded(pod, signal);
    let volumes: PodVolumes;
    try {
      volumes = await this.#o.volumes.setUpPod(pod, signal);
    } catch (err) {
      if (signal.aborted || !(err instanceof VolumeError)) throw err;
      // Upstream keeps the containers in their default waiting state (ContainerCreating,
      // PodInitializing with init containers) and retries; the event says why.
      recorder.event(podRef(pod), 'Warning', 'FailedMount', err.message);
      this.#report(pod, await this.#runtimeStatus(pod, signal));
      return { requeueAfterMs: 5000 };
    }
    let runtime = await this.#runtimeStatus(pod, signal);
    const resize = this.#o.resize?.plan(pod, runtime);
    const plan = computePodActions({
      pod,
      status: runtime,
      now: clock.now(),
      backoff: this.#o.crashBackoff,
      ...(this.#o.prober !== undefined && { probes: this.#o.prober }),
      ...(resize !== undefined && { resizeRestarts: resize.restarts }),
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
      await killPod(
        this.#hooks,
        this.#o.cri.runtime,
        pod,
        runtime,
        grace,
        'Pod sandbox changed, it will be killed and re-created.',
        signal,
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
    let sandboxId = plan.sandboxId;
    let sandbox: cri.PodSandboxConfig | undefined;
    if (plan.createSandbox) {
      const created = await createPodSandbox(this.#o, pod, plan.attempt, signal);
      if (created === undefined) {
        this.#report(pod, runtime);
        return { requeueAfterMs: 10_000 };
      }
      ({ id: sandboxId, config: sandbox } = created);
      await this.#o.pleg.relist(signal);
      runtime = await this.#runtimeStatus(pod, signal);
    }
    if (sandboxId === undefined) {
      this.#report(pod, runtime);
      return {};
    }
    sandbox ??= sandboxConfig(pod, plan.attempt, this.#o.runtimeConfig);
    // Upstream's step 6: resize the pod cgroup and running containers, then start.
    if (resize !== undefined && !plan.killPod) {
      const killed = new Set(plan.containersToKill.map((k) => k.name));
      if (await this.#o.resize?.actuate(pod, resize, killed, signal)) {
        await this.#o.pleg.relist(signal);
        runtime = await this.#runtimeStatus(pod, signal);
      }
    }
    const starting =
      plan.ephemeralContainersToStart.length +
      plan.initContainersToStart.length +
      plan.containersToStart.length;
    if (starting > 0) {
      const secrets = await this.#pullSecrets(pod, signal);
      const podIPs = runtime.sandboxes.find((s) => s.id === sandboxId)?.ips ?? [];
      const hosts = await writeEtcHosts(this.#o.rootDir, uid, this.#o.hostsFile(pod, podIPs));
      const deps = this.#startDeps(hosts);
      // Every image volume, before any container (upstream's getImageVolumes).
      const imageVolumes = await pullImageVolumes(
        this.#o.images,
        pod,
        secrets,
        sandbox,
        podRef(pod),
        signal,
      );
      const start = async (name: string): Promise<void> => {
        const spec = specContainer(pod, name);
        if (spec === undefined) return;
        await this.#o.resize?.containerStarting(pod, name);
        const r = await startContainer(
          deps,
          {
            pod,
            spec,
            runtime,
            sandboxId,
            sandbox,
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
      for (const name of plan.ephemeralContainersToStart) await start(name);
      for (const name of plan.initContainersToStart) await start(name);
      await Promise.all(plan.containersToStart.map(start));
      await this.#o.pleg.relist(signal);
    }
    runtime = await this.#runtimeStatus(pod, signal);
    const phase = this.#report(pod, runtime);
    for (const name of Object.keys(plan.waiting)) {
      const remaining = this.#o.crashBackoff.remaining(containerBackoffKey(uid, name));
      if (remaining > 0) requeue = Math.min(requeue ?? remaining, remaining);
    }
    if (deadlineMs !== undefined) requeue = Math.min(requeue ?? deadlineMs, deadlineMs);
    const terminal = phase === 'Succeeded' || phase === 'Failed';
    return { terminal, ...(requeue !== undefined && !terminal && { requeueAfterMs: requeue }) };
  }

  /** Milliseconds left of spec.activeDeadlineSeconds (from the pod's start), if it has one. */
  #activeDeadlineRemaining(pod: Pod): number | undefined {
    const seconds = pod.spec?.activeDeadlineSeconds;
    if (seconds === undefined) return undefined;
    const start =
      this.#o.status.get(pod.metadata?.uid ?? '')?.startTime ?? pod.status?.startTime ?? undefined;
    if (start === undefined) return seconds * 1000;
    return Date.parse(start) + seconds * 1000 - this.#o.clock.now();
  }

  /** Upstream's active deadline handler: stop everything, phase Failed, DeadlineExceeded. */
  async #deadlineExceeded(pod: Pod, signal: AbortSignal): Promise<SyncResult> {
    const message = 'Pod was active on the node longer than the specified deadline';
    this.#o.recorder.event(podRef(pod), 'Normal', 'DeadlineExceeded', message);
    this.#failed.set(pod.metadata?.uid ?? '', { reason: 'DeadlineExceeded', message });
    const runtime = await this.#runtimeStatus(pod, signal);
    await killPod(
      this.#hooks,
      this.#o.cri.runtime,
      pod,
      runtime,
      pod.spec?.terminationGracePeriodSeconds ?? 30,
      undefined,
      signal,
    );
    await this.#o.pleg.relist(signal);
    this.#report(pod, await this.#runtimeStatus(pod, signal));
    return { terminal: true };
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
      postStart: async (pod, container, containerId, signal) => {
        const r = await runPostStart(this.#hooks, { pod, container, containerId }, signal);
        return r.ok ? undefined : r.message;
      },
    };
  }

  async syncTerminatingPod(
    pod: Pod,
    gracePeriodSeconds: number,
    signal: AbortSignal,
  ): Promise<void> {
    // Probing a pod that is being stopped would only produce noise (and liveness kills).
    this.#o.prober?.removePod(pod.metadata?.uid ?? '');
    await this.#o.pleg.relist(signal);
    const runtime = await this.#runtimeStatus(pod, signal);
    await killPod(
      this.#hooks,
      this.#o.cri.runtime,
      pod,
      runtime,
      gracePeriodSeconds,
      undefined,
      signal,
    );
    await this.#o.pleg.relist(signal);
    this.#report(pod, await this.#runtimeStatus(pod, signal), { terminating: true });
  }

  async syncTerminatedPod(pod: Pod, signal: AbortSignal): Promise<void> {
    const uid = pod.metadata?.uid ?? '';
    await this.#o.pleg.relist(signal);
    const runtime = await this.#runtimeStatus(pod, signal);
    this.#o.prober?.removePod(uid);
    this.#report(pod, runtime, { terminating: true });
    if (pod.metadata?.deletionTimestamp == null) return;
    // The pod is going away: its containers and sandboxes go with it.
    for (const c of runtime.containers) {
      await this.#o.containerLogs?.clean(c.id, signal);
      await this.#o.cri.runtime
        .removeContainer({ containerId: c.id }, { signal })
        .catch((err: unknown) => {
          if (!(err instanceof CriError && err.code === 'BERTH_CRI_NOT_FOUND')) throw err;
        });
    }
    for (const s of runtime.sandboxes) {
      await this.#o.cri.runtime
        .removePodSandbox({ podSandboxId: s.id }, { signal })
        .catch((err: unknown) => {
          if (!(err instanceof CriError && err.code === 'BERTH_CRI_NOT_FOUND')) throw err;
        });
    }
    await this.#o.volumes.tearDownPod(uid, signal);
    await this.#o.podCgroups?.destroyPod(uid);
    this.#o.onPodGone?.(uid);
    this.#o.resize?.forget(uid);
    await this.#o.status.drain();
    try {
      await this.#o.kube.delete(
        inNamespace(PODS, pod.metadata.namespace ?? 'default'),
        pod.metadata.name ?? '',
        {
          gracePeriodSeconds: 0,
          preconditions: { uid },
          signal,
        },
      );
    } catch (err) {
      if (!isNotFound(err) && !(err instanceof Error && /precondition|conflict/i.test(err.message)))
        throw err;
    }
    this.#o.status.remove(uid);
    this.#waiting.delete(uid);
    this.#failed.delete(uid);
    this.#firstSeen.delete(uid);
    for (const c of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
      this.#o.crashBackoff.reset(containerBackoffKey(uid, c.name));
    }
  }
}
