/**
 * Fake readers for the plan's unit tests: back-off and probe results. The pod and
 * runtime-state builders are container/testing.ts's. Not used by production code.
 */
import type { ProbeResult, ProbeResultsReader } from '../prober/types.ts';
import type { BackoffReader } from './crash-backoff.ts';

/** A back-off where the listed keys are backing off with the given delays (ms). */
export function fakeBackoff(
  entries: Readonly<Record<string, { remaining: number; current: number }>> = {},
): BackoffReader {
  return {
    inBackoff: (key) => (entries[key]?.remaining ?? 0) > 0,
    remaining: (key) => entries[key]?.remaining ?? 0,
    current: (key) => entries[key]?.current ?? 0,
  };
}

/** Probe results by container id; anything not listed has not reported yet. */
export function fakeProbes(
  results: Readonly<
    Record<string, { readonly liveness?: ProbeResult; readonly startup?: ProbeResult }>
  >,
): ProbeResultsReader {
  return { get: (kind, id) => results[id]?.[kind] };
}
