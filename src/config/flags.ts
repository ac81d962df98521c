/**
 * A small command-line parser over a typed flag table, with upstream's (pflag's)
 * conventions, which `util.parseArgs` cannot express:
 *
 * - `--name=value` and `--name value`; booleans as `--flag` or `--flag=true|false`
 *   (`--flag false` is not a value: "false" would be a stray argument, as upstream);
 * - a one-letter shorthand with one dash: `-v=4`, `-v 4`, `-v4`;
 * - `_` and `-` are the same in names (`--max_pods`), as the kubelet's normalizer;
 * - list flags take comma-separated values and may repeat.
 *
 * Unknown flags, missing or invalid values and stray arguments throw a ConfigError whose
 * message names the flag (`unknown flag: --foo`).
 */
import { ConfigError } from './errors.ts';
import { formatGoDuration, parseGoDuration } from './duration.ts';

/** One flag: how to parse it and how to describe it in `--help`. */
export interface FlagSpec<T> {
  /** One-line description for the usage text. */
  readonly usage: string;
  /** Value placeholder in the usage text ("string", "int", "duration"). */
  readonly typeName: string;
  /** Takes no separate value: `--flag` means true, `--flag=false` false. */
  readonly boolean?: boolean;
  /** One-letter alias used with a single dash (`v` for `-v=4`). */
  readonly shorthand?: string;
  /** Shown as `(default …)`. */
  readonly defaultText?: string;
  /** When set the flag still works, and this says what to use instead. */
  readonly deprecated?: string;
  /**
   * Parses one occurrence. `previous` is what earlier occurrences produced, so list
   * flags can append and map flags merge; scalar flags ignore it (last one wins).
   * Throws an Error whose message says what is wrong with `text`.
   */
  parse(text: string, previous: T | undefined): T;
}

/** A table of flags by long name (without dashes). */
export type FlagTable = { readonly [name: string]: FlagSpec<unknown> };

/** The value type of a spec. */
export type FlagValueOf<S> = S extends FlagSpec<infer T> ? T : never;

/** Parsed values: present only for flags that were given. */
export type FlagValues<Table extends FlagTable> = {
  readonly [K in keyof Table]?: FlagValueOf<Table[K]>;
};

/** The result of parsing argv against a table. */
export interface ParsedArgs<Table extends FlagTable> {
  readonly values: FlagValues<Table>;
  /** Long names of the flags that were given, first occurrence order. */
  readonly given: readonly (keyof Table & string)[];
}

type StringSpecOptions = Partial<Pick<FlagSpec<string>, 'defaultText' | 'deprecated'>>;

/** A string flag; the empty string is a value (`--cgroup-root=`). */
export function stringFlag(usage: string, options: StringSpecOptions = {}): FlagSpec<string> {
  return { usage, typeName: 'string', ...options, parse: (text) => text };
}

// strconv.ParseBool's spellings, which pflag accepts.
const TRUE_WORDS: ReadonlySet<string> = new Set(['1', 't', 'T', 'true', 'TRUE', 'True']);
const FALSE_WORDS: ReadonlySet<string> = new Set(['0', 'f', 'F', 'false', 'FALSE', 'False']);

/** A boolean flag. */
export function boolFlag(
  usage: string,
  options: Partial<Pick<FlagSpec<boolean>, 'defaultText' | 'deprecated' | 'shorthand'>> = {},
): FlagSpec<boolean> {
  return {
    usage,
    typeName: '',
    boolean: true,
    ...options,
    parse(text) {
      if (TRUE_WORDS.has(text)) return true;
      if (FALSE_WORDS.has(text)) return false;
      throw new Error('expected true or false');
    },
  };
}

/** An integer flag within [min, max] (default: the int32 range, like upstream's). */
export function intFlag(
  usage: string,
  options: StringSpecOptions & {
    readonly min?: number;
    readonly max?: number;
    readonly shorthand?: string;
  } = {},
): FlagSpec<number> {
  const { min = -(2 ** 31), max = 2 ** 31 - 1, ...rest } = options;
  return {
    usage,
    typeName: 'int',
    ...rest,
    parse(text) {
      if (!/^[+-]?\d+$/.test(text)) throw new Error('expected an integer');
      const n = Number(text);
      if (n < min || n > max) throw new Error(`expected an integer from ${min} to ${max}`);
      return n;
    },
  };
}

