/**
 * The prober manager: one worker per (pod UID, container, probe kind), each bound to a
 * container instance by ID. A pod is probed from when the sync loop adds it (`addPod`,
 * upstream's AddPod) until it is removed or terminates (`removePod`); in between, the
 * pod sync tells it what runs (`syncPod`) after every runtime read, and the manager
 * starts workers for new instances and stops those whose instance went away. Results are keyed by container ID, so a restarted
 * container starts with no results (not ready, not failed) instead of inheriting its
 * predecessor's.
 *
 * It is the ProbeResultsReader the sync plan reads (liveness/startup) and the source
 * of the container `ready` and `started` flags.
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import type { CriClient } from '../cri/index.ts';
import type { EventRecorder } from '../events/types.ts';
import type { ProbeKind, ProbeManager, ProbeResult } from './types.ts';
import type { RuntimeContainer, RuntimePodStatus } from '../container/pod-status.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import {
  adopted,
  apiStarted,
  probedContainers,
  readinessOf,
  runningInstance,
  startedOf,
  type ResultsView,
} from './pod-readiness.ts';
import { ProbeWorker, probeOf, type ProberMetrics, type ResultsStore } from './worker.ts';

export type { ProbeKind } from './types.ts';
export type { ProbeMetricsSample, ProberMetrics } from './worker.ts';

export interface ProberManagerOptions {
  readonly runtime: Pick<CriClient['runtime'], 'execSync'>;
  readonly clock: Clock;
  readonly recorder: EventRecorder;
  readonly logger: Logger;
  /** A result of the pod changed: sync it soon (readiness, or a kill for liveness). */
  readonly onChange: (podUID: string, kind: ProbeKind) => void;
  /** In [0, 1), for staggering the first probes (default Math.random). */
  readonly random?: () => number;
  /** Counts every probe run (prober_probe_total, prober_probe_duration_seconds). */
  readonly metrics?: ProberMetrics;
}

interface RunningWorker {
  readonly worker: ProbeWorker;
  readonly abort: AbortController;
  readonly done: Promise<void>;
}

const KINDS: readonly ProbeKind[] = ['startup', 'liveness', 'readiness'];

export class ProberManager implements ProbeManager {
  readonly #o: ProberManagerOptions;
  /** Keyed `${uid}/${container}/${kind}`. */
  readonly #workers = new Map<string, RunningWorker>();
  /** Keyed `${kind}/${containerId}`. */
  readonly #results = new Map<string, ProbeResult>();
  readonly #podIPs = new Map<string, string | undefined>();
  /** UIDs of the pods added and not removed since: only these are probed. */
  readonly #pods = new Set<string>();
  readonly #store: ResultsStore;
  readonly #view: ResultsView;
  /** When this manager was made: workers started within a period of it are jittered. */
  readonly #startedAt: number;
  #stopped = false;

  constructor(options: ProberManagerOptions) {
    this.#o = options;
    this.#startedAt = options.clock.now();
    this.#store = {
      get: (kind, id) => this.#results.get(`${kind}/${id}`),
      set: (kind, id, result) => {
        const key = `${kind}/${id}`;
        if (this.#results.get(key) === result) return false;
        this.#results.set(key, result);
        return true;
      },
    };
    this.#view = { get: (kind, id) => this.get(kind, id), startedAt: this.#startedAt };
  }

  /** Latest published result of `kind` for container instance `containerId`. */
  get(kind: ProbeKind, containerId: string): ProbeResult | undefined {
    return this.#store.get(kind, containerId);
  }

  /** Number of live workers (for tests and, later, metrics). */
  get workerCount(): number {
    return this.#workers.size;
  }

