/**
 * AppArmor: whether the host enforces it, whether a pod asks for it (a profile other
 * than Unconfined in a security context, or the deprecated per-container annotation),
 * and the admission answer upstream gives a pod that asks on a host that cannot.
 */
import { readFile, stat } from 'node:fs/promises';
import type { AppArmorProfile, Container, Pod } from 'kubernetes-types/core/v1.js';

const ANNOTATION_PREFIX = 'container.apparmor.security.beta.kubernetes.io/';

/** As libcontainer decides it: the securityfs directory exists and the module says Y. */
export async function hostAppArmorEnabled(
  sys: { readonly securityfs: string; readonly parameter: string } = {
    securityfs: '/sys/kernel/security/apparmor',
    parameter: '/sys/module/apparmor/parameters/enabled',
  },
): Promise<boolean> {
  try {
    await stat(sys.securityfs);
    return (await readFile(sys.parameter, 'utf8')).startsWith('Y');
  } catch {
    return false;
  }
}

function allContainers(pod: Pod): Container[] {
  const spec = pod.spec;
  return [
    ...(spec?.initContainers ?? []),
    ...(spec?.containers ?? []),
    ...((spec?.ephemeralContainers ?? []) as Container[]),
  ];
}

function confines(profile: AppArmorProfile | undefined): boolean {
  return profile !== undefined && profile.type !== 'Unconfined';
}

/** True when the pod needs AppArmor enforced for any of its containers. */
export function appArmorRequired(pod: Pod): boolean {
  if (confines(pod.spec?.securityContext?.appArmorProfile)) return true;
  if (allContainers(pod).some((c) => confines(c.securityContext?.appArmorProfile))) return true;
  return Object.entries(pod.metadata?.annotations ?? {}).some(
    ([key, value]) => key.startsWith(ANNOTATION_PREFIX) && value !== 'unconfined',
  );
}

/** The container's effective profile: its own, else the pod's, else the annotation's. */
export function appArmorProfileOf(pod: Pod, container: Container): AppArmorProfile | undefined {
  const own = container.securityContext?.appArmorProfile;
  if (own !== undefined) return own;
  const podLevel = pod.spec?.securityContext?.appArmorProfile;
  if (podLevel !== undefined) return podLevel;
  const annotation = pod.metadata?.annotations?.[`${ANNOTATION_PREFIX}${container.name}`];
  if (annotation === undefined) return undefined;
  if (annotation === 'runtime/default') return { type: 'RuntimeDefault' };
  if (annotation === 'unconfined') return { type: 'Unconfined' };
  if (annotation.startsWith('localhost/'))
    return { type: 'Localhost', localhostProfile: annotation.slice('localhost/'.length) };
  return undefined;
}

/**
 * Why the pod cannot be admitted for AppArmor, or undefined. Only a pod still Pending
 * is checked, as upstream: one already running keeps running after a berth restart.
 */
export function appArmorRejection(pod: Pod, hostEnabled: boolean): string | undefined {
  const phase = pod.status?.phase ?? 'Pending';
  if (phase !== 'Pending' || !appArmorRequired(pod)) return undefined;
  if (!hostEnabled) return 'Cannot enforce AppArmor: AppArmor is not enabled on the host';
  for (const c of allContainers(pod)) {
    const profile = appArmorProfileOf(pod, c);
    if (profile?.type === 'Localhost' && (profile.localhostProfile ?? '').trim() === '')
      return `Cannot enforce AppArmor: invalid empty AppArmor profile name for container "${c.name}"`;
  }
  return undefined;
}
