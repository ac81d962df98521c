/**
 * The kubelet's per-pod work (PodSyncer), upstream's Kubelet.SyncPod /
 * SyncTerminatingPod / SyncTerminatedPod: set up volumes, read the pod's runtime
 * status, hand the runtime level (kuberuntime/runtime-manager.ts, upstream's
 * kubeGenericRuntimeManager.SyncPod) the pod to converge, then report status. Every
 * CRI call takes the worker's signal, so a sync is cancelled when termination begins.
 */
import type { Pod, Secret } from 'kubernetes-types/core/v1.js';
import type { RuntimePodStatus } from '../container/pod-status.ts';
import {
  allContainersCleanedUp,
  allContainersCouldRestart,
  shouldAllContainersRestart,
} from '../container/restart-policy.ts';
import { CriError } from '../cri/index.ts';
import { containerTarget, podTarget } from '../events/targets.ts';
import type { EventTarget } from '../events/types.ts';
import { inNamespace, isNotFound, PODS, SECRETS } from '../kube/types.ts';
import { containerBackoffKey } from '../kuberuntime/plan.ts';
import { KubeRuntimeManager, type RuntimeManagerOptions } from '../kuberuntime/runtime-manager.ts';
import type { ContainerLogManager } from '../logs/index.ts';
import { recordPodStartDuration } from '../metrics/pod-metrics.ts';
import type { PodSyncer, SyncResult } from '../podworkers/types.ts';
import type { ProbeManager } from '../prober/types.ts';
import { generatePodStatus, type WaitingReason } from '../status/generate.ts';
import type { PodStatusManager } from '../status/types.ts';
import { VolumeError, type PodVolumes } from '../volumes/types.ts';
import { removeContainer } from '../kuberuntime/container-removal.ts';

export interface PodSyncOptions extends RuntimeManagerOptions {
  readonly status: PodStatusManager;
  readonly runtimeName: () => string;
  readonly hostIPs: readonly string[];
  /** Probe workers and results; without it no probe runs and every probe counts as passed. */
  readonly prober?: ProbeManager;
  /** Rotates container logs; removes a container's rotated logs with it. */
  readonly containerLogs?: Pick<ContainerLogManager, 'clean'>;
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

  readonly #runtime: KubeRuntimeManager;

  constructor(options: PodSyncOptions) {
    this.#o = options;
    this.#runtime = new KubeRuntimeManager({
      ...options,
      ...(options.prober !== undefined && { probes: options.prober }),
    });
  }

  #runtimeStatus(pod: Pod, signal: AbortSignal): Promise<RuntimePodStatus> {
    return this.#runtime.getPodStatus(pod, signal);
  }

  /**
   * The probe workers of a pod being synced follow its running container instances
   * (a restarted container gets new ones). The pod is probed at all only once the sync
   * loop added it, and no longer once it terminates (ProberManager.addPod/removePod).
   */
  #probe(pod: Pod, runtime: RuntimePodStatus): RuntimePodStatus {
    this.#o.prober?.syncPod(pod, runtime);
    return runtime;
  }

  /** Computes and records the pod's status; returns its phase. */
  async #report(
    pod: Pod,
    runtime: RuntimePodStatus,
    extra: {
      podFailure?: { reason: string; message: string };
      terminating?: boolean;
      restartAll?: { restarting: boolean; podRestarting: boolean };
    } = {},
  ): Promise<string | undefined> {
    const uid = pod.metadata?.uid ?? '';
    const podFailure = extra.podFailure ?? this.#failed.get(uid);
    const prober = this.#o.prober;
    const previous = this.#o.status.get(uid) ?? pod.status;
    const resize = await this.#o.resize?.statusInputs(
      pod,
      runtime,
      extra.terminating === true,
      previous,
    );
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
      ...(extra.restartAll !== undefined && { restartAll: extra.restartAll }),
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
      await this.#report(pod, this.#probe(pod, await this.#runtimeStatus(pod, signal)));
      return { requeueAfterMs: 5000 };
    }
    const before = await this.#runtimeStatus(pod, signal);
    const restartAll = this.#restartAll(pod, before);
    const result = await this.#runtime.syncPod(
      pod,
      before,
      (secretSignal) => this.#pullSecrets(pod, secretSignal),
      signal,
      { volumes, waiting, restartAll: restartAll.restarting },
    );
    if (result.outcome !== 'synced') {
      await this.#report(pod, this.#probe(pod, result.podStatus), { restartAll });
      return result.outcome === 'sandbox-failed' ? { requeueAfterMs: 10_000 } : {};
    }
    const phase = await this.#report(
      pod,
      this.#probe(pod, await this.#runtimeStatus(pod, signal)),
      { restartAll },
    );
    let requeue = result.requeueAfterMs;
    if (deadlineMs !== undefined) requeue = Math.min(requeue ?? deadlineMs, deadlineMs);
    const terminal = phase === 'Succeeded' || phase === 'Failed';
    return { terminal, ...(requeue !== undefined && !terminal && { requeueAfterMs: requeue }) };
  }

  /**
   * RestartAllContainers, decided on the runtime status before the sync as upstream
   * decides it on the status it generates first: the pod is restarting while a
   * triggering exit or the condition says so, and its containers are removed this round
   * unless none is left.
   */
  #restartAll(pod: Pod, runtime: RuntimePodStatus) {
    if (!allContainersCouldRestart(pod)) return { restarting: false, podRestarting: false };
    const previous = this.#o.status.get(pod.metadata?.uid ?? '') ?? pod.status;
    const podRestarting = shouldAllContainersRestart(pod, runtime, previous);
    return {
      restarting: podRestarting && !allContainersCleanedUp(pod, runtime),
      podRestarting,
    };
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
    await this.#runtime.killPod(
      pod,
      runtime,
      pod.spec?.terminationGracePeriodSeconds ?? 30,
      signal,
    );
    await this.#o.pleg.relist(signal);
    await this.#report(pod, this.#probe(pod, await this.#runtimeStatus(pod, signal)));
    return { terminal: true };
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
    await this.#runtime.killPod(pod, runtime, gracePeriodSeconds, signal);
    await this.#o.pleg.relist(signal);
    await this.#report(pod, await this.#runtimeStatus(pod, signal), { terminating: true });
  }

  async syncTerminatedPod(pod: Pod, signal: AbortSignal): Promise<void> {
    const uid = pod.metadata?.uid ?? '';
    await this.#o.pleg.relist(signal);
    const runtime = await this.#runtimeStatus(pod, signal);
    this.#o.prober?.removePod(uid);
    await this.#report(pod, runtime, { terminating: true });
    // Nothing of the pod runs any more: its user namespace range is free (upstream's Release).
    await this.#o.userns?.release(uid);
    if (pod.metadata?.deletionTimestamp == null) return;
    // The pod is going away: its containers and sandboxes go with it.
    const podName = pod.metadata.name ?? '';
    const podNamespace = pod.metadata.namespace ?? '';
    for (const c of runtime.containers) {
      await removeContainer(
        this.#o,
        { id: c.id, name: c.name, podName, podNamespace },
        signal,
      ).catch((err: unknown) => {
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
      this.#o.crashBackoff.reset(containerBackoffKey(uid, c.name, c.image ?? ''));
    }
  }
}
