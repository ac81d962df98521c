/**
 * Go duration strings (`time.ParseDuration`), the format of every duration in the
 * KubeletConfiguration file and in upstream's duration flags: a sign, then one or more
 * `<number><unit>` parts ("1m0s", "1h30m", "1.5s", "100ms"), units ns, us (µs), ms, s,
 * m, h; a bare "0" is the only unitless value. berth works in milliseconds.
 */

const NS_PER_UNIT: ReadonlyMap<string, bigint> = new Map([
  ['ns', 1n],
  ['us', 1_000n],
  ['µs', 1_000n], // U+00B5 micro sign
  ['μs', 1_000n], // U+03BC Greek mu
  ['ms', 1_000_000n],
  ['s', 1_000_000_000n],
  ['m', 60_000_000_000n],
  ['h', 3_600_000_000_000n],
]);

// Go's Duration is an int64 of nanoseconds; longer values do not parse upstream.
const MAX_NS = 2n ** 63n - 1n;

/** Why a duration string is invalid, in Go's wording where it has one. */
export class DurationSyntaxError extends Error {}

/**
 * Parses a Go duration to nanoseconds (exact, as a bigint).
 * @throws DurationSyntaxError for anything `time.ParseDuration` rejects.
 */
export function parseGoDurationNs(text: string): bigint {
  let s = text;
  let negative = false;
  if (s.startsWith('-') || s.startsWith('+')) {
    negative = s.startsWith('-');
    s = s.slice(1);
  }
  if (s === '0') return 0n;
  if (s === '') throw new DurationSyntaxError(`invalid duration ${JSON.stringify(text)}`);
  let total = 0n;
  while (s !== '') {
    // Go requires digits before or after the dot ("5.s" and ".5s" are fine, ".s" is not).
    const m = /^(\d*)(?:\.(\d*))?/.exec(s);
    const whole = m?.[1] ?? '';
    const frac = m?.[2] ?? '';
    if (whole === '' && frac === '') {
      throw new DurationSyntaxError(`invalid duration ${JSON.stringify(text)}`);
    }
    s = s.slice(m?.[0].length ?? 0);
    const unitMatch = /^[^\d.]+/.exec(s);
    if (unitMatch === null) {
      throw new DurationSyntaxError(`missing unit in duration ${JSON.stringify(text)}`);
    }
    const unitText = unitMatch[0];
    const unit = NS_PER_UNIT.get(unitText);
    if (unit === undefined) {
      throw new DurationSyntaxError(
        `unknown unit ${JSON.stringify(unitText)} in duration ${JSON.stringify(text)}`,
      );
    }
    s = s.slice(unitText.length);
    let part = BigInt(whole === '' ? '0' : whole) * unit;
    if (frac !== '') {
      // Truncate like Go: fractions below a nanosecond are dropped.
      part += (BigInt(frac) * unit) / 10n ** BigInt(frac.length);
    }
    total += part;
    if (total > MAX_NS + (negative ? 1n : 0n)) {
      throw new DurationSyntaxError(`invalid duration ${JSON.stringify(text)}: out of range`);
    }
  }
  return negative ? -total : total;
}

/**
 * Parses a Go duration to milliseconds (fractional below 1 ms, e.g. "100us" is 0.1).
 * @throws DurationSyntaxError for anything `time.ParseDuration` rejects.
 */
export function parseGoDuration(text: string): number {
  const ns = parseGoDurationNs(text);
  // Whole milliseconds apart from the rest: Number(ns) alone rounds past 2^53 ns (104 days).
  return Number(ns / 1_000_000n) + Number(ns % 1_000_000n) / 1e6;
}

function trimFraction(digits: string): string {
  return digits.replace(/0+$/, '');
}

/**
 * Formats milliseconds as Go's `Duration.String()` does ("1m0s", "4h0m0s", "100ms",
 * "1.5s", "0s"), for usage text and messages that quote upstream-style values.
 */
export function formatGoDuration(ms: number): string {
  // Whole milliseconds apart from the fraction: ms * 1e6 as a double is inexact past 104 days.
  const whole = Math.trunc(ms);
  let ns = BigInt(whole) * 1_000_000n + BigInt(Math.round((ms - whole) * 1e6));
  if (ns === 0n) return '0s';
  const sign = ns < 0n ? '-' : '';
  if (ns < 0n) ns = -ns;
  if (ns < 1_000_000_000n) {
    // Below a second Go picks the largest unit that keeps an integer part.
    const [unit, size] =
      ns < 1_000n ? ['ns', 1n] : ns < 1_000_000n ? ['µs', 1_000n] : ['ms', 1_000_000n];
    const whole = ns / size;
    const frac = trimFraction((ns % size).toString().padStart(size.toString().length - 1, '0'));
    return `${sign}${whole.toString()}${frac === '' ? '' : `.${frac}`}${unit}`;
  }
  const h = ns / 3_600_000_000_000n;
  const m = (ns / 60_000_000_000n) % 60n;
  const secNs = ns % 60_000_000_000n;
  const sec = secNs / 1_000_000_000n;
  const frac = trimFraction((secNs % 1_000_000_000n).toString().padStart(9, '0'));
  const secText = `${sec.toString()}${frac === '' ? '' : `.${frac}`}s`;
  if (h > 0n) return `${sign}${h.toString()}h${m.toString()}m${secText}`;
  if (m > 0n) return `${sign}${m.toString()}m${secText}`;
  return `${sign}${secText}`;
}
