/**
 * Typed configuration errors. Every problem found while reading flags or the
 * KubeletConfiguration file is a ConfigIssue; one ConfigError carries all of them, so an
 * operator fixes a file in one pass instead of one restart per typo (upstream aggregates
 * validation errors the same way).
 */
import { BerthError } from '../util/errors.ts';

/** One problem, located where possible. */
export interface ConfigIssue {
  /** Where the value came from: a file path, or "flags" for the command line. */
  readonly source: string;
  /** The field as written in the file (`authentication.webhook.cacheTTL`), or the flag. */
  readonly field: string | null;
  /** What is wrong, without the location (e.g. `expected a number, got "abc"`). */
  readonly message: string;
  /** 1-based line in the file, when the YAML document told us. */
  readonly line?: number;
  readonly column?: number;
}

export type ConfigErrorCode =
  'BERTH_CONFIG_INVALID' | 'BERTH_CONFIG_UNREADABLE' | 'BERTH_CONFIG_HELP_REQUESTED';

/**
 * Renders a field path as written in the file: `authentication.webhook.cacheTTL`,
 * `registerWithTaints[0].key`, `evictionHard[memory.available]`.
 */
export function formatFieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (typeof segment === 'string' && /^[A-Za-z_][\w-]*$/.test(segment)) {
      out += out === '' ? segment : `.${segment}`;
    } else out += `[${String(segment)}]`;
  }
  return out;
}

/** Renders an issue as one line: `unknown field "x" (line 3)`. */
export function formatIssue(issue: ConfigIssue): string {
  const where =
    issue.line === undefined
      ? ''
      : ` (line ${issue.line}${issue.column === undefined ? '' : `, column ${issue.column}`})`;
  return `${issue.message}${where}`;
}

/**
 * Flags or configuration that berth cannot start with. The message names the flag or
 * field (and line); `issues` has each problem separately for callers that want them.
 */
export class ConfigError extends BerthError {
  override readonly code: ConfigErrorCode;
  readonly issues: readonly ConfigIssue[];

  constructor(
    message: string,
    options: {
      readonly issues?: readonly ConfigIssue[];
      readonly code?: ConfigErrorCode;
      readonly cause?: unknown;
    } = {},
  ) {
    const code = options.code ?? 'BERTH_CONFIG_INVALID';
    super(code, message, { cause: options.cause });
    this.code = code;
    this.issues = options.issues ?? [];
  }

  /** One error for a list of issues: `<prefix>: <issue>` or a bulleted list. */
  static fromIssues(prefix: string, issues: readonly ConfigIssue[]): ConfigError {
    const lines = issues.map(formatIssue);
    const message =
      lines.length === 1
        ? `${prefix}: ${lines[0] ?? ''}`
        : `${prefix}: ${lines.length} problems:\n${lines.map((l) => `  - ${l}`).join('\n')}`;
    return new ConfigError(message, { issues });
  }
}

/**
 * `--help` was given: not a failure, so not a ConfigError. Carries the usage text so
 * main can print it to stdout and exit 0, as the upstream kubelet does.
 */
export class HelpRequestedError extends BerthError {
  override readonly code = 'BERTH_CONFIG_HELP_REQUESTED';
  readonly usage: string;
  constructor(usage: string) {
    super('BERTH_CONFIG_HELP_REQUESTED', 'help requested');
    this.usage = usage;
  }
}

/**
 * `--version` was given: print the version and exit 0 before reading anything else, as
 * upstream's verflag.PrintAndExitIfRequested. `raw` asks for the detailed form.
 */
export class VersionRequestedError extends BerthError {
  override readonly code = 'BERTH_CONFIG_VERSION_REQUESTED';
  readonly raw: boolean;
  constructor(raw: boolean) {
    super('BERTH_CONFIG_VERSION_REQUESTED', 'version requested');
    this.raw = raw;
  }
}
