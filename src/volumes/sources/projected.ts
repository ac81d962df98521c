/**
 * projected volumes (upstream pkg/volume/projected): configMap, secret, downwardAPI,
 * serviceAccountToken, clusterTrustBundle and podCertificate sources merged into one directory on tmpfs. Every source is
 * collected, failures are reported together (as upstream's error aggregate), and two
 * sources writing the same path are refused.
 */
import type { Pod, ProjectedVolumeSource, Volume } from 'kubernetes-types/core/v1.js';
import {
  VolumeError,
  type DownwardResolver,
  type Payload,
  type ResolvedPayload,
} from '../types.ts';
import { configMapPayload } from './configmap.ts';
import { downwardApiPayload } from './downward-api.ts';
import {
  checkPayloadPath,
  DEFAULT_MODE,
  mergePayload,
  PLUGIN_PROJECTED,
  readObject,
  type MutablePayload,
  type ObjectReader,
} from './payload.ts';
import { secretPayload } from './secret.ts';
import { DEFAULT_TOKEN_EXPIRATION_SECONDS, type ServiceAccountTokens } from './token-manager.ts';
import { DisabledTrustBundles, type ClusterTrustBundles } from './trust-bundles.ts';
import {
  DisabledPodCertificates,
  podCertificateOf,
  type PodCertificateProjection,
  type PodCertificates,
} from './pod-certificates.ts';

/** What a projected volume reads from. */
export interface ProjectedDeps {
  readonly objects: ObjectReader;
  readonly tokens: ServiceAccountTokens;
  readonly downward: DownwardResolver;
  /** Default: the projection is off (upstream's message for every bundle). */
  readonly trustBundles?: ClusterTrustBundles;
  /** Default: podCertificate projections are off (upstream's NoOpManager). */
  readonly podCertificates?: PodCertificates;
}

/** The service account a pod runs as (the apiserver defaults it to "default"). */
export function podServiceAccount(pod: Pod): string {
  const name = pod.spec?.serviceAccountName ?? pod.spec?.serviceAccount ?? '';
  return name === '' ? 'default' : name;
}

async function tokenPayload(
  pod: Pod,
  source: NonNullable<NonNullable<ProjectedVolumeSource['sources']>[number]['serviceAccountToken']>,
  defaultMode: number,
  tokens: ServiceAccountTokens,
  signal: AbortSignal,
): Promise<Payload> {
  checkPayloadPath(source.path, 'serviceAccountToken');
  const audience = source.audience ?? '';
  const token = await tokens.getToken(
    {
      namespace: pod.metadata?.namespace ?? 'default',
      serviceAccount: podServiceAccount(pod),
      audiences: audience === '' ? [] : [audience],
      expirationSeconds: source.expirationSeconds ?? DEFAULT_TOKEN_EXPIRATION_SECONDS,
      pod: { name: pod.metadata?.name ?? '', uid: pod.metadata?.uid ?? '' },
    },
    signal,
  );
  // As upstream: with an fsGroup the token starts 0600 and the ownership step adds group
  // read, so the token is never readable by other users of the node.
  const mode = pod.spec?.securityContext?.fsGroup === undefined ? defaultMode & 0o777 : 0o600;
  return new Map([[source.path, { data: Buffer.from(token.token, 'utf8'), mode }]]);
}

type TrustBundleSource = NonNullable<Source['clusterTrustBundle']>;

async function trustBundlePayload(
  pod: Pod,
  source: TrustBundleSource,
  defaultMode: number,
  deps: ProjectedDeps,
  signal: AbortSignal,
): Promise<Payload> {
  checkPayloadPath(source.path, 'clusterTrustBundle');
  const bundles = deps.trustBundles ?? new DisabledTrustBundles();
  const allowMissing = source.optional === true;
  let data: Buffer;
  if (source.name !== undefined) {
    data = await bundles.byName(source.name, allowMissing, signal);
  } else if (source.signerName !== undefined) {
    data = await bundles.bySigner(source.signerName, source.labelSelector, allowMissing, signal);
  } else {
    throw new VolumeError(
      'BERTH_VOLUME_INVALID',
      'ClusterTrustBundle projection requires either name or signerName to be set',
    );
  }
  // As upstream: with an fsGroup the file starts 0600 and ownership adds group read.
  const mode = pod.spec?.securityContext?.fsGroup === undefined ? defaultMode & 0o777 : 0o600;
  return new Map([[source.path, { data, mode }]]);
}

