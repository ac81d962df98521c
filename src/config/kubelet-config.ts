/**
 * Reading a KubeletConfiguration file: YAML (or JSON) to a type-checked object, with
 * every problem reported by field path and line. Strictness is the point: a misspelled
 * field (`syncFrequncy`) is an error naming it, not a setting silently left at its
 * default. (Upstream tries strict decoding and falls back to lenient decoding with a
 * log line; berth refuses instead.)
 */
import {
  LineCounter,
  isMap,
  isScalar,
  isSeq,
  parseDocument,
  type Document,
  type Node as YamlNode,
} from 'yaml';
import type { z } from 'zod';
import { ConfigError, formatFieldPath, type ConfigIssue } from './errors.ts';
import {
  describeValue,
  knownFields,
  kubeletConfigurationSchema,
  type KubeletConfigurationFile,
} from './schema.ts';

/** The API group/version and kind berth reads. */
export const KUBELET_CONFIG_API_VERSION = 'kubelet.config.k8s.io/v1beta1';
export const KUBELET_CONFIG_KIND = 'KubeletConfiguration';

/** A 1-based position in the file. */
export interface Position {
  readonly line: number;
  readonly column: number;
}

/** A type-checked file and a way back from a field path to where it was written. */
export interface ParsedKubeletConfigFile {
  readonly source: string;
  readonly file: KubeletConfigurationFile;
  /** Where the value at `path` was written; undefined when the file does not set it. */
  positionOf(path: readonly PropertyKey[]): Position | undefined;
}

type Path = readonly PropertyKey[];

/** Finds the YAML node at `path`; with `key`, the node of the last key itself. */
function nodeAt(doc: Document, path: Path, key = false): YamlNode | undefined {
  let node: unknown = doc.contents;
  for (let i = 0; i < path.length; i++) {
    const segment = path[i];
    const last = i === path.length - 1;
    if (isMap(node)) {
      const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === segment);
      if (pair === undefined) return undefined;
      if (last && key) return isScalar(pair.key) ? pair.key : undefined;
      node = pair.value;
    } else if (isSeq(node) && typeof segment === 'number') {
      node = node.items[segment];
    } else {
      return undefined;
    }
  }
  return node === null || node === undefined ? undefined : (node as YamlNode);
}

function positionIn(
  doc: Document,
  lines: LineCounter,
  path: Path,
  key = false,
): Position | undefined {
  // A missing value (a required field) points at its parent, where it should be.
  for (let p = path; ; p = p.slice(0, -1)) {
    const node = nodeAt(doc, p, key && p === path);
    const offset = node?.range?.[0];
    if (offset !== undefined) {
      const { line, col } = lines.linePos(offset);
      return { line, column: col };
    }
    if (p.length === 0) return undefined;
  }
}

/**
 * Duplicate keys, each with its full path (yaml's own error names only the line), and
 * keys that are not plain values (`? [a]`), which no field can match.
 */
function keyProblems(doc: Document, lines: LineCounter, source: string): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const walk = (node: unknown, path: PropertyKey[]): void => {
    if (isMap(node)) {
      const seen = new Set<string>();
      for (const pair of node.items) {
        if (!isScalar(pair.key)) {
          const offset = (pair.key as YamlNode | null)?.range?.[0] ?? node.range?.[0] ?? 0;
          const { line, col } = lines.linePos(offset);
          const where = path.length === 0 ? '' : ` in "${formatFieldPath(path)}"`;
          issues.push({
            source,
            field: null,
            message: `a key${where} is not a plain name`,
            line,
            column: col,
          });
          continue;
        }
        const name = String(pair.key.value);
        if (seen.has(name)) {
          const offset = pair.key.range?.[0] ?? 0;
          const { line, col } = lines.linePos(offset);
          issues.push({
            source,
            field: formatFieldPath([...path, name]),
            message: `duplicate field "${formatFieldPath([...path, name])}"`,
            line,
            column: col,
          });
        }
        seen.add(name);
        walk(pair.value, [...path, name]);
      }
    } else if (isSeq(node)) {
      node.items.forEach((item, i) => {
        walk(item, [...path, i]);
      });
    }
  };
  walk(doc.contents, []);
  return issues;
}

/** YAML null means "not set" (as it does for Go's decoder); drop such entries. */
function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([, v]) => v !== null)
        .map(([k, v]) => [k, withoutNulls(v)]),
    );
  }
  return value;
}

function valueAt(root: unknown, path: Path): unknown {
  let v = root;
  for (const segment of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<PropertyKey, unknown>)[segment];
  }
  return v;
}

function levenshtein(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row.push(Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost));
    }
    prev = row;
  }
  return prev[b.length] ?? 0;
}

/** The known field `name` was most likely meant to be, if one is close. */
export function suggestField(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(name.length / 4));
  for (const candidate of known) {
    if (candidate.toLowerCase() === lower) return candidate;
    const d = levenshtein(lower, candidate.toLowerCase());
    if (d <= bestDistance) {
      best = candidate;
      bestDistance = d - 1;
    }
  }
  return best;
}

const EXPECTED: Readonly<Record<string, string>> = {
  number: 'a number',
  int: 'an integer',
  string: 'a string',
  boolean: 'true or false',
  object: 'a mapping',
  record: 'a mapping',
  array: 'a list',
};

