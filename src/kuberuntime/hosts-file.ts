/**
 * The content of the kubelet-managed /etc/hosts (upstream's managedHostsFileContent and
 * nodeHostsFileContent). A pod on the pod network gets the localhost lines, its IPs
 * with its hostname (and FQDN with a domain) and its hostAliases; a hostNetwork pod
 * gets the node's own /etc/hosts with the hostAliases appended, under a header that
 * says so. The caller writes it to the pod directory and bind-mounts it (see
 * `mountsHostsFile`).
 */
import type { Container, HostAlias, Pod } from 'kubernetes-types/core/v1.js';
import { BerthError } from '../util/errors.ts';
import { podHostnameAndDomain } from './hostname.ts';

export const ETC_HOSTS_PATH = '/etc/hosts';
const HEADER = '# Kubernetes-managed hosts file.\n';
const HEADER_HOST_NETWORK = '# Kubernetes-managed hosts file (host network).\n';
const LOCALHOST_LINES =
  '127.0.0.1\tlocalhost\n' +
  '::1\tlocalhost ip6-localhost ip6-loopback\n' +
  'fe00::0\tip6-localnet\n' +
  'fe00::0\tip6-mcastprefix\n' +
  'fe00::1\tip6-allnodes\n' +
  'fe00::2\tip6-allrouters\n';

export interface HostsFileOptions {
  /** The pod's IPs (for hostNetwork pods, the node's). */
  readonly podIPs: readonly string[];
  /** The pod's hostname and domain (kuberuntime/hostname.ts: podHostnameAndDomain). */
  readonly hostname: string;
  /** '' for none: then the pod's IPs carry the short hostname alone. */
  readonly domain: string;
  /** The node's /etc/hosts; required for hostNetwork pods. */
  readonly nodeHostsFile?: string;
}

function aliasLines(aliases: readonly HostAlias[] | undefined): string {
  if (aliases === undefined || aliases.length === 0) return '';
  const lines = aliases.map((a) => `${a.ip ?? ''}\t${(a.hostnames ?? []).join('\t')}\n`);
  return `\n# Entries added by HostAliases.\n${lines.join('')}`;
}

/** The /etc/hosts content for `pod` (see the top of this file). */
export function hostsFileContent(pod: Pod, options: HostsFileOptions): string {
  const aliases = aliasLines(pod.spec?.hostAliases);
  if (pod.spec?.hostNetwork === true) {
    if (options.nodeHostsFile === undefined) {
      // Upstream fails the pod when it cannot read the node's file; never invent one.
      throw new BerthError(
        'BERTH_HOSTS_FILE_NO_NODE_HOSTS',
        "Cannot make /etc/hosts for a hostNetwork pod as the node's /etc/hosts was not given",
      );
    }
    return HEADER_HOST_NETWORK + options.nodeHostsFile + aliases;
  }
  const { hostname, domain } = options;
  const names = domain === '' ? hostname : `${hostname}.${domain}\t${hostname}`;
  const own = options.podIPs.map((ip) => `${ip}\t${names}\n`).join('');
  return HEADER + LOCALHOST_LINES + own + aliases;
}

/**
 * Whether a container gets the managed /etc/hosts: only once the pod has an IP, and
 * not when the container mounts something at /etc/hosts itself.
 */
export function mountsHostsFile(container: Container, podIPs: readonly string[]): boolean {
  if (podIPs.length === 0) return false;
  return !(container.volumeMounts ?? []).some((m) => m.mountPath === ETC_HOSTS_PATH);
}

/** The managed /etc/hosts of a pod: its IPs and hostname, or the node's for hostNetwork. */
export function podHostsFile(
  pod: Pod,
  podIPs: readonly string[],
  node: {
    readonly nodeIPs: readonly string[];
    readonly nodeName: string;
    readonly clusterDomain: string;
  },
  nodeHosts: string,
): string {
  const hostNetwork = pod.spec?.hostNetwork === true;
  return hostsFileContent(pod, {
    podIPs: hostNetwork ? node.nodeIPs : podIPs,
    ...(hostNetwork
      ? { hostname: node.nodeName, domain: '' }
      : podHostnameAndDomain(pod, node.clusterDomain)),
    nodeHostsFile: nodeHosts,
  });
}
