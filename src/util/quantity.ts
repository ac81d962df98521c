/**
 * Kubernetes resource quantities ("100m", "0.5", "128Mi", "1G", "1e3") as numbers.
 */
const SUFFIX: Readonly<Record<string, number>> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 1024,
  Mi: 1024 ** 2,
  Gi: 1024 ** 3,
  Ti: 1024 ** 4,
  Pi: 1024 ** 5,
  Ei: 1024 ** 6,
};
const QUANTITY =
  /^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$/;

/** The quantity's value in base units (cores, bytes); throws on malformed input. */
export function parseQuantity(q: string): number {
  const m = QUANTITY.exec(q.trim());
  if (m?.[1] === undefined)
    throw new Error(`Cannot parse quantity "${q}": expected e.g. 100m, 1.5, 128Mi`);
  const base = Number(m[1]);
  if (m[2] !== undefined) return base * 10 ** Number(m[2].slice(1));
  return base * (SUFFIX[m[3] ?? ''] ?? 1);
}

/** CPU quantity in millicores, rounded up as upstream does. */
export function milliCpu(q: string): number {
  return Math.ceil(parseQuantity(q) * 1000 - 1e-9);
}
