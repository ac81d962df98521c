/**
 * A container's environment as upstream's kubelet builds it (makeEnvironment): service
 * link variables first, then envFrom (configMaps and secrets, with prefix), then env,
 * a later entry replacing the value of an earlier one of the same name. env values
 * expand `$(VAR)` against the variables defined so far (so a variable can refer to
 * earlier ones only) and the service variables.
 *
 * A missing configMap or secret (or key) that is not optional fails the container:
 * makeEnvironment throws an EnvError whose message is upstream's, and the caller shows
 * it as CreateContainerConfigError. envFrom keys are passed through as v1.37 does
 * (relaxed names); one that no environment can carry (with '=') is skipped and returned
 * in `errors` for an InvalidEnvironmentVariableNames warning event.
 */
import type {
  ConfigMap,
  Container,
  EnvVar,
  Pod,
  Secret,
  Service,
} from 'kubernetes-types/core/v1.js';
import { isNotFound } from '../kube/types.ts';
import { BerthError } from '../util/errors.ts';
import type { DownwardResolver } from '../volumes/types.ts';
import { envFileValue } from './env-file.ts';
import { expand, mappingFor } from './expansion.ts';
import { serviceEnv } from './service-env.ts';

export type EnvErrorCode =
  | 'BERTH_ENV_CONFIGMAP_NOT_FOUND'
  | 'BERTH_ENV_SECRET_NOT_FOUND'
  | 'BERTH_ENV_KEY_NOT_FOUND'
  | 'BERTH_ENV_SOURCE_ERROR'
  | 'BERTH_ENV_FIELD_ERROR'
  | 'BERTH_ENV_INVALID_NAME'
  | 'BERTH_ENV_SERVICES_NOT_SYNCED'
  | 'BERTH_ENV_INVALID_KEYS';

/** Why a container's environment cannot be built (or, for INVALID_KEYS, what was skipped). */
export class EnvError extends BerthError {
  override readonly code: EnvErrorCode;
  constructor(code: EnvErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.code = code;
  }
}

/** envFrom keys skipped as invalid names: the InvalidEnvironmentVariableNames warning. */
export class InvalidEnvKeysError extends EnvError {
  /** The event reason upstream records. */
  readonly reason = 'InvalidEnvironmentVariableNames';
  /** The skipped names (prefix included), sorted. */
  readonly keys: readonly string[];
  readonly source: { readonly kind: 'configMap' | 'secret'; readonly name: string };
  constructor(keys: readonly string[], kind: 'configMap' | 'secret', ns: string, name: string) {
    super(
      'BERTH_ENV_INVALID_KEYS',
      `Keys [${keys.join(', ')}] from the EnvFrom ${kind} ${ns}/${name} were skipped since they are considered invalid environment variable names.`,
    );
    this.keys = keys;
    this.source = { kind, name };
  }
}

/** One variable for CRI's ContainerConfig.envs. */
export interface EnvEntry {
  readonly name: string;
  readonly value: string;
}

export interface EnvironmentDeps {
  /** Services of one namespace (ServiceLister.list); called for the pod's and `default`. */
  services(namespace: string): readonly Service[];
  /** The configMap, or undefined (or a NotFound KubeApiError) when it does not exist. */
  getConfigMap(
    namespace: string,
    name: string,
    signal: AbortSignal,
  ): Promise<ConfigMap | undefined>;
  /** The secret, or undefined (or a NotFound KubeApiError) when it does not exist. */
  getSecret(namespace: string, name: string, signal: AbortSignal): Promise<Secret | undefined>;
  readonly downward: DownwardResolver;
  /**
   * False until the services have been listed once (ServiceLister.hasSynced); API pods
   * then fail rather than start without their service variables, as upstream.
   */
  servicesSynced?(): boolean;
  /**
   * The text of `path` inside the pod's volume `volumeName`, resolved without leaving
   * the volume (fileKeyRef). Undefined when the pod has no such volume set up.
   */
  readVolumeFile?(
    volumeName: string,
    path: string,
    signal: AbortSignal,
  ): Promise<{ readonly text: string; readonly hostPath: string }> | undefined;
}

/** env[].valueFrom.fileKeyRef (EnvFiles); not in kubernetes-types' release yet. */
interface FileKeySelector {
  readonly volumeName: string;
  readonly path: string;
  readonly key: string;
  readonly optional?: boolean;
}

export interface Environment {
  /** In upstream's order; names are unique. */
  readonly env: EnvEntry[];
  /** Non-fatal: envFrom keys skipped as invalid names (one per source). */
  readonly errors: InvalidEnvKeysError[];
}

/**
 * A name the process environment can carry at all: printable ASCII without `=`
 * (upstream's relaxed validation, which the apiserver may already accept in env[]).
 */
export function isRelaxedEnvVarName(name: string): boolean {
  return /^[\x20-\x3c\x3e-\x7e]+$/.test(name);
}

