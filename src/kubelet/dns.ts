/**
 * A pod's resolver configuration, as CRI DNSConfig. ClusterFirst pods get the cluster
 * DNS servers and the namespace search path (ndots:5); pods with dnsPolicy Default, and
 * ClusterFirst pods on a node without clusterDNS (upstream's fallback, announced with a
 * MissingClusterDNS warning on the pod and on the node), get the node's resolv.conf.
 * Limits as upstream: 3 nameservers, 32 search domains.
 */
import { readFileSync } from 'node:fs';
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { cri } from '../cri/index.ts';

export interface ResolvConf {
  readonly servers: readonly string[];
  readonly searches: readonly string[];
  readonly options: readonly string[];
}

export function parseResolvConf(text: string): ResolvConf {
  const servers: string[] = [];
  let searches: string[] = [];
  const options: string[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/[#;].*$/, '').trim();
    const [key, ...rest] = line.split(/\s+/);
    if (key === 'nameserver' && rest[0] !== undefined) servers.push(rest[0]);
    else if (key === 'search' || key === 'domain') searches = rest;
    else if (key === 'options') options.push(...rest);
  }
  return { servers, searches, options };
}

export function readResolvConf(path: string): ResolvConf {
  try {
    return parseResolvConf(readFileSync(path, 'utf8'));
  } catch {
    return { servers: [], searches: [], options: [] };
  }
}

/** Upstream's resolver limits (glibc): 3 nameservers, 32 search domains, 2048 characters. */
const MAX_NAMESERVERS = 3;
const MAX_SEARCHES = 32;
const MAX_SEARCH_CHARS = 2048;

/** The Warning events upstream's DNS configurer emits, by reason. */
export type DnsEventReason = 'DNSConfigForming' | 'MissingClusterDNS';

/** Where the Warning events go: upstream tells the pod, and of MissingClusterDNS the node too. */
export interface DnsEvents {
  pod(reason: DnsEventReason, message: string): void;
  node(reason: DnsEventReason, message: string): void;
}

export interface PodDnsOptions {
  /** The node's resolver configuration (--resolv-conf). */
  readonly host: ResolvConf;
  /** The kubelet's clusterDNS; empty when not configured. */
  readonly clusterDNS: readonly string[];
  readonly clusterDomain: string;
  readonly events?: DnsEvents;
}

/**
 * Upstream's words, on the node; the pod's event prefixes them with the pod
 * (name_namespace(uid), as upstream's format.Pod) since a node event names no pod.
 */
const MISSING_CLUSTER_DNS =
  'kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.';

function missingClusterDNS(pod: Pod, events: DnsEvents | undefined): void {
  if (events === undefined) return;
  const m = pod.metadata ?? {};
  const desc = `${m.name ?? ''}_${m.namespace ?? ''}(${m.uid ?? ''})`;
  events.node('MissingClusterDNS', MISSING_CLUSTER_DNS);
  events.pod('MissingClusterDNS', `pod: ${JSON.stringify(desc)}. ${MISSING_CLUSTER_DNS}`);
}

/**
 * The pod's CRI DNS config. Computed each time a sandbox config is (sandbox creation and
 * every sync that starts containers), as upstream's GetPodDNS, so its events repeat as
 * upstream's do; the recorder aggregates them.
 */
export function podDnsConfig(pod: Pod, o: PodDnsOptions): cri.DNSConfig {
  const { host, clusterDNS, clusterDomain, events } = o;
  const warn = (message: string): void => events?.pod('DNSConfigForming', message);
  const declared = pod.spec?.dnsPolicy ?? 'ClusterFirst';
  const hostNetwork = pod.spec?.hostNetwork === true;
  // Upstream: ClusterFirst on the host network falls back to Default; ClusterFirstWithHostNet
  // is ClusterFirst everywhere.
  const policy =
    declared === 'ClusterFirst' && hostNetwork
      ? 'Default'
      : declared === 'ClusterFirstWithHostNet'
        ? 'ClusterFirst'
        : declared;
  const custom = pod.spec?.dnsConfig;
  let base: { servers: string[]; searches: string[]; options: string[] };
  if (policy === 'None') {
    base = { servers: [], searches: [], options: [] };
  } else if (policy === 'ClusterFirst' && clusterDNS.length > 0) {
    const ns = pod.metadata?.namespace ?? 'default';
    const domain = clusterDomain === '' ? 'cluster.local' : clusterDomain;
    base = {
      servers: [...clusterDNS],
      searches: [`${ns}.svc.${domain}`, `svc.${domain}`, domain, ...host.searches],
      options: ['ndots:5'],
    };
  } else {
    if (policy === 'ClusterFirst') missingClusterDNS(pod, events);
    base = { servers: [...host.servers], searches: [...host.searches], options: [...host.options] };
  }
  const allServers = [...base.servers, ...(custom?.nameservers ?? [])];
  const servers = allServers.slice(0, MAX_NAMESERVERS);
  if (servers.length < allServers.length)
    warn(
      `Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: ${servers.join(' ')}`,
    );
  const allSearches = [...new Set([...base.searches, ...(custom?.searches ?? [])])];
  const searches: string[] = [];
  let chars = 0;
  for (const d of allSearches) {
    if (searches.length === MAX_SEARCHES || chars + d.length + 1 > MAX_SEARCH_CHARS + 1) break;
    searches.push(d);
    chars += d.length + 1;
  }
  if (searches.length < allSearches.length)
    warn(
      `Search Line limits were exceeded, some search paths have been omitted, the applied search line is: ${searches.join(' ')}`,
    );
  // Options merge by name, the pod's dnsConfig winning (e.g. ndots:2 over ndots:5).
  const merged = new Map<string, string>();
  for (const o of base.options) merged.set(o.split(':')[0] ?? o, o);
  for (const o of custom?.options ?? []) {
    const name = o.name ?? '';
    if (name === '') continue;
    merged.set(name, o.value === undefined ? name : `${name}:${o.value}`);
  }
  return { servers, searches, options: [...merged.values()] };
}
