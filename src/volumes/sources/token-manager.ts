/**
 * Service-account tokens for projected volumes through the TokenRequest API (upstream
 * pkg/kubelet/token). Tokens are cached per (namespace, service account, audiences,
 * expiration, bound pod) and refreshed once older than 80% of their lifetime or 24 h
 * (with up to 10 s of jitter, so a node's pods do not refresh in step). When a refresh
 * fails the old token is served, with an error log, for as long as it is valid.
 */
import type { TokenRequest } from 'kubernetes-types/authentication/v1.js';
import { inNamespace, SERVICEACCOUNTS, type KubeClient } from '../../kube/types.ts';
import type { Clock } from '../../util/clock.ts';
import type { Logger } from '../../util/logger.ts';
import { VolumeError } from '../types.ts';

/** Upstream's default expirationSeconds of a serviceAccountToken projection. */
export const DEFAULT_TOKEN_EXPIRATION_SECONDS = 3600;
/** The apiserver refuses shorter projected tokens. */
export const MIN_TOKEN_EXPIRATION_SECONDS = 600;

const MAX_TTL_MS = 24 * 60 * 60 * 1000;
const MAX_JITTER_MS = 10_000;
const GC_PERIOD_MS = 60_000;

/** What a projected token is requested for. */
export interface TokenRequestParams {
  readonly namespace: string;
  readonly serviceAccount: string;
  /** Empty: the apiserver's own audiences. */
  readonly audiences: readonly string[];
  readonly expirationSeconds: number;
  /** The pod the token is bound to (it dies with the pod). */
  readonly pod: { readonly name: string; readonly uid: string };
}

/** A token and when it expires (ms since the epoch). */
export interface ServiceAccountToken {
  readonly token: string;
  readonly expiresAt: number;
}

/** The narrow view projected volumes need. */
export interface ServiceAccountTokens {
  /** A valid token for `params`, from the cache or the TokenRequest API. Throws VolumeError. */
  getToken(params: TokenRequestParams, signal: AbortSignal): Promise<ServiceAccountToken>;
  /** Forgets the tokens bound to a pod (after its volumes are torn down). */
  deletePodTokens(podUid: string): void;
}

export interface TokenManagerOptions {
  readonly kube: KubeClient;
  readonly clock: Clock;
  readonly logger: Logger;
  /** For the refresh jitter (default Math.random). */
  readonly random?: () => number;
}

interface Entry {
  readonly token: string;
  readonly podUid: string;
  /** When the token was issued and expires (ms since the epoch). */
  readonly issuedAt: number;
  readonly expiresAt: number;
}

/** The TokenRequest-backed token cache (see the top of this file). */
export class TokenManager implements ServiceAccountTokens {
  readonly #kube: KubeClient;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #random: () => number;
  readonly #cache = new Map<string, Entry>();

  constructor(options: TokenManagerOptions) {
    this.#kube = options.kube;
    this.#clock = options.clock;
    this.#log = options.logger.child({ component: 'token-manager' });
    this.#random = options.random ?? Math.random;
  }

  /** Cached tokens (for tests and metrics). */
  get size(): number {
    return this.#cache.size;
  }

