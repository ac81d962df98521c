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
import type { EventRecorder, EventTarget } from '../events/types.ts';
import type { ProbeKind, ProbeResult } from './types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import { runProbe, type ProbeOutcome } from './probe.ts';
import { containerTarget } from '../events/targets.ts';

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
  /** Called once this container's startup probe passed (its other probes may run now). */
  readonly onStarted?: () => void;
  /** The pod IP now (the sandbox may get one after the worker started). */
  readonly podIP: () => string | undefined;
  /** In [0, 1): spreads the first probes (tests pass a fixed value). */
  readonly random: () => number;
  /** When the manager started (ms since the epoch): workers started soon after are spread. */
  readonly startedAt: number;
  readonly metrics: ProberMetrics | undefined;
}

/** One probe run, as prober_probe_total and prober_probe_duration_seconds count it. */
export interface ProbeMetricsSample {
  readonly probeType: 'Liveness' | 'Readiness' | 'Startup';
  readonly result: 'successful' | 'failed' | 'unknown';
  readonly namespace: string;
  readonly pod: string;
  readonly podUID: string;
  readonly container: string;
  readonly durationSeconds: number;
}

/** Where probe runs are counted (implemented with prom-client in src/metrics). */
export interface ProberMetrics {
  record(o: ProbeMetricsSample): void;
  /**
   * The pod is gone: its series go too, as upstream's prober deletes them when the
   * pod's workers end (else one per probed pod ever seen, for the node's lifetime).
   */
  forgetPod(podUID: string): void;
}

/** The instance a worker probes. */
export interface WorkerTarget {
  readonly pod: Pod;
  readonly container: Container;
  readonly containerId: string;
  /** When the instance started (ms since the epoch); the initial delay counts from here. */
  readonly startedAt: number;
}

