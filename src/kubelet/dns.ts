/**
 * A pod's resolver configuration, as CRI DNSConfig. ClusterFirst pods get the cluster
 * DNS servers and the namespace search path (ndots:5); pods with dnsPolicy Default, and
 * ClusterFirst pods on a node without clusterDNS (upstream's fallback), get the
 * node's resolv.conf. Limits as upstream: 3 nameservers, 32 search domains.
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

export function podDnsConfig(
  pod: Pod,
  host: ResolvConf,
  clusterDNS: readonly string[],
  clusterDomain: string,
): cri.DNSConfig {
  const policy = pod.spec?.dnsPolicy ?? 'ClusterFirst';
  const custom = pod.spec?.dnsConfig;
  let base: { servers: string[]; searches: string[]; options: string[] };
  const clusterFirst =
    policy === 'ClusterFirst' ||
    (policy === 'ClusterFirstWithHostNet' && pod.spec?.hostNetwork === true);
  if (policy === 'None') {
    base = { servers: [], searches: [], options: [] };
  } else if (clusterFirst && clusterDNS.length > 0) {
    const ns = pod.metadata?.namespace ?? 'default';
    const domain = clusterDomain === '' ? 'cluster.local' : clusterDomain;
    base = {
      servers: [...clusterDNS],
      searches: [`${ns}.svc.${domain}`, `svc.${domain}`, domain, ...host.searches],
      options: ['ndots:5'],
    };
  } else {
    base = { servers: [...host.servers], searches: [...host.searches], options: [...host.options] };
  }
  const servers = [...base.servers, ...(custom?.nameservers ?? [])].slice(0, 3);
  const searches = [...new Set([...base.searches, ...(custom?.searches ?? [])])].slice(0, 32);
  const options = [
    ...base.options,
    ...(custom?.options ?? []).map((o) =>
      o.value === undefined ? (o.name ?? '') : `${o.name ?? ''}:${o.value}`,
    ),
  ].filter((o) => o !== '');
  return { servers, searches, options };
}
