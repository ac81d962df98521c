/**
 * One probe worker: probes one container instance (by container ID) with one of its
 * probes, applies the thresholds and publishes the result. Its life:
 *
 *   waiting (initial delay / startup gate) -> probing -> done
 *
 * `done` is reached when a startup probe passed (it is never run again for this
 * instance) or a liveness/startup probe failed past its threshold (the container is
 * about to be killed; its replacement gets a new ID and so a new worker).
 */
import type { Container, Pod, Probe } from 'kubernetes-types/core/v1.js';
import type { CriClient } from '../cri/index.ts';
import type { EventRecorder } from '../events/types.ts';
import type { ProbeResult } from '../kuberuntime/plan.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import { runProbe } from './probe.ts';

export type ProbeKind = 'liveness' | 'readiness' | 'startup';

/** The result store workers write to and the manager reads from. */
export interface ResultsStore {
  get(kind: ProbeKind, containerId: string): ProbeResult | undefined;
  /** Returns whether the stored value changed. */
  set(kind: ProbeKind, containerId: string, result: ProbeResult): boolean;
}

/** What a worker shares with its manager. */
export interface WorkerDeps {
  readonly runtime: Pick<CriClient['runtime'], 'execSync'>;
  readonly clock: Clock;
  readonly recorder: EventRecorder;
  readonly logger: Logger;
  readonly results: ResultsStore;
  /** Called when a published result changed, so the pod is synced promptly. */
  readonly onChange: () => void;
  /** The pod IP now (the sandbox may get one after the worker started). */
  readonly podIP: () => string | undefined;
  /** In [0, 1): spreads the first probe of adopted containers (tests pass a fixed value). */
  readonly random: () => number;
}

/** The instance a worker probes. */
export interface WorkerTarget {
  readonly pod: Pod;
  readonly container: Container;
  readonly containerId: string;
  /** When the instance started (ms since the epoch); the initial delay counts from here. */
  readonly startedAt: number;
}

const LABEL: Record<ProbeKind, string> = {
  liveness: 'Liveness',
  readiness: 'Readiness',
  startup: 'Startup',
};

/** The probe of `kind` in `container`, if any. */
export function probeOf(container: Container, kind: ProbeKind): Probe | undefined {
  return kind === 'liveness'
    ? container.livenessProbe
    : kind === 'readiness'
      ? container.readinessProbe
      : container.startupProbe;
}

export class ProbeWorker {
  readonly kind: ProbeKind;
  readonly target: WorkerTarget;
  readonly #probe: Probe;
  readonly #d: WorkerDeps;
  #last: ProbeResult | undefined;
  #run = 0;

  constructor(kind: ProbeKind, probe: Probe, target: WorkerTarget, deps: WorkerDeps) {
    this.kind = kind;
    this.#probe = probe;
    this.target = target;
    this.#d = deps;
  }

  /** Probes until done or until `signal` aborts; never rejects. */
  async run(signal: AbortSignal): Promise<void> {
    // Validation should reject a zero period; a worker must never spin on one.
    const periodMs = Math.max(1, this.#probe.periodSeconds ?? 10) * 1000;
    const delayEnd =
      this.target.startedAt + Math.max(0, this.#probe.initialDelaySeconds ?? 0) * 1000;
    try {
      // A container already running for a while (adopted after a berth restart) gets a
      // random first offset within one period, so hundreds of adopted probes do not
      // all fire on the same tick. A fresh container is probed at once, as upstream.
      const age = this.#d.clock.now() - this.target.startedAt;
      if (age > periodMs)
        await this.#d.clock.sleep(Math.floor(this.#d.random() * periodMs), signal);
      for (;;) {
        const now = this.#d.clock.now();
        if (now < delayEnd) {
          // Sleep exactly to the end of the delay rather than tick through it.
          await this.#d.clock.sleep(delayEnd - now, signal);
          continue;
        }
        if (!(await this.#tick(signal))) return;
        await this.#d.clock.sleep(periodMs, signal);
      }
    } catch (err) {
      if (signal.aborted) return;
      this.#d.logger.error('Probe worker ended with an error', {
        probe: this.kind,
        error: String(err),
      });
    }
  }

  /** One period: probe (unless gated) and apply thresholds. Returns false when done. */
  async #tick(signal: AbortSignal): Promise<boolean> {
    const { container, containerId, pod } = this.target;
    const { results } = this.#d;
    // Liveness and readiness wait for the startup probe, as upstream: a slow starter
    // is neither killed nor marked ready before it has started.
    if (
      this.kind !== 'startup' &&
      container.startupProbe !== undefined &&
      results.get('startup', containerId) !== 'success'
    )
      return true;
    const outcome = await runProbe(
      this.#probe,
      { containerId, container, podIP: this.#d.podIP() },
      this.#d.runtime,
      signal,
    );
    if (outcome.result === 'failure') {
      const m = pod.metadata ?? {};
      this.#d.recorder.event(
        {
          kind: 'Pod',
          namespace: m.namespace ?? '',
          name: m.name ?? '',
          uid: m.uid ?? '',
          apiVersion: 'v1',
          fieldPath: `spec.containers{${container.name}}`,
        },
        'Warning',
        'Unhealthy',
        `${LABEL[this.kind]} probe failed: ${outcome.output.trimEnd()}`,
      );
    }
    if (outcome.result === this.#last) this.#run++;
    else {
      this.#last = outcome.result;
      this.#run = 1;
    }
    const threshold =
      outcome.result === 'success'
        ? // Liveness and startup must use 1 (API validation); only readiness may ask for more.
          this.kind === 'readiness'
          ? Math.max(1, this.#probe.successThreshold ?? 1)
          : 1
        : Math.max(1, this.#probe.failureThreshold ?? 3);
    if (this.#run < threshold) return true;
    if (results.set(this.kind, containerId, outcome.result)) this.#d.onChange();
    if (outcome.result === 'failure' && this.kind !== 'readiness') return false;
    return !(outcome.result === 'success' && this.kind === 'startup');
  }
}
