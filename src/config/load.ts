/**
 * berth's start-up configuration, assembled the way the upstream kubelet does it:
 * parse the flags, load the --config file (type-checked and defaulted), apply the flags
 * that override file fields, validate the result, derive the node name. The result is
 * one normalized, frozen object.
 */
import { readFile as fsReadFile } from 'node:fs/promises';
import { hostname as osHostname } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { applyDefaults } from './defaults.ts';
import {
  ConfigError,
  HelpRequestedError,
  VersionRequestedError,
  formatFieldPath,
  type ConfigIssue,
} from './errors.ts';
import { readKubeletConfigFile, type ParsedKubeletConfigFile } from './kubelet-config.ts';
import {
  DEFAULT_CONTAINER_LOG_SYMLINK_DIR,
  DEFAULT_ROOT_DIR,
  applyFlagOverrides,
  kubeletUsage,
  parseKubeletFlags,
} from './kubelet-flags.ts';
import { checkDnsSubdomain, type Taint } from './names.ts';
import type { Dict, KubeletConfig, LoggingFormat } from './types.ts';
import { validateKubeletConfig } from './validation.ts';
import { unsupportedSettings } from './unsupported.ts';

/** Everything berth starts with. Deeply readonly and frozen. */
export interface BerthConfig {
  /** The --config file (absolute), or null when running on defaults and flags. */
  readonly configFile: string | null;
  /** --kubeconfig; null means standalone mode (static pods only). */
  readonly kubeconfig: string | null;
  readonly bootstrapKubeconfig: string | null;
  /** --root-dir, absolute. Default /var/lib/kubelet. */
  readonly rootDir: string;
  /** --cert-dir. Default <rootDir>/pki. */
  readonly certDir: string;
  /** --container-log-symlink-dir (berth's own), absolute. Default /var/log/containers. */
  readonly containerLogSymlinkDir: string;
  /** --hostname-override as given, or null. */
  readonly hostnameOverride: string | null;
  /** The Node's name: the override or the hostname, trimmed and lowercased (as upstream). */
  readonly nodeName: string;
  /** --node-ip: empty (pick the default address), one address, or one per family. */
  readonly nodeIPs: readonly string[];
  /** --node-labels. */
  readonly nodeLabels: Dict<string>;
  /** Taints to register with (registerWithTaints or --register-with-taints). */
  readonly registerWithTaints: readonly Taint[];
  /** Log verbosity (logging.verbosity or --v). */
  readonly verbosity: number;
  /** Log format (logging.format or --logging-format). */
  readonly loggingFormat: LoggingFormat;
  /** The kubelet configuration: file, upstream defaults, then flags. */
  readonly kubelet: KubeletConfig;
  /** Things worth a log line at start-up (deprecated flags and spellings). */
  readonly warnings: readonly string[];
}

