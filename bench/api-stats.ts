/**
 * Pure computations of the kubelet API benchmark (bench/api.ts): throughput, a stream
 * scanner that finds an end marker split across chunks, and kubectl port-forward's
 * "Forwarding from" line. Kept free of I/O so they are unit-tested without a cluster.
 */

const round1 = (v: number): number => Math.round(v * 10) / 10;
const round3 = (v: number): number => Math.round(v * 1000) / 1000;

/** MiB per second for `bytes` moved in `ms` milliseconds; null when no time passed. */
export function mibPerSecond(bytes: number, ms: number): number | null {
  if (!(ms > 0) || bytes < 0) return null;
  return round1(bytes / 2 ** 20 / (ms / 1000));
}

/** Agent CPU milliseconds per unit (an operation, a MiB); null with no units. */
export function cpuMsPer(cpuSeconds: number, units: number): number | null {
  if (!(units > 0)) return null;
  return round3((cpuSeconds * 1000) / units);
}

/**
 * Counts the bytes of a stream and notices the first occurrence of `marker` in it, even
 * when a chunk boundary cuts the marker in two (a pipe hands out 64 KiB pieces, the
 * marker lands wherever the last one ends). `bytesBefore` is how many bytes precede it.
 */
export class MarkerScanner {
  readonly #marker: Buffer;
  #tail: Buffer = Buffer.alloc(0);
  #bytes = 0;
  #found: number | undefined;

  constructor(marker: string) {
    if (marker === '') throw new Error('Cannot scan for an empty marker');
    this.#marker = Buffer.from(marker, 'utf8');
  }