/** upstream's podCertificate payload: key, chain and the two together, each where asked. */
function podCertificatePayload(
  pod: Pod,
  volume: Volume,
  index: number,
  source: PodCertificateProjection,
  defaultMode: number,
  deps: ProjectedDeps,
): Payload {
  const paths = [source.credentialBundlePath, source.keyPath, source.certificateChainPath];
  for (const p of paths) if (p !== undefined && p !== '') checkPayloadPath(p, 'podCertificate');
  const { key, chain } = (deps.podCertificates ?? new DisabledPodCertificates()).credentialBundle(
    pod,
    volume.name,
    index,
  );
  const mode = pod.spec?.securityContext?.fsGroup === undefined ? defaultMode & 0o777 : 0o600;
  const out = new Map<string, { data: Buffer; mode: number }>();
  if (source.credentialBundlePath !== undefined && source.credentialBundlePath !== '') {
    out.set(source.credentialBundlePath, { data: Buffer.concat([key, chain]), mode });
  }
  if (source.keyPath !== undefined && source.keyPath !== '') {
    out.set(source.keyPath, { data: key, mode });
  }
  if (source.certificateChainPath !== undefined && source.certificateChainPath !== '') {
    out.set(source.certificateChainPath, { data: chain, mode });
  }
  return out;
}

type Source = NonNullable<ProjectedVolumeSource['sources']>[number];

async function sourcePayload(
  pod: Pod,
  volume: Volume,
  index: number,
  source: Source,
  defaultMode: number,
  deps: ProjectedDeps,
  signal: AbortSignal,
): Promise<Payload> {
  const podCertificate = podCertificateOf(source);
  if (podCertificate !== undefined) {
    return podCertificatePayload(pod, volume, index, podCertificate, defaultMode, deps);
  }
  const namespace = pod.metadata?.namespace ?? 'default';
  if (source.configMap !== undefined) {
    const name = source.configMap.name ?? '';
    const object = await readObject(deps.objects, 'configmap', namespace, name, signal);
    return configMapPayload(name, object, {
      items: source.configMap.items,
      defaultMode,
      optional: source.configMap.optional === true,
    });
  }
  if (source.secret !== undefined) {
    const name = source.secret.name ?? '';
    const object = await readObject(deps.objects, 'secret', namespace, name, signal);
    return secretPayload(name, object, {
      items: source.secret.items,
      defaultMode,
      optional: source.secret.optional === true,
    });
  }
  if (source.downwardAPI !== undefined) {
    return downwardApiPayload(pod, source.downwardAPI.items ?? [], defaultMode, deps.downward);
  }
  if (source.serviceAccountToken !== undefined) {
    return tokenPayload(pod, source.serviceAccountToken, defaultMode, deps.tokens, signal);
  }
  if (source.clusterTrustBundle !== undefined) {
    return trustBundlePayload(pod, source.clusterTrustBundle, defaultMode, deps, signal);
  }
  throw new VolumeError(
    'BERTH_VOLUME_INVALID',
    `Cannot project source ${JSON.stringify(Object.keys(source))}: berth does not know it`,
  );
}

/** Resolves a projected volume of `pod`. */
export async function resolveProjectedVolume(
  pod: Pod,
  volume: Volume,
  source: ProjectedVolumeSource,
  deps: ProjectedDeps,
  signal: AbortSignal,
): Promise<ResolvedPayload> {
  const defaultMode = source.defaultMode ?? DEFAULT_MODE;
  const payload: MutablePayload = new Map();
  const errors: unknown[] = [];
  for (const [index, item] of (source.sources ?? []).entries()) {
    try {
      const files = await sourcePayload(pod, volume, index, item, defaultMode, deps, signal);
      mergePayload(payload, files, volume.name);
    } catch (err) {
      if (signal.aborted) throw err;
      errors.push(err);
    }
  }
  if (errors.length > 0) throw aggregate(errors);
  return { payload, medium: 'memory', plugin: PLUGIN_PROJECTED };
}

/** One error as is; several as `[a, b]` (upstream's aggregate) with the first one's code. */
function aggregate(errors: readonly unknown[]): VolumeError {
  const volumeErrors = errors.map((err) =>
    err instanceof VolumeError
      ? err
      : new VolumeError(
          'BERTH_VOLUME_SOURCE_ERROR',
          err instanceof Error ? err.message : String(err),
          {
            cause: err,
          },
        ),
  );
  const [first] = volumeErrors;
  if (first === undefined || volumeErrors.length === 1) {
    return first ?? new VolumeError('BERTH_VOLUME_SOURCE_ERROR', 'unknown error');
  }
  return new VolumeError(first.code, `[${volumeErrors.map((e) => e.message).join(', ')}]`, {
    cause: new AggregateError(volumeErrors),
  });
}
