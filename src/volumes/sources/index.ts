/**
 * Content-volume sources: the payloads of configMap, secret, downwardAPI and projected
 * volumes (`ApiVolumeSources`), the watch-based object cache and the service-account
 * token manager they read from. Nothing here touches the filesystem: the volume
 * manager writes the payloads with its atomic writer.
 */
import type { Pod, Volume } from 'kubernetes-types/core/v1.js';
import { inNamespace, isNotFound, CONFIGMAPS, SECRETS, type KubeClient } from '../../kube/types.ts';
import type { Logger } from '../../util/logger.ts';
import type { DownwardResolver, ResolvedPayload, VolumeSourceResolver } from '../types.ts';
import { resolveConfigMapVolume } from './configmap.ts';
import { resolveDownwardApiVolume } from './downward-api.ts';
import type { KindObject, ObjectKind, ObjectReader } from './payload.ts';
import { resolveProjectedVolume } from './projected.ts';
import { resolveSecretVolume } from './secret.ts';
import type { ServiceAccountTokens } from './token-manager.ts';
import type { ClusterTrustBundles } from './trust-bundles.ts';
import type { PodCertificates } from './pod-certificates.ts';

export {
  WatchingObjectCache,
  type ObjectCacheOptions,
  type ObjectChangeListener,
} from './object-cache.ts';
export {
  DEFAULT_TOKEN_EXPIRATION_SECONDS,
  MIN_TOKEN_EXPIRATION_SECONDS,
  TokenManager,
  type ServiceAccountToken,
  type ServiceAccountTokens,
  type TokenManagerOptions,
  type TokenRequestParams,
} from './token-manager.ts';
export {
  DEFAULT_MODE,
  PLUGIN_CONFIGMAP,
  PLUGIN_DOWNWARD_API,
  PLUGIN_PROJECTED,
  PLUGIN_SECRET,
  checkPayloadPath,
  type ObjectKind,
  type ObjectReader,
} from './payload.ts';
export { podObjectRefs, type PodObjectRefs } from './pod-refs.ts';
export { podServiceAccount } from './projected.ts';
export {
  DisabledPodCertificates,
  PodCertificateManager,
  type PodCertificateManagerOptions,
  type PodCertificates,
} from './pod-certificates.ts';
export {
  DisabledTrustBundles,
  projectsTrustBundle,
  TrustBundleCache,
  type ClusterTrustBundles,
  type TrustBundleCacheOptions,
  type TrustBundleChangeListener,
} from './trust-bundles.ts';

export interface ApiVolumeSourcesOptions {
  readonly kube: KubeClient;
  /**
   * Where configMaps and secrets come from: the watch-based cache (upstream's default
   * strategy). Without one every read is a GET (strategy Get).
   */
  readonly cache?: ObjectReader;
  readonly tokens: ServiceAccountTokens;
  readonly downward: DownwardResolver;
  /** clusterTrustBundle projections (default: off, as with the gate disabled). */
  readonly trustBundles?: ClusterTrustBundles;
  /** podCertificate projections (default: off, upstream's NoOpManager). */
  readonly podCertificates?: PodCertificates;
  readonly logger: Logger;
}

/** Reads every object with a GET (configMapAndSecretChangeDetectionStrategy Get). */
export class DirectObjectReader implements ObjectReader {
  readonly #kube: KubeClient;
  constructor(kube: KubeClient) {
    this.#kube = kube;
  }
  async get<K extends ObjectKind>(
    kind: K,
    namespace: string,
    name: string,
    signal: AbortSignal,
  ): Promise<KindObject<K> | undefined> {
    const path = inNamespace(kind === 'configmap' ? CONFIGMAPS : SECRETS, namespace);
    try {
      return await this.#kube.get<KindObject<K>>(path, name, { signal });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }
}

/** The VolumeSourceResolver the volume manager is given (see the top of this file). */
export class ApiVolumeSources implements VolumeSourceResolver {
  readonly #objects: ObjectReader;
  readonly #tokens: ServiceAccountTokens;
  readonly #downward: DownwardResolver;
  readonly #trustBundles: ClusterTrustBundles | undefined;
  readonly #podCertificates: PodCertificates | undefined;
  readonly #log: Logger;

  constructor(options: ApiVolumeSourcesOptions) {
    this.#objects = options.cache ?? new DirectObjectReader(options.kube);
    this.#tokens = options.tokens;
    this.#downward = options.downward;
    this.#trustBundles = options.trustBundles;
    this.#podCertificates = options.podCertificates;
    this.#log = options.logger.child({ component: 'volume-sources' });
  }

  async payload(
    pod: Pod,
    volume: Volume,
    signal: AbortSignal,
  ): Promise<ResolvedPayload | undefined> {
    let resolved: ResolvedPayload | undefined;
    if (volume.configMap !== undefined) {
      resolved = await resolveConfigMapVolume(pod, volume.configMap, this.#objects, signal);
    } else if (volume.secret !== undefined) {
      resolved = await resolveSecretVolume(pod, volume.secret, this.#objects, signal);
    } else if (volume.downwardAPI !== undefined) {
      resolved = resolveDownwardApiVolume(pod, volume.downwardAPI, this.#downward);
    } else if (volume.projected !== undefined) {
      resolved = await resolveProjectedVolume(
        pod,
        volume,
        volume.projected,
        {
          objects: this.#objects,
          tokens: this.#tokens,
          downward: this.#downward,
          ...(this.#trustBundles !== undefined && { trustBundles: this.#trustBundles }),
          ...(this.#podCertificates !== undefined && {
            podCertificates: this.#podCertificates,
          }),
        },
        signal,
      );
    } else {
      return undefined;
    }
    // File names only: the content may be a secret.
    this.#log.debug('Resolved volume payload', {
      pod: `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`,
      podUID: pod.metadata?.uid ?? '',
      volume: volume.name,
      plugin: resolved.plugin,
      files: resolved.payload.size,
    });
    return resolved;
  }
}
