/**
 * A pod's hostname and domain as upstream derives them (GeneratePodHostNameAndDomain):
 * spec.hostnameOverride when set (a DNS subdomain, with no domain at all: the pod is
 * then not addressable by <hostname>.<subdomain>), else spec.hostname or the pod name
 * (cut to 63 characters, without a trailing '-' or '.') with the domain
 * <subdomain>.<namespace>.svc.<clusterDomain> when spec.subdomain is set; and the
 * kernel hostname, which is the FQDN when setHostnameAsFQDN asks for it. The sandbox's
 * hostname and the managed /etc/hosts both come from here, so they always agree.
 */
import type { Pod, PodSpec } from 'kubernetes-types/core/v1.js';
import { BerthError } from '../util/errors.ts';

/** Linux's HOST_NAME_MAX: a longer FQDN cannot be the kernel hostname. */
const FQDN_MAX = 64;
const LABEL_MAX = 63;
const SUBDOMAIN_MAX = 253;
const LABEL_FMT = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const SUBDOMAIN_FMT = `${LABEL_FMT}(\\.${LABEL_FMT})*`;
const LABEL_RE = new RegExp(`^${LABEL_FMT}$`);
const SUBDOMAIN_RE = new RegExp(`^${SUBDOMAIN_FMT}$`);

export class PodHostnameError extends BerthError {
  constructor(message: string) {
    super('BERTH_POD_HOSTNAME', message);
  }
}

export interface PodHostname {
  readonly hostname: string;
  /** '' without spec.subdomain, and always '' with spec.hostnameOverride. */
  readonly domain: string;
}

/** spec.hostnameOverride (v1.34+, GA in v1.37) is newer than the kubernetes-types in use. */
type SpecWithOverride = PodSpec & { readonly hostnameOverride?: string };

/** Why `value` is not a DNS-1123 label, worded as apimachinery's IsDNS1123Label. */
function dns1123LabelErrors(value: string): string[] {
  const errs: string[] = [];
  if (value.length > LABEL_MAX) errs.push(`must be no more than ${LABEL_MAX} characters`);
  if (!LABEL_RE.test(value)) {
    errs.push(
      SUBDOMAIN_RE.test(value)
        ? 'must not contain dots'
        : `a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '${LABEL_FMT}')`,
    );
  }
  return errs;
}

/** Why `value` is not a DNS-1123 subdomain, worded as apimachinery's IsDNS1123Subdomain. */
function dns1123SubdomainErrors(value: string): string[] {
  const errs: string[] = [];
  if (value.length > SUBDOMAIN_MAX) errs.push(`must be no more than ${SUBDOMAIN_MAX} characters`);
  if (!SUBDOMAIN_RE.test(value)) {
    errs.push(
      `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '${SUBDOMAIN_FMT}')`,
    );
  }
  return errs;
}

/**
 * The API server validates these fields already; the kubelet checks again (as upstream)
 * because whatever it gets becomes a kernel hostname and an /etc/hosts line.
 */
function checked(field: string, kind: string, value: string, errs: string[]): string {
  if (errs.length > 0)
    throw new PodHostnameError(
      `pod ${field} ${JSON.stringify(value)} is not a valid ${kind}: ${errs.join(';')}`,
    );
  return value;
}

/** Upstream cuts a long hostname to 63 characters and drops what would end it badly. */
function truncated(pod: Pod, hostname: string): string {
  if (hostname.length <= LABEL_MAX) return hostname;
  const cut = hostname.slice(0, LABEL_MAX).replace(/[-.]+$/, '');
  if (cut === '')
    throw new PodHostnameError(
      `hostname for pod ${JSON.stringify(pod.metadata?.name ?? '')} was invalid: ${JSON.stringify(hostname)}`,
    );
  return cut;
}

/**
 * The pod's hostname (at most 63 characters) and its domain. Throws PodHostnameError,
 * with upstream's message, for a hostnameOverride, hostname or subdomain the API should
 * have refused.
 */
export function podHostnameAndDomain(pod: Pod, clusterDomain: string): PodHostname {
  const spec = pod.spec as SpecWithOverride | undefined;
  const override = spec?.hostnameOverride;
  if (override !== undefined) {
    const valid = checked(
      'HostnameOverride',
      'DNS subdomain',
      override,
      dns1123SubdomainErrors(override),
    );
    return { hostname: truncated(pod, valid), domain: '' };
  }
  let hostname = pod.metadata?.name ?? '';
  const specHostname = spec?.hostname ?? '';
  if (specHostname !== '')
    hostname = checked('Hostname', 'DNS label', specHostname, dns1123LabelErrors(specHostname));
  const subdomain = spec?.subdomain ?? '';
  if (subdomain === '') return { hostname: truncated(pod, hostname), domain: '' };
  checked('Subdomain', 'DNS label', subdomain, dns1123LabelErrors(subdomain));
  return {
    hostname: truncated(pod, hostname),
    domain: `${subdomain}.${pod.metadata?.namespace ?? ''}.svc.${clusterDomain}`,
  };
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
