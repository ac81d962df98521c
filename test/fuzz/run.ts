/**
 * How every fuzz suite runs its properties. `make test` runs each with a fixed seed and a
 * few hundred inputs (seconds); `make soak` sets FUZZ_SEED=random and FUZZ_RUNS to a
 * large count. Each run reports its seed and the number of inputs it tried, so a failure
 * seen once can be replayed: FUZZ_SEED=<seed> with the same FUZZ_RUNS.
 */
import type { TestContext } from 'node:test';
import fc from 'fast-check';

/** The fixed seed of the unit tier: the same inputs on every machine. */
const DEFAULT_SEED = 0x6265_7274; // "bert"

/** The seed of this process's runs: FUZZ_SEED (a number, or "random"), else the fixed one. */
function seed(): number {
  const raw = process.env['FUZZ_SEED'];
  if (raw === undefined || raw === '') return DEFAULT_SEED;
  if (raw === 'random') return Math.floor(Math.random() * 0x7fff_ffff);
  const n = Number(raw);
  if (!Number.isSafeInteger(n)) throw new Error(`Cannot use FUZZ_SEED: current value is "${raw}"`);
  return n;
}

const SEED = seed();

/** Inputs per property: FUZZ_RUNS scales every suite's own count (its share of 1000). */
function runs(base: number): number {
  const raw = process.env['FUZZ_RUNS'];
  if (raw === undefined || raw === '') return base;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1)
    throw new Error(`Cannot use FUZZ_RUNS: current value is "${raw}"`);
  return Math.max(1, Math.round((n * base) / 1000));
}

function report<T>(t: TestContext, details: fc.RunDetails<T>): void {
  t.diagnostic(
    `fuzz ${t.name}: seed ${details.seed}, ${details.numRuns} executions` +
      (details.numSkips > 0 ? `, ${details.numSkips} skipped` : ''),
  );
  if (details.failed)
    throw new Error(fc.defaultReportMessage(details) ?? 'property failed', {
      cause: details.errorInstance,
    });
}

/** Checks a synchronous property over `base` inputs (scaled by FUZZ_RUNS). */
export function fuzz<T>(t: TestContext, property: fc.IProperty<T>, base = 300): void {
  report(t, fc.check(property, { seed: SEED, numRuns: runs(base), endOnFailure: false }));
}

/** Checks an asynchronous property; each input must settle within `timeoutMs`. */
export async function fuzzAsync<T>(
  t: TestContext,
  property: fc.IAsyncProperty<T>,
  base = 100,
  timeoutMs = 20_000,
): Promise<void> {
  report(
    t,
    await fc.check(property, {
      seed: SEED,
      numRuns: runs(base),
      plugins: [fc.timeout(timeoutMs)],
    }),
  );
}

/**
 * Runs `f` and fails unless it returns, or throws an error `allowed` accepts. A parser
 * that loops forever cannot be interrupted from the same thread, so "no hang" is a
 * generous bound on each input's time: far above any real parse (milliseconds), far
 * below forever. 5 s was hit on this machine at a load average of 47 on 2 cores.
 */
export function expectTyped<R>(
  f: () => R,
  allowed: (err: unknown) => boolean,
  maxMs = 60_000,
): R | undefined {
  const started = performance.now();
  let result: R | undefined;
  try {
    result = f();
  } catch (err) {
    if (!allowed(err)) throw err;
  }
  const took = performance.now() - started;
  if (took > maxMs) throw new Error(`one input took ${Math.round(took)} ms (bound ${maxMs} ms)`);
  return result;
}

/** As expectTyped, for a promise. */
export async function expectTypedAsync<R>(
  f: () => Promise<R>,
  allowed: (err: unknown) => boolean,
): Promise<R | undefined> {
  try {
    return await f();
  } catch (err) {
    if (!allowed(err)) throw err;
    return undefined;
  }
}

/**
 * Fails when a result is far larger than its input: a bounded input must give a bounded
 * output (no amplification through aliases, repetition or defaults).
 */
export function expectBounded(
  input: number,
  output: unknown,
  slack = 64 * 1024,
  factor = 16,
): void {
  const size =
    typeof output === 'string'
      ? output.length
      : Buffer.isBuffer(output)
        ? output.length
        : (JSON.stringify(output) ?? '').length;
  if (size > slack + factor * input)
    throw new Error(`output of ${size} bytes from ${input} bytes of input`);
}
