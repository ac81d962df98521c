/**
 * A ProbeManager for other managers' tests: no probe runs; the test sets each probe's
 * standing outcome (what every run of it would answer, after thresholds) and the fake
 * publishes it as ProberManager's workers would: per running container instance, only
 * once the instance's startup probe passed for liveness and readiness, never again
 * after a startup success or a liveness/startup failure, and `onChange(podUID)` on each
 * change. The flags come from the same rules as the real manager's (pod-readiness.ts).
 * Both pass contract.ts.
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import type { RuntimeContainer, RuntimePodStatus } from '../container/pod-status.ts';
import type { Clock } from '../util/clock.ts';
import {
  adopted,
  apiStarted,
  probedContainers,
  readinessOf,
  runningInstance,
  startedOf,
  type ResultsView,
} from './pod-readiness.ts';
import type { ProbeKind, ProbeManager, ProbeResult } from './types.ts';
import { probeOf } from './worker.ts';

export interface FakeProberManagerOptions {
  readonly clock: Clock;
  /** A result of the pod changed (as ProberManagerOptions.onChange). */
  readonly onChange: (podUID: string) => void;
}

interface FakeWorker {
  readonly uid: string;
  readonly container: string;
  readonly kind: ProbeKind;
  readonly containerId: string;
  readonly gated: boolean;
  done: boolean;
}

const KINDS: readonly ProbeKind[] = ['startup', 'liveness', 'readiness'];

export class FakeProberManager implements ProbeManager {
  readonly #o: FakeProberManagerOptions;
  /** Keyed `${uid}/${container}/${kind}`. */
  readonly #workers = new Map<string, FakeWorker>();
  /** Keyed `${kind}/${containerId}`. */
  readonly #results = new Map<string, ProbeResult>();
  /** Standing outcomes, keyed `${uid}/${container}/${kind}`. */
  readonly #outcomes = new Map<string, ProbeResult>();
  readonly #view: ResultsView;
  /** Pods added (upstream's AddPod); only these get workers. */
  readonly #pods = new Set<string>();
  #stopped = false;

  constructor(options: FakeProberManagerOptions) {
    this.#o = options;
    this.#view = { get: (kind, id) => this.get(kind, id), startedAt: options.clock.now() };
  }

  /** Live workers (the real manager's workerCount). */
  get workerCount(): number {
    return this.#workers.size;
  }

  /**
   * Sets what every run of the pod's `kind` probe of `container` answers from now on,
   * and publishes it to the current instance's worker when that worker may probe.
   */
  setOutcome(podUID: string, container: string, kind: ProbeKind, result: ProbeResult): void {
    const key = `${podUID}/${container}/${kind}`;
    this.#outcomes.set(key, result);
    const w = this.#workers.get(key);
    if (w !== undefined) this.#probe(w);
  }

  get(kind: ProbeKind, containerId: string): ProbeResult | undefined {
    return this.#results.get(`${kind}/${containerId}`);
  }

  addPod(pod: Pod): void {
    const uid = pod.metadata?.uid ?? '';
    if (uid !== '' && !this.#stopped) this.#pods.add(uid);
  }

  syncPod(pod: Pod, runtime: RuntimePodStatus): void {
    const uid = pod.metadata?.uid ?? '';
    if (this.#stopped || !this.#pods.has(uid)) return;
    const wanted = new Set<string>();
    const started: FakeWorker[] = [];
    for (const container of probedContainers(pod)) {
      const instance = runningInstance(runtime, container.name);
      if (instance === undefined) continue;
      for (const kind of KINDS) {
        if (probeOf(container, kind) === undefined) continue;
        const key = `${uid}/${container.name}/${kind}`;
        wanted.add(key);
        const existing = this.#workers.get(key);
        if (existing?.containerId === instance.id) continue;
        if (existing !== undefined) this.#stopWorker(key, existing);
        const w: FakeWorker = {
          uid,
          container: container.name,
          kind,
          containerId: instance.id,
          gated: kind !== 'startup' && container.startupProbe !== undefined,
          done: false,
        };
        this.#workers.set(key, w);
        // An adopted instance whose startup probe passed before is not probed again.
        if (kind === 'startup' && this.#startedBefore(pod, container, instance)) {
          this.#results.set(`startup/${instance.id}`, 'success');
          w.done = true;
        } else started.push(w);
      }
    }
    for (const [key, w] of this.#workers) {
      if (key.startsWith(`${uid}/`) && !wanted.has(key)) this.#stopWorker(key, w);
    }
    // A fresh worker probes at once, as the real one does.
    for (const w of started) this.#probe(w);
  }

  removePod(uid: string): void {
    this.#pods.delete(uid);
    for (const [key, w] of this.#workers) if (key.startsWith(`${uid}/`)) this.#stopWorker(key, w);
  }

  readiness(pod: Pod, runtime: RuntimePodStatus): (containerName: string) => boolean | undefined {
    return readinessOf(this.#view, pod, runtime);
  }

  started(pod: Pod, runtime: RuntimePodStatus): (containerName: string) => boolean | undefined {
    return startedOf(this.#view, pod, runtime);
  }

  stop(): Promise<void> {
    this.#stopped = true;
    for (const [key, w] of this.#workers) this.#stopWorker(key, w);
    return Promise.resolve();
  }

  #startedBefore(pod: Pod, container: Container, instance: RuntimeContainer): boolean {
    return adopted(this.#view, instance) && apiStarted(pod, container.name, instance.id);
  }

  /** One probe run of `w` with its standing outcome, as a real worker's tick. */
  #probe(w: FakeWorker): void {
    if (w.done) return;
    if (w.gated && this.get('startup', w.containerId) !== 'success') return;
    const result = this.#outcomes.get(`${w.uid}/${w.container}/${w.kind}`);
    if (result === undefined) return;
    const key = `${w.kind}/${w.containerId}`;
    if (this.#results.get(key) !== result) {
      this.#results.set(key, result);
      this.#o.onChange(w.uid);
    }
    if (w.kind === 'startup' && result === 'success') {
      w.done = true;
      // The instance's other probes may run now (the real manager triggers readiness at
      // once; liveness at its next period, which a standing outcome makes the same).
      for (const other of this.#workers.values())
        if (other.containerId === w.containerId && other !== w) this.#probe(other);
    } else if (result === 'failure' && w.kind !== 'readiness') w.done = true;
  }

  #stopWorker(key: string, w: FakeWorker): void {
    this.#workers.delete(key);
    this.#results.delete(`${w.kind}/${w.containerId}`);
  }
}
