/**
 * Registry credentials from a pod's imagePullSecrets (kubernetes.io/dockerconfigjson
 * and the older kubernetes.io/dockercfg), matched to an image's registry the way the
 * kubelet's credential keyring does: by host, with docker.io's aliases.
 */
import type { Secret } from 'kubernetes-types/core/v1.js';

export interface RegistryAuth {
  readonly username: string;
  readonly password: string;
  readonly serverAddress: string;
}

interface DockerAuthEntry {
  readonly auth?: string;
  readonly username?: string;
  readonly password?: string;
}

const DOCKER_HUB = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io']);

/** "https://index.docker.io/v1/" -> "index.docker.io"; "127.0.0.1:5000" stays. */
function hostOf(key: string): string {
  return key.replace(/^[a-z]+:\/\//i, '').split('/')[0] ?? key;
}

function sameRegistry(a: string, b: string): boolean {
  return a === b || (DOCKER_HUB.has(a) && DOCKER_HUB.has(b));
}

function entryAuth(key: string, e: DockerAuthEntry): RegistryAuth | undefined {
  if (e.username !== undefined && e.password !== undefined) {
    return { username: e.username, password: e.password, serverAddress: hostOf(key) };
  }
  if (e.auth !== undefined) {
    const decoded = Buffer.from(e.auth, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon > 0)
      return {
        username: decoded.slice(0, colon),
        password: decoded.slice(colon + 1),
        serverAddress: hostOf(key),
      };
  }
  return undefined;
}

/** Credentials in `secrets` for `registry` (host[:port]), in secret order. Malformed secrets are skipped. */
export function credentialsFor(secrets: readonly Secret[], registry: string): RegistryAuth[] {
  const out: RegistryAuth[] = [];
  for (const secret of secrets) {
    const raw =
      secret.type === 'kubernetes.io/dockercfg'
        ? secret.data?.['.dockercfg']
        : secret.data?.['.dockerconfigjson'];
    if (raw === undefined) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.from(raw, 'base64').toString('utf8'));
    } catch {
      continue;
    }
    if (typeof parsed !== 'object' || parsed === null) continue;
    const auths = (
      secret.type === 'kubernetes.io/dockercfg' ? parsed : (parsed as { auths?: unknown }).auths
    ) as Record<string, DockerAuthEntry> | undefined;
    if (typeof auths !== 'object') continue;
    for (const [key, entry] of Object.entries(auths)) {
      if (!sameRegistry(hostOf(key), registry)) continue;
      const auth = entryAuth(key, entry);
      if (auth !== undefined) out.push(auth);
    }
  }
  return out;
}