  /** The pod is probed from now on: its containers get workers as they run (`syncPod`). */
  addPod(pod: Pod): void {
    const uid = pod.metadata?.uid ?? '';
    if (uid !== '' && !this.#stopped) this.#pods.add(uid);
  }

  /**
   * Brings the pod's workers in line with what runs: a worker per probe of each
   * running container instance; workers of other instances are stopped. A pod not
   * added (or removed since) gets none.
   */
  syncPod(pod: Pod, runtime: RuntimePodStatus): void {
    const uid = pod.metadata?.uid ?? '';
    if (this.#stopped || !this.#pods.has(uid)) return;
    const sandbox = runtime.sandboxes.find((s) => s.state === 'ready');
    this.#podIPs.set(uid, sandbox?.ip);
    const wanted = new Set<string>();
    for (const container of probedContainers(pod)) {
      const instance = runningInstance(runtime, container.name);
      if (instance === undefined) continue;
      for (const kind of KINDS) {
        const probe = probeOf(container, kind);
        if (probe === undefined) continue;
        const key = `${uid}/${container.name}/${kind}`;
        wanted.add(key);
        const existing = this.#workers.get(key);
        if (existing?.worker.target.containerId === instance.id) continue;
        if (existing !== undefined) this.#stopWorker(key, existing);
        this.#startWorker(key, kind, probe, pod, container, instance);
      }
    }
    for (const [key, w] of this.#workers) {
      if (key.startsWith(`${uid}/`) && !wanted.has(key)) this.#stopWorker(key, w);
    }
  }

  /** Stops every worker of the pod and forgets its results (termination, removal). */
  removePod(uid: string): void {
    this.#pods.delete(uid);
    for (const [key, w] of this.#workers) if (key.startsWith(`${uid}/`)) this.#stopWorker(key, w);
    this.#podIPs.delete(uid);
    this.#o.metrics?.forgetPod(uid);
  }

  /** The `ready` flag per running container of the pod (pod-readiness.ts). */
  readiness(pod: Pod, runtime: RuntimePodStatus): (containerName: string) => boolean | undefined {
    return readinessOf(this.#view, pod, runtime);
  }

  /** The `started` flag per running container: false until its startup probe passed. */
  started(pod: Pod, runtime: RuntimePodStatus): (containerName: string) => boolean | undefined {
    return startedOf(this.#view, pod, runtime);
  }

  /** Stops every worker and waits for them; later syncs start none. Idempotent. */
  async stop(): Promise<void> {
    this.#stopped = true;
    const done = [...this.#workers].map(([key, w]) => {
      this.#stopWorker(key, w);
      return w.done;
    });
    await Promise.all(done);
  }

  #startWorker(
    key: string,
    kind: ProbeKind,
    probe: NonNullable<Container['livenessProbe']>,
    pod: Pod,
    container: Container,
    instance: RuntimeContainer,
  ): void {
    const uid = pod.metadata?.uid ?? '';
    // A container whose startup probe passed before berth restarted has started: its
    // startup probe is not run again (upstream stops it once Started is true), and its
    // liveness and readiness probes are not held back.
    const startedBefore =
      kind === 'startup' &&
      adopted(this.#view, instance) &&
      apiStarted(pod, container.name, instance.id);
    if (startedBefore) this.#store.set('startup', instance.id, 'success');
    const worker = new ProbeWorker(
      kind,
      probe,
      {
        pod,
        container,
        containerId: instance.id,
        startedAt: instance.startedAt ?? instance.createdAt,
      },
      {
        runtime: this.#o.runtime,
        clock: this.#o.clock,
        recorder: this.#o.recorder,
        logger: this.#o.logger.child({
          pod: `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`,
          container: container.name,
        }),
        results: this.#store,
        onChange: () => {
          this.#o.onChange(uid, kind);
        },
        onStarted: () => {
          // Readiness, held back by the startup probe, is probed now rather than at its
          // next tick (upstream triggers it from UpdatePodStatus); liveness keeps its period.
          const w = this.#workers.get(`${uid}/${container.name}/readiness`);
          if (w?.worker.target.containerId === instance.id) w.worker.trigger();
        },
        podIP: () => this.#podIPs.get(uid),
        random: this.#o.random ?? Math.random,
        startedAt: this.#startedAt,
        metrics: this.#o.metrics,
      },
    );
    const abort = new AbortController();
    // run() never rejects; the promise is kept so stop() can wait for it. A worker whose
    // work is already done stays registered, so its result is dropped with the instance.
    const done = startedBefore ? Promise.resolve() : worker.run(abort.signal);
    this.#workers.set(key, { worker, abort, done });
  }

  #stopWorker(key: string, w: RunningWorker): void {
    w.abort.abort();
    this.#workers.delete(key);
    // The instance is gone (or replaced): its results would only mislead.
    this.#results.delete(`${w.worker.kind}/${w.worker.target.containerId}`);
  }
}
