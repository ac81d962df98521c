/**
 * Service-account tokens for CSI drivers that ask for them (CSIDriver spec.tokenRequests),
 * as upstream's csiMountMgr.podServiceAccountTokenAttrs: one token per requested audience,
 * bound to the pod, through the kubelet's token manager (cached and refreshed there),
 * handed to NodePublishVolume as one key whose value is the JSON of
 * map[audience]TokenRequestStatus ({"token", "expirationTimestamp"}), exactly as Go's
 * encoding/json renders it, so drivers written against upstream parse it.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import {
  DEFAULT_TOKEN_EXPIRATION_SECONDS,
  type ServiceAccountTokens,
} from '../sources/token-manager.ts';
import { VolumeError } from '../types.ts';
import type { DriverPolicy } from './api.ts';

/** The volume-context (or secrets) key upstream passes the tokens under. */
export const SERVICE_ACCOUNT_TOKENS_KEY = 'csi.storage.k8s.io/serviceAccount.tokens';

/** metav1.Time's JSON form: RFC 3339 in UTC, whole seconds. */
function goTime(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/**
 * The tokens attribute for `pod`, or undefined when the driver asks for none. Throws a
 * VolumeError when a token cannot be had (the publish is retried by the next sync).
 */
export async function serviceAccountTokenAttrs(
  tokens: ServiceAccountTokens | undefined,
  pod: Pod,
  policy: DriverPolicy,
  signal: AbortSignal,
): Promise<Record<string, string> | undefined> {
  if (policy.tokenRequests.length === 0) return undefined;
  if (tokens === undefined) {
    throw new VolumeError('BERTH_VOLUME_CSI', 'ServiceAccountTokenGetter is nil');
  }
  const namespace = pod.metadata?.namespace ?? 'default';
  const serviceAccount =
    pod.spec?.serviceAccountName !== undefined && pod.spec.serviceAccountName !== ''
      ? pod.spec.serviceAccountName
      : 'default';
  const out = new Map<string, { token: string; expirationTimestamp: string }>();
  for (const request of policy.tokenRequests) {
    const token = await tokens.getToken(
      {
        namespace,
        serviceAccount,
        audiences: request.audience === '' ? [] : [request.audience],
        expirationSeconds: request.expirationSeconds ?? DEFAULT_TOKEN_EXPIRATION_SECONDS,
        pod: { name: pod.metadata?.name ?? '', uid: pod.metadata?.uid ?? '' },
      },
      signal,
    );
    out.set(request.audience, {
      token: token.token,
      expirationTimestamp: goTime(token.expiresAt),
    });
  }
  // Go marshals a map with its keys sorted.
  const sorted = Object.fromEntries([...out].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  return { [SERVICE_ACCOUNT_TOKENS_KEY]: JSON.stringify(sorted) };
}
