/**
 * A pod's hostname and domain as upstream derives them: spec.hostname or the pod name
 * (cut to 63 characters, without a trailing '-' or '.'), the domain
 * <subdomain>.<namespace>.svc.<clusterDomain> when spec.subdomain is set, and the
 * kernel hostname, which is the FQDN when setHostnameAsFQDN asks for it.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import { BerthError } from '../util/errors.ts';
import { podDomain } from './hosts-file.ts';

/** Linux's HOST_NAME_MAX: a longer FQDN cannot be the kernel hostname. */
const FQDN_MAX = 64;
const LABEL_MAX = 63;

export class PodHostnameError extends BerthError {
  constructor(message: string) {
    super('BERTH_POD_HOSTNAME', message);
  }
}

export interface PodHostname {
  readonly hostname: string;
  /** '' without spec.subdomain. */
  readonly domain: string;
}

/** The pod's hostname (at most 63 characters) and its domain. */
export function podHostnameAndDomain(pod: Pod, clusterDomain: string): PodHostname {
  const spec = pod.spec;
  let hostname = spec?.hostname ?? '';
  if (hostname === '') hostname = pod.metadata?.name ?? '';
  // Upstream cuts a long name and drops what would end the label badly.
  if (hostname.length > LABEL_MAX) hostname = hostname.slice(0, LABEL_MAX).replace(/[-.]+$/, '');
  return { hostname, domain: podDomain(pod, clusterDomain) };
}

/**
 * The hostname the runtime sets in the pod's UTS namespace: the FQDN when
 * setHostnameAsFQDN is true and the pod has a domain, else the short name. Throws
 * PodHostnameError, with upstream's message, for an FQDN longer than 64 characters.
 */
export function kernelHostname(pod: Pod, clusterDomain: string): string {
  const { hostname, domain } = podHostnameAndDomain(pod, clusterDomain);
  if (domain === '' || pod.spec?.setHostnameAsFQDN !== true) return hostname;
  const fqdn = `${hostname}.${domain}`;
  if (fqdn.length > FQDN_MAX)
    throw new PodHostnameError(
      `failed to construct FQDN from pod hostname and cluster domain, FQDN ${fqdn} is too long (${FQDN_MAX} characters is the max, ${fqdn.length} characters requested)`,
    );
  return fqdn;
}