/** Seams for tests; the defaults touch the real machine. */
export interface LoadConfigOptions {
  /** Reads the --config file (default: fs.readFile as UTF-8). */
  readonly readFile?: (path: string) => Promise<string>;
  /** The machine's hostname (default: os.hostname). */
  readonly hostname?: () => string;
  /** Where relative --config and --root-dir paths start (default: process.cwd()). */
  readonly cwd?: string;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

function nonEmpty(value: string | undefined): string | null {
  return value === undefined || value === '' ? null : value;
}

/** Turns validation results into issues pointing at the flag or the line that set them. */
function locateIssues(
  config: KubeletConfig,
  file: ParsedKubeletConfigFile | null,
  flagFields: ReadonlyMap<string, string>,
): ConfigIssue[] {
  return [...validateKubeletConfig(config), ...unsupportedSettings(config)].map((issue) => {
    const field = formatFieldPath(issue.path);
    const flag = [...flagFields].find(
      ([f]) => field === f || field.startsWith(`${f}[`) || field.startsWith(`${f}.`),
    )?.[1];
    if (flag !== undefined) {
      return {
        source: 'flags',
        field,
        message: `field "${field}" (set by ${flag}): ${issue.message}`,
      };
    }
    const pos = file?.positionOf(issue.path);
    return {
      source: file?.source ?? 'defaults',
      field,
      message: `field "${field}": ${issue.message}`,
      ...(pos === undefined ? {} : { line: pos.line, column: pos.column }),
    };
  });
}

function nodeNameFrom(override: string | null, hostname: () => string): string {
  const from = override === null ? 'the hostname' : '--hostname-override';
  const name = (override ?? hostname()).trim().toLowerCase();
  const why = name === '' ? 'must not be empty' : checkDnsSubdomain(name);
  if (why !== null) {
    const message = `invalid node name ${JSON.stringify(name)} from ${from}: ${why}`;
    throw new ConfigError(message, {
      issues: [
        { source: 'flags', field: override === null ? null : '--hostname-override', message },
      ],
    });
  }
  return name;
}

/**
 * Builds berth's configuration from its command line.
 * @param argv the arguments after the script (process.argv.slice(2))
 * @throws HelpRequestedError for --help (print its `usage`, exit 0)
 * @throws VersionRequestedError for --version (print the version, exit 0)
 * @throws ConfigError naming the flag or field (and line) of every problem
 */
export async function loadConfig(
  argv: readonly string[],
  options: LoadConfigOptions = {},
): Promise<BerthConfig> {
  const parsed = parseKubeletFlags(argv);
  const flags = parsed.values;
  if (flags.help === true) throw new HelpRequestedError(kubeletUsage());
  if (flags.version !== undefined && flags.version !== 'false')
    throw new VersionRequestedError(flags.version === 'raw');
  const cwd = options.cwd ?? process.cwd();
  const readFile = options.readFile ?? ((path: string) => fsReadFile(path, 'utf8'));

  const configArg = nonEmpty(flags.config);
  const configFile = configArg === null ? null : resolve(cwd, configArg);
  const file = configFile === null ? null : await readKubeletConfigFile(configFile, readFile);
  const defaulted = applyDefaults(
    file?.file ?? null,
    configFile === null ? null : dirname(configFile),
  );
  const overridden = applyFlagOverrides(defaulted, parsed);
  const kubelet = overridden.config;

  const issues = locateIssues(kubelet, file, overridden.fields);
  if (issues.length > 0) {
    const fromFile = issues.some((i) => i.source === configFile);
    issues.sort((a, b) => (a.line ?? Infinity) - (b.line ?? Infinity));
    throw ConfigError.fromIssues(
      fromFile && configFile !== null ? `Cannot load ${configFile}` : 'Invalid configuration',
      issues,
    );
  }

  const warnings = [...overridden.warnings];
  for (const [field, endpoint] of [
    ['containerRuntimeEndpoint', kubelet.containerRuntimeEndpoint],
    ['imageServiceEndpoint', kubelet.imageServiceEndpoint],
  ] as const) {
    if (endpoint !== null && isAbsolute(endpoint)) {
      warnings.push(`${field} ${JSON.stringify(endpoint)} has no scheme; write unix://${endpoint}`);
    }
  }

  const hostnameOverride = nonEmpty(flags['hostname-override']);
  const rootDir = resolve(cwd, nonEmpty(flags['root-dir']) ?? DEFAULT_ROOT_DIR);
  return deepFreeze({
    configFile,
    kubeconfig: nonEmpty(flags.kubeconfig),
    bootstrapKubeconfig: nonEmpty(flags['bootstrap-kubeconfig']),
    rootDir,
    certDir: nonEmpty(flags['cert-dir']) ?? join(rootDir, 'pki'),
    containerLogSymlinkDir: resolve(
      cwd,
      nonEmpty(flags['container-log-symlink-dir']) ?? DEFAULT_CONTAINER_LOG_SYMLINK_DIR,
    ),
    hostnameOverride,
    nodeName: nodeNameFrom(hostnameOverride, options.hostname ?? osHostname),
    nodeIPs: flags['node-ip'] ?? [],
    nodeLabels: flags['node-labels'] ?? {},
    registerWithTaints: kubelet.registerWithTaints,
    verbosity: kubelet.logging.verbosity,
    loggingFormat: kubelet.logging.format,
    kubelet,
    warnings,
  });
}