/** A Go duration flag ("10s", "1m30s"), parsed to milliseconds. */
export function durationFlag(usage: string, options: StringSpecOptions = {}): FlagSpec<number> {
  return {
    usage,
    typeName: 'duration',
    ...options,
    parse(text) {
      try {
        return parseGoDuration(text);
      } catch (err) {
        throw new Error(
          `${(err as Error).message} (expected a duration such as "10s", "1m30s" or "100ms")`,
        );
      }
    },
  };
}

/** A flag with a fixed set of values. */
export function enumFlag<const V extends string>(
  usage: string,
  values: readonly V[],
  options: StringSpecOptions = {},
): FlagSpec<V> {
  return {
    usage: `${usage} Possible values: ${values.map((v) => `'${v}'`).join(', ')}.`,
    typeName: 'string',
    ...options,
    parse(text) {
      const found = values.find((v) => v === text);
      if (found === undefined) throw new Error(`expected one of ${values.join(', ')}`);
      return found;
    },
  };
}

/**
 * A comma-separated list flag. Each item goes through `item` (which throws with a
 * reason); repeating the flag appends, unless `repeat` is 'replace' (upstream's
 * behaviour for some flags, e.g. --register-with-taints).
 */
export function listFlag<T>(
  usage: string,
  item: (text: string) => T,
  options: StringSpecOptions & {
    readonly typeName?: string;
    readonly repeat?: 'append' | 'replace';
  } = {},
): FlagSpec<readonly T[]> {
  const { typeName = 'strings', repeat = 'append', ...rest } = options;
  return {
    usage,
    typeName,
    ...rest,
    parse(text, previous) {
      const items = text === '' ? [] : text.split(',').map((s) => item(s.trim()));
      return repeat === 'append' ? [...(previous ?? []), ...items] : items;
    },
  };
}

/**
 * A `key=value,key2=value2` flag; repeating it merges, later keys winning. `check`
 * may throw to reject a pair.
 */
export function mapFlag<V>(
  usage: string,
  value: (text: string, key: string) => V,
  options: StringSpecOptions & { readonly typeName?: string } = {},
): FlagSpec<Readonly<Record<string, V>>> {
  const { typeName = 'mapStringString', ...rest } = options;
  return {
    usage,
    typeName,
    ...rest,
    parse(text, previous) {
      const out: Record<string, V> = { ...previous };
      if (text === '') return out;
      for (const pair of text.split(',')) {
        const eq = pair.indexOf('=');
        if (eq < 0) throw new Error(`malformed pair ${JSON.stringify(pair)}: expected key=value`);
        const key = pair.slice(0, eq).trim();
        out[key] = value(pair.slice(eq + 1).trim(), key);
      }
      return out;
    },
  };
}

function invalid(message: string, flag: string | null): ConfigError {
  return new ConfigError(message, { issues: [{ source: 'flags', field: flag, message }] });
}

/** Looks a name up in the table, treating `_` and `-` alike. */
function lookup(table: FlagTable, name: string): string | undefined {
  const normalized = name.replaceAll('_', '-');
  return Object.hasOwn(table, normalized) ? normalized : undefined;
}

/**
 * Parses `argv` (without the node and script paths) against `table`.
 * @throws ConfigError naming the flag for unknown flags, missing or invalid values and
 *   stray arguments.
 */
