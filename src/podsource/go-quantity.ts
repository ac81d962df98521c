/**
 * A resource quantity as Go's apimachinery holds it in memory (`resource.Quantity`:
 * an int64 amount with a decimal scale, or an arbitrary-precision `inf.Dec`, the
 * canonical string when parsing kept it, and the format). Upstream's kubelet hashes a
 * static pod's in-memory Go value, so berth needs the exact fields ParseQuantity and
 * the API defaulting's RoundUp(-3) leave, not just the number: the same "1.5" and
 * "1500m" are different bytes in the hash. Mirrors apimachinery's quantity.go
 * (ParseQuantity, parseQuantityString, RoundUp).
 */

/** The fields of a Go `resource.Quantity`, keyed by their Go names (go-dump.ts prints them). */
export interface GoQuantity {
  readonly i: { readonly value: bigint; readonly scale: number };
  readonly d: { readonly Dec: GoDec | null };
  readonly s: string;
  readonly Format: 'DecimalSI' | 'BinarySI' | 'DecimalExponent';
}

/** An `inf.Dec`: unscaled * 10^-scale, the unscaled value as Go's big.Int (sign, 64-bit words). */
export interface GoDec {
  readonly unscaled: { readonly neg: boolean; readonly abs: readonly bigint[] };
  readonly scale: number;
}

export class QuantityError extends Error {
  readonly code = 'BERTH_QUANTITY_INVALID';
  constructor(value: string, why: string) {
    super(`Cannot parse quantity ${JSON.stringify(value)}: ${why}`);
    this.name = 'QuantityError';
  }
}

const MAX_INT64 = (1n << 63n) - 1n;
const MIN_INT64 = -(1n << 63n);

const DECIMAL_SUFFIXES: Readonly<Record<string, number>> = {
  '': 0,
  n: -9,
  u: -6,
  m: -3,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18,
};
const BINARY_SUFFIXES: Readonly<Record<string, number>> = {
  Ki: 10,
  Mi: 20,
  Gi: 30,
  Ti: 40,
  Pi: 50,
  Ei: 60,
};

interface Suffix {
  readonly base: 2 | 10;
  readonly exponent: number;
  readonly format: GoQuantity['Format'];
}

function interpret(suffix: string): Suffix | undefined {
  const dec = DECIMAL_SUFFIXES[suffix];
  if (dec !== undefined) return { base: 10, exponent: dec, format: 'DecimalSI' };
  const bin = BINARY_SUFFIXES[suffix];
  if (bin !== undefined) return { base: 2, exponent: bin, format: 'BinarySI' };
  const m = /^[eE]([+-]?\d+)$/.exec(suffix);
  if (m?.[1] !== undefined) {
    const e = Number(m[1]);
    if (Number.isSafeInteger(e) && Math.abs(e) <= 2 ** 31)
      return { base: 10, exponent: e, format: 'DecimalExponent' };
  }
  return undefined;
}

interface Parts {
  positive: boolean;
  value: string;
  num: string;
  denom: string;
  suffix: string;
}

/** parseQuantityString: sign, numerator (leading zeros dropped), denominator, suffix. */
function split(str: string): Parts {
  const digit = /[0-9]/;
  let pos = 0;
  const end = str.length;
  let positive = true;
  if (str[0] === '-') {
    positive = false;
    pos++;
  } else if (str[0] === '+') pos++;
  while (pos < end && str[pos] === '0') pos++;
  if (pos >= end) return { positive, value: '0', num: '0', denom: '', suffix: '' };
  let i = pos;
  while (i < end && digit.test(str[i] ?? '')) i++;
  let num = str.slice(pos, i);
  if (i >= end) return { positive, value: str, num, denom: '', suffix: '' };
  pos = i;
  if (num === '') num = '0';
  let denom = '';
  if (str[pos] === '.') {
    pos++;
    i = pos;
    while (i < end && digit.test(str[i] ?? '')) i++;
    denom = str.slice(pos, i);
    if (i >= end) return { positive, value: str, num, denom, suffix: '' };
    pos = i;
  }
  const value = str.slice(0, pos);
  const suffixStart = pos;
  i = pos;
  while (i < end && 'eEinumkKMGTP'.includes(str[i] ?? '')) i++;
  pos = i;
  if (pos < end && (str[pos] === '-' || str[pos] === '+')) pos++;
  i = pos;
  while (i < end && digit.test(str[i] ?? '')) i++;
  if (i < end) throw new QuantityError(str, 'quantities must match the regular expression');
  return { positive, value, num, denom, suffix: str.slice(suffixStart) };
}

function words(n: bigint): bigint[] {
  const out: bigint[] = [];
  for (let v = n; v > 0n; v >>= 64n) out.push(v & 0xffff_ffff_ffff_ffffn);
  return out;
}