  /** Feeds the next chunk; true once the marker has been seen (in this or an earlier chunk). */
  push(chunk: Buffer): boolean {
    if (this.#found === undefined) {
      // Only the last marker-length-minus-one bytes can start a marker that this chunk ends.
      const window = Buffer.concat([this.#tail, chunk]);
      const at = window.indexOf(this.#marker);
      if (at >= 0) {
        this.#found = this.#bytes - this.#tail.length + at;
      } else {
        const keep = Math.min(window.length, this.#marker.length - 1);
        this.#tail = Buffer.from(window.subarray(window.length - keep));
      }
    }
    this.#bytes += chunk.length;
    return this.#found !== undefined;
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** Bytes before the marker's first byte; undefined while it has not been seen. */
  get bytesBefore(): number | undefined {
    return this.#found;
  }
}

/**
 * The local port kubectl port-forward listens on, from its "Forwarding from
 * 127.0.0.1:PORT -> REMOTE" line; undefined until that line has been printed.
 */
export function forwardedPort(output: string): number | undefined {
  const match = /Forwarding from 127\.0\.0\.1:(\d+) ->/.exec(output);
  if (match?.[1] === undefined) return undefined;
  const port = Number(match[1]);
  return Number.isInteger(port) && port > 0 && port < 65536 ? port : undefined;
}

/** The value of integer option `--name`, at least 1; throws a clear error otherwise. */
export function positiveInteger(name: string, text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`Cannot use --${name} ${text}: it must be an integer >= 1`);
  return n;
}

/** Parses a size such as `64Mi`, `512Ki`, `1Gi` or plain bytes into bytes. */
export function parseBytes(text: string): number {
  const match = /^(\d+)(Ki|Mi|Gi)?$/.exec(text.trim());
  if (match?.[1] === undefined) {
    throw new Error(`Cannot parse size ${text}: expected digits with an optional Ki, Mi or Gi`);
  }
  const unit =
    match[2] === 'Gi' ? 2 ** 30 : match[2] === 'Mi' ? 2 ** 20 : match[2] === 'Ki' ? 1024 : 1;
  return Number(match[1]) * unit;
}

/**
 * The order agents are measured in over `passes` passes: as given, then reversed, and
 * so on (A B, B A, A B). The machine drifts over a run (its load, the cluster's caches,
 * containerd's state), and agents measured one after another in one order would each
 * take the drift of their slot; alternating spreads it over both.
 */
export function passOrder(agents: readonly string[], passes: number): string[][] {
  return Array.from({ length: passes }, (_, p) =>
    p % 2 === 0 ? [...agents] : [...agents].reverse(),
  );
}

/** What one pass of one agent measured, before pooling. */
export interface PassSamples {
  readonly execMs: readonly number[];
  readonly execCpuSeconds: number;
  readonly firstByteMs: readonly number[];
  readonly logsMiBps: readonly (number | null)[];
  readonly logsCpuSeconds: number;
  readonly logsMiB: number;
  readonly forwardMiBps: readonly (number | null)[];
  readonly forwardCpuSeconds: number;
  readonly forwardMiB: number;
}

/** An agent's passes as one: samples joined, CPU per unit over all of them. */
export function poolPasses(passes: readonly PassSamples[]): PassSamples {
  const sum = (f: (p: PassSamples) => number): number => passes.reduce((a, p) => a + f(p), 0);
  return {
    execMs: passes.flatMap((p) => p.execMs),
    execCpuSeconds: sum((p) => p.execCpuSeconds),
    firstByteMs: passes.flatMap((p) => p.firstByteMs),
    logsMiBps: passes.flatMap((p) => p.logsMiBps),
    logsCpuSeconds: sum((p) => p.logsCpuSeconds),
    logsMiB: sum((p) => p.logsMiB),
    forwardMiBps: passes.flatMap((p) => p.forwardMiBps),
    forwardCpuSeconds: sum((p) => p.forwardCpuSeconds),
    forwardMiB: sum((p) => p.forwardMiB),
  };
}

/** How agent A compares with agent B over paired samples (A's i-th with B's i-th). */
export interface PairedDifference {
  readonly n: number;
  /** Median of A − B. */
  readonly median: number;
  /**
   * A distribution-free interval that holds the median of A − B with at least 95 %
   * confidence (the sign test's order statistics); null with fewer than 6 pairs, where
   * no such interval exists.
   */
  readonly ci95: readonly [number, number] | null;
  /** Pairs in which A's value was the lower one. */
  readonly aLower: number;
}

/**
 * Largest k with P(Bin(n, ½) < k) ≤ 0.025: the k-th smallest and k-th largest of n
 * differences bound their median with at least 95 % confidence. 0 when n is too small.
 */
export function signTestRank(n: number): number {
  if (!Number.isInteger(n) || n < 0) throw new Error(`Cannot rank ${n} pairs`);
  // Cumulative binomial probabilities in log space, so 0.5^n does not underflow.
  let logPmf = n * Math.log(0.5);
  let cdf = 0;
  let k = 0;
  for (let i = 0; i <= n; i++) {
    cdf += Math.exp(logPmf);
    if (cdf > 0.025) break;
    k = i + 1;
    logPmf += Math.log((n - i) / (i + 1));
  }
  return k;
}

/** Compares paired samples `a` and `b` (same length, the i-th of each taken together). */
export function pairedDifference(a: readonly number[], b: readonly number[]): PairedDifference {
  if (a.length !== b.length || a.length === 0)
    throw new Error(`Cannot pair ${a.length} samples with ${b.length}`);
  const d = a.map((x, i) => x - (b[i] ?? Number.NaN)).sort((x, y) => x - y);
  const n = d.length;
  const at = (i: number): number => d[i] ?? Number.NaN;
  const median = n % 2 === 1 ? at((n - 1) / 2) : (at(n / 2 - 1) + at(n / 2)) / 2;
  const k = signTestRank(n);
  return {
    n,
    median: round3(median),
    ci95: k >= 1 ? [round3(at(k - 1)), round3(at(n - k))] : null,
    aLower: a.filter((x, i) => x < (b[i] ?? Number.NaN)).length,
  };
}
