/**
 * What the prober owns and the layers above read: a probe's result, and the reader of
 * the liveness and startup result caches that kuberuntime's plan consults (upstream's
 * proberesults.Manager).
 */

/** A probe result; undefined from a reader means the probe has not reported yet. */
export type ProbeResult = 'success' | 'failure';

/** The part of the prober's result caches the plan reads. */
export interface ProbeResultsReader {
  get(kind: 'liveness' | 'startup', containerId: string): ProbeResult | undefined;
}
