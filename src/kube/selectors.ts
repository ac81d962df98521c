/**
 * Label and field selectors as the apiserver parses them, for the fake client:
 * labels `a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x,y)`; fields
 * `path=value`, `path==value`, `path!=value` over a dotted path such as
 * `metadata.name` or `spec.nodeName` (a missing field reads as '').
 */
import { BerthError } from '../util/errors.ts';

/** One term of a label selector. */
export type LabelRequirement =
  | { readonly op: 'eq' | 'ne'; readonly key: string; readonly value: string }
  | { readonly op: 'in' | 'notin'; readonly key: string; readonly values: readonly string[] }
  | { readonly op: 'exists' | 'absent'; readonly key: string };

/** One term of a field selector. */
export interface FieldRequirement {
  readonly op: 'eq' | 'ne';
  readonly path: string;
  readonly value: string;
}

function bad(kind: string, selector: string, term: string): BerthError {
  return new BerthError(
    'BERTH_KUBE_BAD_SELECTOR',
    `Cannot parse ${kind} selector "${selector}" as term "${term}" is not valid`,
  );
}

/** Splits on commas outside parentheses. */
function terms(selector: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of selector) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      out.push(current.trim());
      current = '';
    } else {
      current += ch;
    }
  }
  out.push(current.trim());
  return out.filter((t) => t !== '');
}

const SET_TERM = /^([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)$/;
const EQ_TERM = /^([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)$/;
const KEY_TERM = /^(!?)\s*([^\s!=(),]+)$/;

/** Parses a label selector; throws BerthError BERTH_KUBE_BAD_SELECTOR on a bad term. */
export function parseLabelSelector(selector: string): LabelRequirement[] {
  return terms(selector).map((term): LabelRequirement => {
    const set = SET_TERM.exec(term);
    if (set !== null) {
      const [, key = '', op, list = ''] = set;
      const values = list
        .split(',')
        .map((v) => v.trim())
        .filter((v) => v !== '');
      return { op: op === 'in' ? 'in' : 'notin', key, values };
    }
    const eq = EQ_TERM.exec(term);
    if (eq !== null) {
      const [, key = '', op, value = ''] = eq;
      return { op: op === '!=' ? 'ne' : 'eq', key, value };
    }
    const exists = KEY_TERM.exec(term);
    if (exists !== null) {
      const [, not, key = ''] = exists;
      return { op: not === '!' ? 'absent' : 'exists', key };
    }
    throw bad('label', selector, term);
  });
}

/** True when `labels` satisfy every requirement (an empty selector matches all). */
export function matchesLabels(
  labels: Readonly<Record<string, string>> | undefined,
  requirements: readonly LabelRequirement[],
): boolean {
  const l = labels ?? {};
  return requirements.every((r) => {
    const has = Object.hasOwn(l, r.key);
    const value = l[r.key];
    switch (r.op) {
      case 'eq':
        return has && value === r.value;
      case 'ne':
        return !has || value !== r.value;
      case 'in':
        return has && value !== undefined && r.values.includes(value);
      case 'notin':
        return !has || value === undefined || !r.values.includes(value);
      case 'exists':
        return has;
      case 'absent':
        return !has;
    }
  });
}

/** Parses a field selector; throws BerthError BERTH_KUBE_BAD_SELECTOR on a bad term. */
export function parseFieldSelector(selector: string): FieldRequirement[] {
  return terms(selector).map((term) => {
    const eq = EQ_TERM.exec(term);
    if (eq === null) throw bad('field', selector, term);
    const [, path = '', op, value = ''] = eq;
    return { op: op === '!=' ? 'ne' : 'eq', path, value };
  });
}

function fieldValue(object: unknown, path: string): string {
  let current: unknown = object;
  for (const part of path.split('.')) {
    if (typeof current !== 'object' || current === null) return '';
    current = (current as Record<string, unknown>)[part];
  }
  if (current === undefined || current === null) return '';
  return typeof current === 'string' ? current : JSON.stringify(current);
}

/** True when `object` satisfies every field requirement. */
export function matchesFields(object: unknown, requirements: readonly FieldRequirement[]): boolean {
  return requirements.every((r) => {
    const value = fieldValue(object, r.path);
    return r.op === 'eq' ? value === r.value : value !== r.value;
  });
}