/** Reads configMaps and secrets once per container, as upstream does. */
class Sources {
  readonly #deps: EnvironmentDeps;
  readonly #ns: string;
  readonly #signal: AbortSignal;
  readonly #configMaps = new Map<string, ConfigMap | undefined>();
  readonly #secrets = new Map<string, Secret | undefined>();

  constructor(deps: EnvironmentDeps, ns: string, signal: AbortSignal) {
    this.#deps = deps;
    this.#ns = ns;
    this.#signal = signal;
  }

  /** The signal of the environment being built. */
  get signal(): AbortSignal {
    return this.#signal;
  }

  /** The configMap's data, undefined when it is missing and optional. */
  async configMap(
    name: string,
    optional: boolean,
  ): Promise<ReadonlyMap<string, string> | undefined> {
    if (!this.#configMaps.has(name)) {
      this.#configMaps.set(
        name,
        await this.#get(() => this.#deps.getConfigMap(this.#ns, name, this.#signal)),
      );
    }
    const cm = this.#configMaps.get(name);
    // A Map, so keys such as `constructor` or `__proto__` are plain keys.
    if (cm !== undefined) return new Map(Object.entries(cm.data ?? {}));
    if (optional) return undefined;
    throw new EnvError('BERTH_ENV_CONFIGMAP_NOT_FOUND', `configmap "${name}" not found`);
  }

  /** The secret's data decoded, undefined when it is missing and optional. */
  async secret(name: string, optional: boolean): Promise<ReadonlyMap<string, string> | undefined> {
    if (!this.#secrets.has(name)) {
      this.#secrets.set(
        name,
        await this.#get(() => this.#deps.getSecret(this.#ns, name, this.#signal)),
      );
    }
    const secret = this.#secrets.get(name);
    if (secret !== undefined) {
      const out = new Map<string, string>();
      for (const [k, v] of Object.entries(secret.data ?? {})) {
        out.set(k, Buffer.from(v, 'base64').toString('utf8'));
      }
      return out;
    }
    if (optional) return undefined;
    throw new EnvError('BERTH_ENV_SECRET_NOT_FOUND', `secret "${name}" not found`);
  }

  async #get<T>(fetch: () => Promise<T | undefined>): Promise<T | undefined> {
    try {
      return await fetch();
    } catch (err) {
      if (isNotFound(err)) return undefined;
      if (this.#signal.aborted) throw err;
      throw new EnvError(
        'BERTH_ENV_SOURCE_ERROR',
        err instanceof Error ? err.message : String(err),
        {
          cause: err,
        },
      );
    }
  }
}

function keyNotFound(key: string, kind: string, ns: string, name: string): EnvError {
  return new EnvError(
    'BERTH_ENV_KEY_NOT_FOUND',
    `couldn't find key ${key} in ${kind} ${ns}/${name}`,
  );
}

function fieldError(err: unknown): EnvError {
  if (err instanceof EnvError) return err;
  return new EnvError('BERTH_ENV_FIELD_ERROR', err instanceof Error ? err.message : String(err), {
    cause: err,
  });
}

/** A fileKeyRef's value as upstream's makeEnvironmentVariables reads it, with its errors. */
async function fileKeyValue(
  ref: FileKeySelector,
  deps: EnvironmentDeps,
  signal: AbortSignal,
): Promise<string | undefined> {
  const read = deps.readVolumeFile?.(ref.volumeName, ref.path, signal);
  if (read === undefined) {
    throw new EnvError(
      'BERTH_ENV_SOURCE_ERROR',
      `cannot find the volume "${ref.volumeName}" referenced by FileKeyRef`,
    );
  }
  let value: string;
  let hostPath: string;
  try {
    const file = await read;
    hostPath = file.hostPath;
    value = envFileValue(file.text, ref.key);
  } catch (err) {
    if (signal.aborted) throw err;
    // Upstream's event says only this; the cause goes to the log with the error.
    throw new EnvError('BERTH_ENV_SOURCE_ERROR', "couldn't parse env file", { cause: err });
  }
  if (value !== '') return value;
  if (ref.optional === true) return undefined;
  throw new EnvError(
    'BERTH_ENV_KEY_NOT_FOUND',
    `environment variable key "${ref.key}" not found in file "${hostPath}"`,
  );
}