/** The probe type as upstream names it in events and metrics. */
const LABEL: Record<ProbeKind, ProbeMetricsSample['probeType']> = {
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
  /** Ends the current wait between probes early (see trigger). */
  #wake: AbortController | undefined;

  constructor(kind: ProbeKind, probe: Probe, target: WorkerTarget, deps: WorkerDeps) {
    this.kind = kind;
    this.#probe = probe;
    this.target = target;
    this.#d = deps;
  }

  /** Probes until done or until `signal` aborts; never rejects. */
  async run(signal: AbortSignal): Promise<void> {
    const { clock } = this.#d;
    // Validation should reject a zero period; a worker must never spin on one.
    const period = this.#probe.periodSeconds ?? 0;
    const periodMs = (period >= 1 ? period : 10) * 1000;
    const initialDelayMs = Math.max(0, this.#probe.initialDelaySeconds ?? 0) * 1000;
    const delayEnd = this.target.startedAt + initialDelayMs;
    try {
      // Upstream's jitter: right after a (re)start of the prober every worker starts at
      // once, so each waits a random part of its period first and hundreds of probes do
      // not fire on the same tick. A container already running for longer than a period
      // (adopted) is spread the same way. A fresh container is probed at once.
      const now = clock.now();
      const offset =
        now - this.#d.startedAt < periodMs || now - this.target.startedAt > periodMs
          ? Math.floor(this.#d.random() * periodMs)
          : 0;
      if (offset > 0) await clock.sleep(offset, signal);
      // Sleep exactly to the end of the initial delay rather than tick through it. The
      // start time is the runtime's wall time: one in the future means the clock was
      // stepped back since, and the delay then counts from now, not an hour later
      // (upstream compares every probe with it, so its probes stop for that hour).
      const wait = Math.min(delayEnd - clock.now(), initialDelayMs);
      if (wait > 0) await clock.sleep(wait, signal);
      // A fixed schedule, as upstream's ticker: probe time does not push later probes
      // back, and a probe that overran its period skips the ticks it missed. One sleep
      // (one timer) at a time. A fresh container is probed at once (a pod start waits
      // for its readiness), but its later ticks take a random phase: containers a burst
      // of pod starts brought up within the same few milliseconds would otherwise probe
      // in lockstep for their whole life. The second probe then comes early, never late.
      const phase = offset > 0 ? 0 : Math.floor(this.#d.random() * periodMs);
      const anchor = clock.now() + phase - periodMs;
      for (;;) {
        if (!(await this.#tick(signal))) return;
        const at = clock.now();
        const next = anchor + (Math.floor((at - anchor) / periodMs) + 1) * periodMs;
        await this.#wait(next - at, signal);
      }
    } catch (err) {
      if (signal.aborted) return;
      this.#d.logger.error('Probe worker ended with an error', {
        probe: this.kind,
        error: String(err),
      });
    }
  }

  /**
   * Probes at once instead of at the next tick, as upstream's manual trigger: once the
   * startup probe passed, readiness must not wait up to a whole period (a pod would be
   * NotReady for no reason). Does nothing before the initial delay is over.
   */
  trigger(): void {
    this.#wake?.abort();
  }

  /** Sleeps `ms`, or less when triggered; rejects only when `signal` aborts. */
  async #wait(ms: number, signal: AbortSignal): Promise<void> {
    const wake = new AbortController();
    this.#wake = wake;
    const stop = (): void => {
      wake.abort(signal.reason);
    };
    signal.addEventListener('abort', stop, { once: true });
    try {
      await this.#d.clock.sleep(ms, wake.signal);
    } catch (err) {
      if (signal.aborted) throw err;
    } finally {
      signal.removeEventListener('abort', stop);
      this.#wake = undefined;
    }
  }

  /** One period: probe (unless gated) and apply thresholds. Returns false when done. */
  async #tick(signal: AbortSignal): Promise<boolean> {
    const { container, containerId } = this.target;
    const { results } = this.#d;
    // Liveness and readiness wait for the startup probe, as upstream: a slow starter
    // is neither killed nor marked ready before it has started.
    if (
      this.kind !== 'startup' &&
      container.startupProbe !== undefined &&
      results.get('startup', containerId) !== 'success'
    )
      return true;
    const began = this.#d.clock.now();
    let outcome: ProbeOutcome;
    try {
      outcome = await runProbe(
        this.#probe,
        { containerId, container, podIP: this.#d.podIP() },
        this.#d.runtime,
        signal,
      );
    } catch (err) {
      if (signal.aborted) throw err;
      // A probe that cannot run (ProbeConfigError), a bug or an unexpected runtime answer:
      // upstream throws such a result away (it counts toward no threshold) and the worker
      // keeps its schedule.
      this.#record('unknown', began);
      const message = err instanceof Error ? err.message : String(err);
      this.#d.logger.error('Probe errored', { probe: this.kind, error: message });
      this.#d.recorder.event(
        this.#eventTarget(),
        'Warning',
        'Unhealthy',
        `${LABEL[this.kind]} probe errored and resulted in unknown state: ${message}`,
      );
      return true;
    }
    this.#record(outcome.result === 'failure' ? 'failed' : 'successful', began);
    if (outcome.result !== 'success') {
      const warning = outcome.result === 'warning';
      this.#d.recorder.event(
        this.#eventTarget(),
        'Warning',
        warning ? 'ProbeWarning' : 'Unhealthy',
        `${LABEL[this.kind]} probe ${warning ? 'warning' : 'failed'}: ${outcome.output.trimEnd()}`,
      );
    }
    const result: ProbeResult = outcome.result === 'failure' ? 'failure' : 'success';
    if (result === this.#last) this.#run++;
    else {
      this.#last = result;
      this.#run = 1;
    }
    const threshold =
      result === 'success'
        ? // Liveness and startup must use 1 (API validation); only readiness may ask for more.
          this.kind === 'readiness'
          ? Math.max(1, this.#probe.successThreshold ?? 1)
          : 1
        : Math.max(1, this.#probe.failureThreshold ?? 3);
    if (this.#run < threshold) return true;
    if (results.set(this.kind, containerId, result)) {
      this.#d.onChange();
      if (this.kind === 'startup' && result === 'success') this.#d.onStarted?.();
    }
    if (result === 'failure' && this.kind !== 'readiness') return false;
    return !(result === 'success' && this.kind === 'startup');
  }

  #record(result: 'successful' | 'failed' | 'unknown', began: number): void {
    const metrics = this.#d.metrics;
    if (metrics === undefined) return;
    const { pod, container } = this.target;
    const m = pod.metadata ?? {};
    metrics.record({
      probeType: LABEL[this.kind],
      result,
      namespace: m.namespace ?? '',
      pod: m.name ?? '',
      podUID: m.uid ?? '',
      container: container.name,
      durationSeconds: Math.max(0, this.#d.clock.now() - began) / 1000,
    });
  }

  #eventTarget(): EventTarget {
    return containerTarget(this.target.pod, this.target.container.name);
  }
}