function dec(unscaled: bigint, scale: number): GoDec {
  return {
    unscaled: { neg: unscaled < 0n, abs: words(unscaled < 0n ? -unscaled : unscaled) },
    scale,
  };
}

/** inf.Dec's Round(x, scale, RoundUp): rounds away from zero to `scale` digits. */
function roundUp(unscaled: bigint, from: number, to: number): bigint {
  if (from <= to) return unscaled * 10n ** BigInt(to - from);
  const div = 10n ** BigInt(from - to);
  const q = unscaled / div;
  const r = unscaled % div;
  if (r === 0n) return q;
  return unscaled < 0n ? q - 1n : q + 1n;
}

/** ParseQuantity: the in-memory Go value of a quantity written as `str`. */
export function parseGoQuantity(input: string | number): GoQuantity {
  const str = typeof input === 'number' ? String(input) : input.trim();
  if (str === '') throw new QuantityError(str, 'quantities must match the regular expression');
  if (str === '0')
    return { i: { value: 0n, scale: 0 }, d: { Dec: null }, s: str, Format: 'DecimalSI' };
  const { positive, value, num, denom, suffix } = split(str);
  const sfx = interpret(suffix);
  if (sfx === undefined) throw new QuantityError(str, "unable to parse quantity's suffix");
  let precision = 0;
  let scale = 0;
  let mantissa = 1n;
  if (sfx.format === 'BinarySI') {
    if (sfx.exponent >= 0 && denom.length === 0) {
      mantissa = 1n << BigInt(sfx.exponent);
      precision = 15 - num.length - Math.trunc(Math.fround((sfx.exponent * 3) / 10)) - 1;
    } else precision = -1;
  } else {
    scale = sfx.exponent;
    precision = 18 - (num.length + denom.length);
  }
  if (precision >= 0) {
    scale -= denom.length;
    if (scale >= -9) {
      const shifted = num + denom;
      const v = BigInt(shifted);
      if (v > MAX_INT64) throw new QuantityError(str, "unable to parse quantity's numeric part");
      const product = v * mantissa;
      if (product <= MAX_INT64 && product >= MIN_INT64) {
        const result = positive ? product : -product;
        const canonical =
          sfx.format === 'BinarySI'
            ? sfx.exponent % 10 === 0 && (v & 7n) !== 0n
            : scale % 3 === 0 && !shifted.endsWith('000') && shifted[0] !== '0';
        return {
          i: { value: result, scale },
          d: { Dec: null },
          s: canonical ? str : '',
          Format: sfx.format,
        };
      }
    }
  }
  // The inf.Dec path: exact decimal, rounded up to nano units, capped for binary.
  const m = /^([+-]?)(\d*)(?:\.(\d*))?$/.exec(value);
  if (m === null) throw new QuantityError(str, "unable to parse quantity's numeric part");
  let unscaled = BigInt(`${m[1] ?? ''}${m[2] ?? ''}${m[3] ?? ''}` || '0');
  if (m[1] === '-' && (m[2] ?? '') + (m[3] ?? '') === '') unscaled = 0n;
  let decScale = (m[3] ?? '').length;
  if (sfx.base === 10) decScale -= sfx.exponent;
  else unscaled *= 1n << BigInt(sfx.exponent);
  const negative = unscaled < 0n;
  if (negative) unscaled = -unscaled;
  if (unscaled !== 0n) {
    unscaled = roundUp(unscaled, decScale, 9);
    decScale = 9;
  }
  let format = sfx.format;
  if (format === 'BinarySI' && unscaled > MAX_INT64 * 10n ** BigInt(Math.max(0, decScale))) {
    unscaled = MAX_INT64;
    decScale = 0;
  }
  if (format === 'BinarySI' && unscaled > 0n && unscaled < 10n ** BigInt(Math.max(0, decScale)))
    format = 'DecimalSI';
  return {
    i: { value: 0n, scale: 0 },
    d: { Dec: dec(negative ? -unscaled : unscaled, decScale) },
    s: '',
    Format: format,
  };
}

/** Quantity.RoundUp(scale): what the API's ResourceList defaulting does (scale -3). */
export function roundUpGoQuantity(q: GoQuantity, scale: number): GoQuantity {
  const d = q.d.Dec;
  if (d !== null) {
    const sign = d.unscaled.neg ? -1n : 1n;
    const unscaled = d.unscaled.abs.reduceRight((acc, w) => (acc << 64n) | w, 0n) * sign;
    return { ...q, s: '', d: { Dec: dec(roundUp(unscaled, d.scale, -scale), -scale) } };
  }
  if (q.i.scale >= scale) return q;
  const value = roundUp(q.i.value, -q.i.scale, -scale);
  return { ...q, s: '', i: { value, scale } };
}