/** The value of one valueFrom, or undefined when an optional source or key is missing. */
async function valueFrom(
  pod: Pod,
  container: Container,
  v: EnvVar,
  deps: EnvironmentDeps,
  sources: Sources,
): Promise<string | undefined> {
  const ns = pod.metadata?.namespace ?? '';
  const from = v.valueFrom ?? {};
  if (from.fieldRef !== undefined) {
    const { apiVersion, fieldPath } = from.fieldRef;
    if (apiVersion !== undefined && apiVersion !== '' && apiVersion !== 'v1') {
      throw new EnvError('BERTH_ENV_FIELD_ERROR', `unsupported pod version: ${apiVersion}`);
    }
    try {
      return deps.downward.podField(pod, fieldPath, 'env');
    } catch (err) {
      throw fieldError(err);
    }
  }
  if (from.resourceFieldRef !== undefined) {
    const r = from.resourceFieldRef;
    const target =
      r.containerName !== undefined && r.containerName !== '' ? r.containerName : container.name;
    try {
      return deps.downward.resourceField(
        pod,
        target,
        r.resource,
        ...(r.divisor === undefined ? [] : [r.divisor]),
      );
    } catch (err) {
      throw fieldError(err);
    }
  }
  if (from.configMapKeyRef !== undefined) {
    const { name = '', key, optional = false } = from.configMapKeyRef;
    const data = await sources.configMap(name, optional);
    if (data === undefined) return undefined;
    const value = data.get(key);
    if (value !== undefined) return value;
    if (optional) return undefined;
    throw keyNotFound(key, 'ConfigMap', ns, name);
  }
  const fileKeyRef = (from as { fileKeyRef?: FileKeySelector }).fileKeyRef;
  if (fileKeyRef !== undefined) return fileKeyValue(fileKeyRef, deps, sources.signal);
  if (from.secretKeyRef !== undefined) {
    const { name = '', key, optional = false } = from.secretKeyRef;
    const data = await sources.secret(name, optional);
    if (data === undefined) return undefined;
    const value = data.get(key);
    if (value !== undefined) return value;
    if (optional) return undefined;
    throw keyNotFound(key, 'Secret', ns, name);
  }
  return '';
}

/** Builds the environment of `container` (see the top of this file). */
export async function makeEnvironment(
  pod: Pod,
  container: Container,
  deps: EnvironmentDeps,
  signal: AbortSignal,
): Promise<Environment> {
  const ns = pod.metadata?.namespace ?? '';
  const source = pod.metadata?.annotations?.['kubernetes.io/config.source'];
  const isStatic = source !== undefined && source !== 'api';
  if (!isStatic && deps.servicesSynced?.() === false) {
    throw new EnvError(
      'BERTH_ENV_SERVICES_NOT_SYNCED',
      'services have not yet been read at least once, cannot construct envvars',
    );
  }
  const links = pod.spec?.enableServiceLinks ?? true;
  const services = [
    ...(links ? deps.services(ns) : []),
    ...(ns === 'default' && links ? [] : deps.services('default')),
  ];
  const svcEnv = serviceEnv(pod, services);
  const sources = new Sources(deps, ns, signal);
  const errors: InvalidEnvKeysError[] = [];
  // Variables of this container so far; they shadow service variables in expansion.
  const own = new Map<string, string>();

  for (const from of container.envFrom ?? []) {
    const prefix = from.prefix ?? '';
    const ref = from.configMapRef ?? from.secretRef;
    if (ref === undefined) continue;
    const kind = from.configMapRef !== undefined ? 'configMap' : 'secret';
    const name = ref.name ?? '';
    const optional = ref.optional ?? false;
    const data =
      kind === 'configMap'
        ? await sources.configMap(name, optional)
        : await sources.secret(name, optional);
    if (data === undefined) continue;
    const invalid: string[] = [];
    // Upstream walks a Go map (random order); sorted keys make the order reproducible.
    for (const [key, value] of [...data].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      const full = prefix + key;
      // v1.37 passes every key through (relaxed environment variable names are GA); only
      // a name no process environment can carry (with '=', or not printable) is skipped.
      if (!isRelaxedEnvVarName(full)) {
        invalid.push(full);
        continue;
      }
      own.set(full, value);
    }
    if (invalid.length > 0) errors.push(new InvalidEnvKeysError(invalid.sort(), kind, ns, name));
  }

  const mapping = mappingFor(own, svcEnv);
  for (const v of container.env ?? []) {
    if (!isRelaxedEnvVarName(v.name)) {
      throw new EnvError(
        'BERTH_ENV_INVALID_NAME',
        `Cannot set environment variable ${JSON.stringify(v.name)}: a name must be printable ASCII without "="`,
      );
    }
    let value: string | undefined;
    if (v.value !== undefined && v.value !== '') value = expand(v.value, mapping);
    else if (v.valueFrom !== undefined) value = await valueFrom(pod, container, v, deps, sources);
    else value = '';
    if (value === undefined) continue; // optional source or key missing: no variable
    own.set(v.name, value);
  }

  const merged = new Map(svcEnv);
  for (const [k, v] of own) merged.set(k, v);
  return { env: [...merged].map(([name, value]) => ({ name, value })), errors };
}

/** The environment as a map (for subPathExpr and command expansion). */
export function envMap(env: readonly EnvEntry[]): Map<string, string> {
  return new Map(env.map((e) => [e.name, e.value]));
}

/** command and args with `$(VAR)` expanded from the container's environment. */
export function expandCommand(
  container: Container,
  env: readonly EnvEntry[],
): { command: string[]; args: string[] } {
  const mapping = mappingFor(envMap(env));
  return {
    command: (container.command ?? []).map((c) => expand(c, mapping)),
    args: (container.args ?? []).map((a) => expand(a, mapping)),
  };
}
