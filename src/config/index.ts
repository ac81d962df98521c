/**
 * berth's command line and KubeletConfiguration file. Start-up calls `loadConfig`;
 * the rest is exported for tools and tests.
 */
export { loadConfig, type BerthConfig, type LoadConfigOptions } from './load.ts';
export {
  ConfigError,
  HelpRequestedError,
  VersionRequestedError,
  formatIssue,
  type ConfigErrorCode,
  type ConfigIssue,
} from './errors.ts';
export {
  KUBELET_FLAGS,
  applyFlagOverrides,
  kubeletUsage,
  parseKubeletFlags,
  type KubeletFlags,
} from './kubelet-flags.ts';
export {
  KUBELET_CONFIG_API_VERSION,
  KUBELET_CONFIG_KIND,
  parseKubeletConfigFile,
  readKubeletConfigFile,
  type ParsedKubeletConfigFile,
} from './kubelet-config.ts';
export {
  DEFAULT_CONTAINER_RUNTIME_ENDPOINT,
  DEFAULT_EVICTION_HARD,
  applyDefaults,
} from './defaults.ts';
export { validateKubeletConfig, type ValidationIssue } from './validation.ts';
export { formatGoDuration, parseGoDuration } from './duration.ts';
export { isQuantity, parseQuantity } from '../util/quantity.ts';
export type { Taint, TaintEffect } from './names.ts';
export type * from './types.ts';