export function parseFlags<Table extends FlagTable>(
  argv: readonly string[],
  table: Table,
): ParsedArgs<Table> {
  const values: Record<string, unknown> = {};
  const given: string[] = [];
  let lastBoolean: string | null = null;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    let name: string | undefined;
    let inline: string | undefined;
    let display: string;
    if (arg === '--') {
      const rest = argv[i + 1];
      if (rest !== undefined) throw invalid(`unknown command ${JSON.stringify(rest)}`, null);
      break;
    } else if (arg.startsWith('--')) {
      const body = arg.slice(2);
      const eq = body.indexOf('=');
      const raw = eq < 0 ? body : body.slice(0, eq);
      inline = eq < 0 ? undefined : body.slice(eq + 1);
      display = `--${raw}`;
      name = lookup(table, raw);
      if (name === undefined) throw invalid(`unknown flag: ${display}`, display);
    } else if (arg.startsWith('-') && arg.length > 1) {
      const letter = arg.charAt(1);
      name = Object.keys(table).find((k) => table[k]?.shorthand === letter);
      if (name === undefined) {
        throw invalid(`unknown shorthand flag: '${letter}' in ${arg}`, `-${letter}`);
      }
      const rest = arg.slice(2);
      inline = rest === '' ? undefined : rest.startsWith('=') ? rest.slice(1) : rest;
      display = `-${letter}`;
    } else {
      // The kubelet takes no positional arguments. A "false" right after a boolean flag
      // is the classic `--fail-swap-on false` mistake, so say how to write it.
      const hint =
        lastBoolean !== null && (TRUE_WORDS.has(arg) || FALSE_WORDS.has(arg))
          ? ` (boolean flags take their value inline: --${lastBoolean}=${arg})`
          : '';
      throw invalid(`unknown command ${JSON.stringify(arg)}${hint}`, null);
    }
    const spec = table[name];
    if (spec === undefined) throw invalid(`unknown flag: ${display}`, display);
    let text: string;
    if (inline !== undefined) {
      text = inline;
    } else if (spec.boolean === true) {
      text = 'true';
    } else {
      const next = argv[i + 1];
      // pflag would take "--config" as the value of "--kubeconfig --config x"; berth
      // refuses, because that is always a forgotten value, never a path.
      if (next === undefined || next.startsWith('--')) {
        throw invalid(`flag needs an argument: ${display}`, `--${name}`);
      }
      text = next;
      i++;
    }
    try {
      values[name] = spec.parse(text, values[name]);
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      throw invalid(
        `invalid argument ${JSON.stringify(text)} for "${display}" flag: ${why}`,
        `--${name}`,
      );
    }
    if (!given.includes(name)) given.push(name);
    lastBoolean = spec.boolean === true && inline === undefined ? name : null;
  }
  // The keys were checked against the table, so the record has the table's value types.
  return { values: values as FlagValues<Table>, given };
}

/** Renders a default duration the way upstream's usage text does ("1m0s"). */
export function durationDefault(ms: number): string {
  return formatGoDuration(ms);
}

/** Splits text into lines of at most `width` characters at spaces. */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  lines.push(line);
  return lines;
}

/**
 * The usage text for `--help`: flags sorted by name, two columns, defaults and
 * deprecations noted, in the layout of upstream's `kubelet --help`.
 */
export function formatUsage(
  table: FlagTable,
  options: { readonly command: string; readonly description?: string },
): string {
  const rows = Object.keys(table)
    .sort()
    .map((name) => {
      const spec = table[name];
      const short = spec?.shorthand === undefined ? '    ' : `-${spec.shorthand}, `;
      const type = spec === undefined || spec.typeName === '' ? '' : ` ${spec.typeName}`;
      let text = spec?.usage ?? '';
      if (spec?.defaultText !== undefined) text += ` (default ${spec.defaultText})`;
      if (spec?.deprecated !== undefined) text += ` (DEPRECATED: ${spec.deprecated})`;
      return { left: `  ${short}--${name}${type}`, text };
    });
  const width = Math.max(...rows.map((r) => r.left.length)) + 3;
  const lines = [
    ...(options.description === undefined ? [] : [...wrap(options.description, 100), '']),
    'Usage:',
    `  ${options.command} [flags]`,
    '',
    'Flags:',
    ...rows.flatMap((r) => {
      const [first = '', ...rest] = wrap(r.text, Math.max(40, 100 - width));
      return [`${r.left.padEnd(width)}${first}`, ...rest.map((l) => `${' '.repeat(width)}${l}`)];
    }),
  ];
  return `${lines.join('\n')}\n`;
}

/**
 * Upstream's ColonSeparatedMultimapStringString (--manifest-url-header): `k:v` pairs
 * separated by commas, repeatable; a name given again appends its value. The value may
 * itself hold colons (only the first one splits).
 */
export function colonMultimapFlag(
  usage: string,
): FlagSpec<Readonly<Record<string, readonly string[]>>> {
  return {
    usage,
    typeName: 'colonSeparatedMultimapStringString',
    parse(text, previous) {
      const out: Record<string, string[]> = {};
      for (const [k, v] of Object.entries(previous ?? {})) out[k] = [...v];
      for (const pair of text.split(',')) {
        if (pair.trim() === '') continue;
        const at = pair.indexOf(':');
        const key = at < 0 ? '' : pair.slice(0, at).trim();
        if (key === '') {
          throw new Error(`malformed pair ${JSON.stringify(pair)}, expect string:string`);
        }
        (out[key] ??= []).push(pair.slice(at + 1).trim());
      }
      return out;
    },
  };
}
