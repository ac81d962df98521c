/**
 * Which specs of upstream's e2e suite a conformance run selects, and why any of them is
 * skipped: test/conformance/skips.yaml, read as data (never a regex in a script).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';
import { REPO_ROOT } from '../../test/harness/binaries.ts';

export const SKIPS_FILE = join(REPO_ROOT, 'test/conformance/skips.yaml');

export interface SkipRule {
  readonly pattern: string;
  readonly reason: string;
  /** Dropped when the run is given this option (--with <unless>). */
  readonly unless?: string;
}

export interface Selection {
  readonly focus: string;
  readonly scope: readonly string[];
  readonly skips: readonly SkipRule[];
}

function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}

export async function loadSelection(
  file = SKIPS_FILE,
  withOptions: readonly string[] = [],
): Promise<Selection> {
  const doc = parse(await readFile(file, 'utf8')) as Record<string, unknown> | null;
  const focus = doc?.['focus'];
  const scope = doc?.['scope'];
  const skips = doc?.['skips'];
  if (typeof focus !== 'string' || !isStringArray(scope) || !Array.isArray(skips)) {
    throw new Error(`${file}: expected focus (string), scope (list of strings) and skips (list)`);
  }
  const rules: SkipRule[] = [];
  for (const [i, raw] of (skips as unknown[]).entries()) {
    const r = raw as Record<string, unknown> | null;
    const pattern = r?.['pattern'];
    const reason = r?.['reason'];
    const unless = r?.['unless'];
    if (typeof pattern !== 'string' || typeof reason !== 'string' || reason.trim() === '') {
      throw new Error(`${file}: skips[${String(i)}] needs a pattern and a reason`);
    }
    new RegExp(pattern); // a bad pattern fails here, naming the file
    if (typeof unless === 'string' && withOptions.includes(unless)) continue;
    rules.push({ pattern, reason, ...(typeof unless === 'string' && { unless }) });
  }
  return { focus, scope, skips: rules };
}

export type Verdict =
  | { readonly kind: 'out-of-scope' }
  | { readonly kind: 'skip'; readonly reason: string }
  | { readonly kind: 'run' };

/** What the selection does with the spec whose full text is `name`. */
export function classify(selection: Selection, name: string): Verdict {
  if (!new RegExp(selection.focus).test(name)) return { kind: 'out-of-scope' };
  if (!selection.scope.some((s) => new RegExp(s).test(name))) return { kind: 'out-of-scope' };
  const rule = selection.skips.find((r) => new RegExp(r.pattern).test(name));
  return rule === undefined ? { kind: 'run' } : { kind: 'skip', reason: rule.reason };
}

/** Escapes `text` for an exact match inside a Ginkgo focus expression. */
export function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
