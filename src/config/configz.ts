/**
 * The effective configuration as /configz serves it: `{"kubeletconfig": {...}}` in the
 * KubeletConfiguration v1beta1 shape. berth keeps durations as milliseconds
 * internally (`syncFrequencyMs`); they are shown as Go durations under the upstream
 * field name (`syncFrequency: "1m0s"`).
 */
import type { KubeletConfig } from './types.ts';

/** Go's time.Duration.String() for whole milliseconds: 90000 -> "1m30s", 250 -> "250ms". */
export function goDuration(ms: number): string {
  if (ms === 0) return '0s';
  const sign = ms < 0 ? '-' : '';
  let rest = Math.abs(ms);
  if (rest < 1000) return `${sign}${rest}ms`;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const s = rest / 1000;
  const sec = `${Number.isInteger(s) ? s : s.toFixed(3).replace(/0+$/, '')}s`;
  if (h > 0) return `${sign}${h}h${m}m${sec}`;
  if (m > 0) return `${sign}${m}m${sec}`;
  return `${sign}${sec}`;
}

function convert(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(convert);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (k.endsWith('Ms') && typeof v === 'number') out[k.slice(0, -2)] = goDuration(v);
    else if (v !== null) out[k] = convert(v);
  }
  return out;
}

export function configzDocument(c: KubeletConfig): { kubeletconfig: unknown } {
  return {
    kubeletconfig: {
      kind: 'KubeletConfiguration',
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      ...(convert(c) as Record<string, unknown>),
    },
  };
}
