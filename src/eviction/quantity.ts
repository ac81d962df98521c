/**
 * Integer quantities printed as Go's resource.Quantity.String() prints them, since the
 * eviction messages operators and tools match on carry them ("Threshold quantity:
 * 100Mi, available: 86044Ki."): BinarySI uses the largest power of 1024 that divides
 * the value (values under 1024 fall back to decimal), DecimalSI the largest power of
 * 1000.
 */
import type { QuantityFormat } from './types.ts';

const BINARY = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'] as const;
const DECIMAL = ['', 'k', 'M', 'G', 'T', 'P', 'E'] as const;

function decimalSI(n: bigint): string {
  const sign = n < 0n ? '-' : '';
  let v = n < 0n ? -n : n;
  let i = 0;
  while (v !== 0n && v % 1000n === 0n && i < DECIMAL.length - 1) {
    v /= 1000n;
    i++;
  }
  return `${sign}${v}${DECIMAL[i] ?? ''}`;
}

function binarySI(n: bigint): string {
  if (n > -1024n && n < 1024n) return decimalSI(n);
  const sign = n < 0n ? '-' : '';
  let v = n < 0n ? -n : n;
  let i = 0;
  while (v % 1024n === 0n && i < BINARY.length - 1) {
    v /= 1024n;
    i++;
  }
  return `${sign}${v}${BINARY[i] ?? ''}`;
}

/** `value` (rounded up to an integer, as Go's Quantity.Value does) in `format`. */
export function formatQuantity(value: number, format: QuantityFormat): string {
  const n = BigInt(Math.ceil(value));
  return format === 'BinarySI' ? binarySI(n) : decimalSI(n);
}