/** One zod issue as berth's message (unknown keys become one issue each). */
function describeIssue(
  issue: z.core.$ZodIssue,
  input: unknown,
): { path: Path; key: boolean; message: string }[] {
  const path = issue.path;
  const field = `field "${formatFieldPath(path)}"`;
  switch (issue.code) {
    case 'unrecognized_keys':
      return issue.keys.map((k) => {
        const suggestion = suggestField(k, knownFields(path));
        const hint = suggestion === undefined ? '' : `; did you mean "${suggestion}"?`;
        return {
          path: [...path, k],
          key: true,
          message: `unknown field "${formatFieldPath([...path, k])}"${hint}`,
        };
      });
    case 'invalid_type': {
      const value = valueAt(input, path);
      const expected = EXPECTED[issue.expected] ?? issue.expected;
      const message =
        value === undefined
          ? `${field} is required`
          : `${field}: expected ${expected}, got ${describeValue(value)}`;
      return [{ path, key: false, message }];
    }
    case 'too_small':
    case 'too_big': {
      const bound = issue.code === 'too_small' ? issue.minimum : issue.maximum;
      const word = issue.code === 'too_small' ? 'at least' : 'at most';
      return [
        {
          path,
          key: false,
          message: `${field}: must be ${word} ${String(bound)}, got ${describeValue(valueAt(input, path))}`,
        },
      ];
    }
    case 'invalid_value': {
      const options = issue.values.filter((v) => v !== '').map((v) => JSON.stringify(v));
      return [
        {
          path,
          key: false,
          message: `${field}: expected one of ${options.join(', ')}, got ${describeValue(valueAt(input, path))}`,
        },
      ];
    }
    case 'custom':
    case 'invalid_element':
    case 'invalid_format':
    case 'invalid_key':
    case 'invalid_union':
    case 'not_multiple_of':
      // berth's own checks (durations, quantities) word their messages themselves.
      return [{ path, key: false, message: `${field}: ${issue.message}` }];
  }
}

function fail(source: string, issues: ConfigIssue[]): never {
  issues.sort((a, b) => (a.line ?? Infinity) - (b.line ?? Infinity));
  throw ConfigError.fromIssues(`Cannot load ${source}`, issues);
}

/**
 * The document as plain values. yaml throws a bare ReferenceError when aliases would
 * expand past the cap (a "billion laughs" file); that is a bad file, not a crash.
 */
function toPlain(doc: Document, source: string): unknown {
  try {
    return doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    return fail(source, [{ source, field: null, message: `invalid YAML: ${why}` }]);
  }
}

/**
 * Parses and type-checks the text of a KubeletConfiguration file.
 * @param source the file's path, used in messages
 * @throws ConfigError with every problem, each with its field and line
 */
export function parseKubeletConfigFile(text: string, source: string): ParsedKubeletConfigFile {
  const at = (message: string, extra: Partial<ConfigIssue> = {}): ConfigIssue => ({
    source,
    field: null,
    message,
    ...extra,
  });
  if (text.trim() === '') fail(source, [at('the file is empty')]);
  const lines = new LineCounter();
  // uniqueKeys off: duplicateKeys() reports them with the full field path.
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: false, prettyErrors: false });
  const syntax = doc.errors.map((e) => {
    const { line, col } = lines.linePos(e.pos[0]);
    return at(`invalid YAML: ${e.message}`, { line, column: col });
  });
  if (syntax.length > 0) fail(source, syntax);
  const duplicates = keyProblems(doc, lines, source);
  if (duplicates.length > 0) fail(source, duplicates);
  const positionOf = (path: Path, key = false): Position | undefined =>
    positionIn(doc, lines, path, key);
  const located = (path: Path, message: string, key = false): ConfigIssue => {
    const pos = positionOf(path, key);
    return at(message, {
      field: path.length === 0 ? null : formatFieldPath(path),
      ...(pos === undefined ? {} : { line: pos.line, column: pos.column }),
    });
  };

  const input = withoutNulls(toPlain(doc, source));
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    fail(source, [
      located([], `expected a ${KUBELET_CONFIG_KIND} mapping, got ${describeValue(input)}`),
    ]);
  }
  // A wrong apiVersion or kind would also make most fields "unknown"; say only that.
  const header = input as Record<string, unknown>;
  const headerIssues: ConfigIssue[] = [];
  for (const [field, want] of [
    ['apiVersion', KUBELET_CONFIG_API_VERSION],
    ['kind', KUBELET_CONFIG_KIND],
  ] as const) {
    const got = header[field];
    if (got === undefined) headerIssues.push(located([], `missing ${field} (expected ${want})`));
    else if (got !== want) {
      headerIssues.push(
        located([field], `${field} ${describeValue(got)} is not supported (expected ${want})`),
      );
    }
  }
  if (headerIssues.length > 0) fail(source, headerIssues);

  const result = kubeletConfigurationSchema.safeParse(input);
  if (!result.success) {
    fail(
      source,
      result.error.issues.flatMap((issue) =>
        describeIssue(issue, input).map((d) => located(d.path, d.message, d.key)),
      ),
    );
  }
  return {
    source,
    file: result.data,
    positionOf(path) {
      const offset = nodeAt(doc, path)?.range?.[0];
      if (offset === undefined) return undefined;
      const { line, col } = lines.linePos(offset);
      return { line, column: col };
    },
  };
}

/**
 * Reads and parses a KubeletConfiguration file.
 * @throws ConfigError (BERTH_CONFIG_UNREADABLE when the file cannot be read)
 */
export async function readKubeletConfigFile(
  path: string,
  readFile: (path: string) => Promise<string>,
): Promise<ParsedKubeletConfigFile> {
  let text: string;
  try {
    text = await readFile(path);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new ConfigError(`Cannot load ${path}: ${why}`, {
      code: 'BERTH_CONFIG_UNREADABLE',
      cause: err,
      issues: [{ source: path, field: null, message: why }],
    });
  }
  return parseKubeletConfigFile(text, path);
}
