/**
 * berth's command line: upstream kubelet flag names, types and defaults. Flags that
 * have a KubeletConfiguration field (`field`) override the file's value, as upstream's
 * flag precedence does; upstream marks most of them deprecated in favour of the file,
 * and berth warns the same way. Flags without a field (--kubeconfig, --node-ip, …)
 * are per-node settings that only exist on the command line.
 */
import {
  boolFlag,
  formatUsage,
  mapFlag,
  parseFlags,
  stringFlag,
  type FlagSpec,
  type FlagValues,
  type ParsedArgs,
} from './flags.ts';
import { boolValue, CONFIG_FLAGS, type ConfigFlag } from './kubelet-config-flags.ts';
import { checkNodeLabel, parseNodeIPs } from './names.ts';
import type { KubeletConfig } from './types.ts';

export type { ConfigFlag } from './kubelet-config-flags.ts';

/** Upstream's root directory default. */
export const DEFAULT_ROOT_DIR = '/var/lib/kubelet';

/** Upstream's legacyContainerLogsDir, where the container log symlinks go. */
export const DEFAULT_CONTAINER_LOG_SYMLINK_DIR = '/var/log/containers';

/** Throws the reason when `check` finds one: map items report this way. */
function orThrow(why: string | null): void {
  if (why !== null) throw new Error(why);
}

function nodeLabelValue(value: string, key: string): string {
  orThrow(checkNodeLabel(key, value));
  return value;
}

/** Every flag berth accepts, by upstream name. */
export const KUBELET_FLAGS = {
  help: boolFlag('Show this help and exit.', { shorthand: 'h' }),
  // component-base's verflag: `--version` prints "Kubernetes <version>" and exits (kubeadm's
  // preflight runs `kubelet --version`), `--version=raw` the version struct.
  version: {
    usage: 'Print version information and quit; --version=raw prints more detail.',
    typeName: 'version[=true]',
    boolean: true,
    parse(text: string): 'true' | 'false' | 'raw' {
      if (text === 'raw') return 'raw';
      return boolValue(text) ? 'true' : 'false';
    },
  } satisfies FlagSpec<'true' | 'false' | 'raw'>,
  kubeconfig: stringFlag(
    'Path to a kubeconfig file for the API server. Without it berth runs standalone (static pods only).',
  ),
  'bootstrap-kubeconfig': stringFlag(
    'Path to a kubeconfig used to request a client certificate when --kubeconfig does not exist yet; the certificate goes to --cert-dir and a kubeconfig for it to --kubeconfig.',
  ),
  config: stringFlag(
    'Path to a KubeletConfiguration file (relative paths start at the working directory). Command-line flags override its values.',
  ),
  'hostname-override': stringFlag(
    'Use this name for the node instead of the hostname (lowercased either way).',
  ),
  'node-ip': {
    usage:
      'IP address of the node, or an IPv4 and an IPv6 address separated by a comma (dual-stack).',
    typeName: 'string',
    parse: (text: string) => parseNodeIPs(text),
  } satisfies FlagSpec<readonly string[]>,
  'root-dir': stringFlag('Directory for the kubelet files (volume mounts, pod data).', {
    defaultText: DEFAULT_ROOT_DIR,
  }),
  'cert-dir': stringFlag(
    'Directory of the TLS certificates; ignored for serving when --tls-cert-file and --tls-private-key-file are given.',
    { defaultText: '<root-dir>/pki' },
  ),
  'container-log-symlink-dir': stringFlag(
    "berth's own flag (upstream's kubelet always uses /var/log/containers): the directory of the <pod>_<namespace>_<container>-<id>.log symlinks to each container's log, which log collectors tail.",
    { defaultText: DEFAULT_CONTAINER_LOG_SYMLINK_DIR },
  ),
  'node-labels': mapFlag(
    'Labels to add when registering the node, as key=value pairs separated by ",". kubernetes.io labels must use an allowed prefix (kubelet.kubernetes.io, node.kubernetes.io) or be a well-known node label.',
    nodeLabelValue,
  ),
  ...CONFIG_FLAGS,
} as const;

/** The flag table's type. */
export type KubeletFlagTable = typeof KUBELET_FLAGS;

/** Parsed command-line values: present only for flags that were given. */
export type KubeletFlags = FlagValues<KubeletFlagTable>;

/**
 * Parses berth's command line.
 * @throws ConfigError naming the flag (unknown flag, missing or invalid value).
 */
export function parseKubeletFlags(argv: readonly string[]): ParsedArgs<KubeletFlagTable> {
  return parseFlags(argv, KUBELET_FLAGS);
}

/** The `--help` text. */
export function kubeletUsage(command = 'berth'): string {
  return formatUsage(KUBELET_FLAGS, {
    command,
    description:
      'berth is a Kubernetes node agent (a kubelet). It takes the upstream kubelet flags and KubeletConfiguration file.',
  });
}

function isConfigFlag(spec: FlagSpec<unknown>): spec is ConfigFlag<unknown> {
  return 'field' in spec;
}

/** The result of applying command-line overrides. */
export interface FlagOverrides {
  readonly config: KubeletConfig;
  /** Fields the command line set, with the flag that set them (for messages). */
  readonly fields: ReadonlyMap<string, string>;
  /** One line per deprecated flag given. */
  readonly warnings: readonly string[];
}

/** Applies the config-bound flags in `parsed` on top of `config`. */
export function applyFlagOverrides(
  config: KubeletConfig,
  parsed: ParsedArgs<KubeletFlagTable>,
): FlagOverrides {
  let out = config;
  const fields = new Map<string, string>();
  const warnings: string[] = [];
  const values: Readonly<Record<string, unknown>> = parsed.values;
  for (const name of parsed.given) {
    const spec: FlagSpec<unknown> = KUBELET_FLAGS[name];
    if (spec.deprecated !== undefined)
      warnings.push(`flag --${name} is deprecated: ${spec.deprecated}`);
    if (!isConfigFlag(spec)) continue;
    out = spec.apply(out, values[name]);
    fields.set(spec.field, `--${name}`);
  }
  return { config: out, fields, warnings };
}
