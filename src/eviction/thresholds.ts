/**
 * The eviction thresholds from the KubeletConfiguration, parsed as upstream's
 * ParseThresholdConfig parses them: evictionHard and evictionSoft statements ("100Mi",
 * "10%"; 0% and 100% are ignored), a grace period required for every soft threshold,
 * evictionMinimumReclaim attached to both, and the allocatable copy of a hard
 * memory.available threshold when enforceNodeAllocatable has "pods". A bad statement is
 * an EvictionConfigError naming the field, so berth refuses to start as upstream does.
 */
import { BerthError } from '../util/errors.ts';
import { EVICTION_SIGNALS } from '../config/validation.ts';
import { parseQuantity } from '../util/quantity.ts';
import type { QuantityFormat, Signal, Threshold, ThresholdValue } from './types.ts';

/** A threshold statement berth cannot act on; `field` is e.g. `evictionHard[memory.available]`. */
export class EvictionConfigError extends BerthError {
  override readonly code = 'BERTH_EVICTION_CONFIG_INVALID';
  readonly field: string;
  constructor(field: string, message: string) {
    super('BERTH_EVICTION_CONFIG_INVALID', `Cannot use ${field}: ${message}`);
    this.field = field;
  }
}

export interface ThresholdConfig {
  readonly evictionHard: Readonly<Record<string, string>>;
  readonly evictionSoft: Readonly<Record<string, string>>;
  /** evictionSoftGracePeriod, already parsed to milliseconds. */
  readonly evictionSoftGracePeriodMs: Readonly<Record<string, number>>;
  readonly evictionMinimumReclaim: Readonly<Record<string, string>>;
  readonly enforceNodeAllocatable: readonly string[];
}

/** Upstream's signalToResource keys, one list with the config's validation. */
function isSignal(name: string): name is Signal {
  return EVICTION_SIGNALS.has(name);
}

function checkSignal(field: string, signal: string): Signal {
  if (!isSignal(signal))
    throw new EvictionConfigError(field, `unsupported eviction signal ${signal}`);
  return signal;
}

/** Go's resource.Format for a quantity as written: binary suffixes print in binary. */
function formatOf(text: string): QuantityFormat {
  return /[KMGTPE]i$/.test(text) ? 'BinarySI' : 'DecimalSI';
}

/** Upstream parses percentages as float32 and divides by 100. */
function percentage(field: string, text: string): number {
  const n = Number(text.slice(0, -1));
  if (text.slice(0, -1).trim() === '' || !Number.isFinite(n))
    throw new EvictionConfigError(field, `invalid percentage ${JSON.stringify(text)}`);
  return Math.fround(Math.fround(n) / 100);
}

function quantity(field: string, text: string): number {
  try {
    return parseQuantity(text);
  } catch {
    throw new EvictionConfigError(field, `invalid quantity ${JSON.stringify(text)}`);
  }
}

/** One evictionHard/evictionSoft statement; undefined for the ignored 0% and 100%. */
function statement(field: string, signal: Signal, text: string): ThresholdValue | undefined {
  if (text.endsWith('%')) {
    if (text === '0%' || text === '100%') return undefined;
    const p = percentage(field, text);
    if (p < 0)
      throw new EvictionConfigError(
        field,
        `eviction percentage threshold ${signal} must be >= 0%: ${text}`,
      );
    if (p > 1)
      throw new EvictionConfigError(
        field,
        `eviction percentage threshold ${signal} must be <= 100%: ${text}`,
      );
    return { percentage: p };
  }
  const q = quantity(field, text);
  if (q <= 0)
    throw new EvictionConfigError(field, `eviction threshold ${signal} must be positive: ${text}`);
  return { quantity: q, format: formatOf(text) };
}

function statements(
  name: string,
  map: Readonly<Record<string, string>>,
): { signal: Signal; value: ThresholdValue }[] {
  const out: { signal: Signal; value: ThresholdValue }[] = [];
  for (const [key, text] of Object.entries(map)) {
    const field = `${name}[${key}]`;
    const signal = checkSignal(field, key);
    const value = statement(field, signal, text);
    if (value !== undefined) out.push({ signal, value });
  }
  return out;
}

function minimumReclaims(map: Readonly<Record<string, string>>): Map<Signal, ThresholdValue> {
  const out = new Map<Signal, ThresholdValue>();
  for (const [key, text] of Object.entries(map)) {
    const field = `evictionMinimumReclaim[${key}]`;
    const signal = checkSignal(field, key);
    if (text.endsWith('%')) {
      const p = percentage(field, text);
      if (p <= 0)
        throw new EvictionConfigError(
          field,
          `eviction percentage minimum reclaim ${signal} must be positive: ${text}`,
        );
      out.set(signal, { percentage: p });
      continue;
    }
    const q = quantity(field, text);
    if (q < 0)
      throw new EvictionConfigError(
        field,
        `negative eviction minimum reclaim specified for ${signal}`,
      );
    out.set(signal, { quantity: q, format: formatOf(text) });
  }
  return out;
}

/** Every threshold the manager enforces, hard ones first, in upstream's order. */
export function parseThresholdConfig(c: ThresholdConfig): Threshold[] {
  const hard = statements('evictionHard', c.evictionHard);
  const soft = statements('evictionSoft', c.evictionSoft);
  for (const [key, ms] of Object.entries(c.evictionSoftGracePeriodMs)) {
    const field = `evictionSoftGracePeriod[${key}]`;
    checkSignal(field, key);
    if (ms < 0)
      throw new EvictionConfigError(
        field,
        `invalid eviction grace period specified: ${ms}ms, must be a positive value`,
      );
  }
  const reclaims = minimumReclaims(c.evictionMinimumReclaim);
  const withReclaim = (t: Threshold): Threshold => {
    const minReclaim = reclaims.get(t.signal);
    return minReclaim === undefined ? t : { ...t, minReclaim };
  };
  const out: Threshold[] = hard.map((h) => withReclaim({ ...h, gracePeriodMs: 0 }));
  for (const s of soft) {
    const grace = c.evictionSoftGracePeriodMs[s.signal];
    if (grace === undefined)
      throw new EvictionConfigError(
        `evictionSoft[${s.signal}]`,
        `grace period must be specified for the soft eviction threshold ${s.signal}`,
      );
    out.push(withReclaim({ ...s, gracePeriodMs: grace }));
  }
  if (c.enforceNodeAllocatable.includes('pods')) {
    // Upstream's addAllocatableThresholds: the pods' cgroup gets the hard memory threshold too.
    for (const t of [...out]) {
      if (t.signal === 'memory.available' && t.gracePeriodMs === 0)
        out.push({ ...t, signal: 'allocatableMemory.available' });
    }
  }
  return out;
}

/**
 * Upstream's UpdateContainerFsThresholds for a runtime whose containers share a
 * filesystem with the images or with the node: containerfs follows imagefs when the
 * image filesystem is its own device, nodefs otherwise. Statements written for
 * containerfs are replaced (upstream ignores them the same way).
 */
export function withContainerFsThresholds(
  thresholds: readonly Threshold[],
  dedicatedImageFs: boolean,
): Threshold[] {
  const from = dedicatedImageFs ? 'imagefs' : 'nodefs';
  const out = thresholds.filter((t) => !t.signal.startsWith('containerfs.'));
  for (const t of thresholds) {
    if (t.signal === `${from}.available`) out.push({ ...t, signal: 'containerfs.available' });
    else if (t.signal === `${from}.inodesFree`)
      out.push({ ...t, signal: 'containerfs.inodesFree' });
  }
  return out;
}
