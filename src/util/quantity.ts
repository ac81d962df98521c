/**
 * Kubernetes resource quantities ("10Mi", "100m", "1.5G", "2e3"), as accepted by
 * `resource.ParseQuantity`. The configuration keeps them as the strings the operator
 * wrote; consumers that need a number call parseQuantity.
 */

// sign, digits with optional fraction, then a binary-SI, decimal-SI or exponent suffix.
const QUANTITY = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?$/;

const SUFFIX: Readonly<Record<string, number>> = {
  '': 1,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** True when `text` is a well-formed quantity. */
export function isQuantity(text: string): boolean {
  return QUANTITY.test(text);
}

/** True for an eviction-style percentage ("10%", "7.5%"). */
export function isPercentage(text: string): boolean {
  return /^(?:\d+(?:\.\d*)?|\.\d+)%$/.test(text);
}

/**
 * The value of a quantity as a number (bytes for memory and storage, cores for CPU).
 * @throws RangeError when `text` is not a quantity.
 */
export function parseQuantity(text: string): number {
  if (!isQuantity(text)) throw new RangeError(`invalid quantity ${JSON.stringify(text)}`);
  const m = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(.*)$/.exec(text);
  const num = Number(m?.[1] ?? 'NaN');
  const suffix = m?.[2] ?? '';
  if (/^[eE]/.test(suffix)) return num * 10 ** Number(suffix.slice(1));
  return num * (SUFFIX[suffix] ?? Number.NaN);
}

/** CPU quantity in millicores, rounded up as upstream does. */
export function milliCpu(q: string): number {
  return Math.ceil(parseQuantity(q) * 1000 - 1e-9);
}