  async getToken(params: TokenRequestParams, signal: AbortSignal): Promise<ServiceAccountToken> {
    if (params.expirationSeconds < MIN_TOKEN_EXPIRATION_SECONDS) {
      throw new VolumeError(
        'BERTH_VOLUME_INVALID',
        `Cannot request a service account token as expirationSeconds must be at least ${MIN_TOKEN_EXPIRATION_SECONDS}: current value is ${params.expirationSeconds}`,
      );
    }
    const key = cacheKey(params);
    const cached = this.#cache.get(key);
    if (cached !== undefined && !this.#requiresRefresh(cached)) return toToken(cached);
    let fresh: Entry;
    try {
      fresh = await this.#request(params, signal);
    } catch (err) {
      if (signal.aborted) throw err;
      const message = err instanceof Error ? err.message : String(err);
      if (cached === undefined) {
        throw new VolumeError('BERTH_VOLUME_SOURCE_ERROR', `failed to fetch token: ${message}`, {
          cause: err,
        });
      }
      if (this.#expired(cached)) {
        throw new VolumeError(
          'BERTH_VOLUME_SOURCE_ERROR',
          `token ${key} expired and refresh failed: ${message}`,
          { cause: err },
        );
      }
      this.#log.error("Couldn't update token, serving the cached one", {
        cacheKey: key,
        expiresAt: new Date(cached.expiresAt).toISOString(),
        error: message,
      });
      return toToken(cached);
    }
    this.#cache.set(key, fresh);
    return toToken(fresh);
  }

  deletePodTokens(podUid: string): void {
    for (const [key, entry] of this.#cache) {
      if (entry.podUid === podUid) this.#cache.delete(key);
    }
  }

  /** Drops expired tokens (pods that vanished without a teardown). */
  cleanup(): void {
    for (const [key, entry] of this.#cache) {
      if (this.#expired(entry)) this.#cache.delete(key);
    }
  }

  /** Runs `cleanup` every minute until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await this.#clock.sleep(GC_PERIOD_MS, signal);
      } catch {
        return;
      }
      this.cleanup();
    }
  }

  async #request(params: TokenRequestParams, signal: AbortSignal): Promise<Entry> {
    const body: TokenRequest = {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      // The client addresses serviceaccounts/<name>/token by the body's name.
      metadata: { name: params.serviceAccount, namespace: params.namespace },
      spec: {
        audiences: [...params.audiences],
        expirationSeconds: params.expirationSeconds,
        boundObjectRef: {
          apiVersion: 'v1',
          kind: 'Pod',
          name: params.pod.name,
          uid: params.pod.uid,
        },
      },
    };
    const answer = await this.#kube.create<TokenRequest>(
      inNamespace(SERVICEACCOUNTS, params.namespace),
      body,
      { subresource: 'token', signal },
    );
    const token = answer.status?.token ?? '';
    const expiresAt = Date.parse(answer.status?.expirationTimestamp ?? '');
    if (token === '' || Number.isNaN(expiresAt)) {
      throw new VolumeError(
        'BERTH_VOLUME_SOURCE_ERROR',
        'Cannot use the TokenRequest answer as it has no token or expirationTimestamp',
      );
    }
    // The apiserver may shorten the lifetime (--service-account-max-token-expiration);
    // its answer's spec says what it granted.
    const seconds = answer.spec.expirationSeconds ?? params.expirationSeconds;
    return { token, podUid: params.pod.uid, issuedAt: expiresAt - seconds * 1000, expiresAt };
  }

  #expired(entry: Entry): boolean {
    return this.#clock.now() > entry.expiresAt;
  }

  #requiresRefresh(entry: Entry): boolean {
    const now = this.#clock.now();
    const jitter = Math.floor(this.#random() * (MAX_JITTER_MS / 1000)) * 1000;
    const ttl = entry.expiresAt - entry.issuedAt;
    if (now > entry.issuedAt + MAX_TTL_MS - jitter) return true;
    // Within the last 20% of the lifetime (plus jitter).
    if (now > entry.expiresAt - Math.floor((ttl * 20) / 100) - jitter) return true;
    // The clock went back past the issue time: the cached token may be from the future.
    return now < entry.issuedAt;
  }
}

function toToken(entry: Entry): ServiceAccountToken {
  return { token: entry.token, expiresAt: entry.expiresAt };
}

/** Safe to log: names and numbers only, never the token. */
function cacheKey(p: TokenRequestParams): string {
  return JSON.stringify([
    p.namespace,
    p.serviceAccount,
    p.audiences,
    p.expirationSeconds,
    p.pod.name,
    p.pod.uid,
  ]);
}
