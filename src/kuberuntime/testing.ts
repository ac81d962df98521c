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

/**
 * Runs `fn` and counts the characters String#indexOf examined meanwhile: counted work,
 * so a test can tell a linear scan from a quadratic rescan without timing it. The
 * prototype is restored before this returns (or rejects).
 */
export async function indexOfWork<T>(
  fn: () => T | Promise<T>,
): Promise<{ result: T; scanned: number }> {
  const original = Object.getOwnPropertyDescriptor(String.prototype, 'indexOf');
  const search = original?.value as (this: string, s: string, from?: number) => number;
  let scanned = 0;
  Object.defineProperty(String.prototype, 'indexOf', {
    ...original,
    value: function (this: string, needle: string, from?: number): number {
      const at = search.call(this, needle, from);
      const start = Math.max(0, Math.min(from ?? 0, this.length));
      scanned += (at === -1 ? this.length : at + needle.length) - start;
      return at;
    },
  });
  try {
    return { result: await fn(), scanned };
  } finally {
    if (original !== undefined) Object.defineProperty(String.prototype, 'indexOf', original);
  }
}
