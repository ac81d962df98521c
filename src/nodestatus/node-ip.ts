/**
 * The node's address when --node-ip is not given, chosen as upstream's NodeAddress
 * setter (pkg/kubelet/nodestatus/setters.go) chooses it without a cloud provider:
 *   1. the hostname override, when it is an IP address;
 *   2. the first address the node name resolves to that is a valid node IP (not
 *      loopback, link-local or multicast, and on one of this host's interfaces), IPv4
 *      first;
 *   3. the IPv4 address of the interface that holds the default route
 *      (utilnet.ResolveBindAddress → ChooseHostInterface).
 * A node that registers as 127.0.0.1 could not be reached by the API server of any
 * other machine, which a kubeadm cluster's workers and `kubectl logs` need.
 */
import { lookup } from 'node:dns/promises';
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';

/** Seams for tests; the defaults ask the machine. */
export interface NodeIPSources {
  /** Every address `name` resolves to (getaddrinfo). */
  readonly resolve?: (name: string) => Promise<readonly string[]>;
  /** /proc/net/route's text. */
  readonly routes?: () => Promise<string>;
  readonly interfaces?: () => NodeJS.Dict<NetworkInterfaceInfo[]>;
}

/** Upstream's validateNodeIP: no loopback, link-local, multicast or unspecified address. */
export function isValidNodeIP(ip: string): boolean {
  const family = isIP(ip);
  if (family === 4) {
    const [a = 0, b = 0] = ip.split('.').map(Number);
    return !(a === 127 || a === 0 || (a === 169 && b === 254) || (a >= 224 && a <= 239));
  }
  if (family === 6) {
    const lower = ip.toLowerCase();
    return !(
      lower === '::1' ||
      lower === '::' ||
      lower.startsWith('fe8') ||
      lower.startsWith('fe9') ||
      lower.startsWith('fea') ||
      lower.startsWith('feb') ||
      lower.startsWith('ff')
    );
  }
  return false;
}

/** The interface of the IPv4 default route in /proc/net/route, lowest metric first. */
export function defaultRouteInterface(routes: string): string | undefined {
  let best: { iface: string; metric: number } | undefined;
  for (const line of routes.split('\n').slice(1)) {
    const [iface, destination, , flags, , , metric, mask] = line.trim().split(/\s+/);
    if (iface === undefined || destination !== '00000000' || mask !== '00000000') continue;
    // RTF_UP (0x1): a route that is down carries no traffic.
    if ((parseInt(flags ?? '0', 16) & 0x1) === 0) continue;
    const m = Number(metric ?? 0);
    if (best === undefined || m < best.metric) best = { iface, metric: m };
  }
  return best?.iface;
}

/** The node's address by upstream's rules (see the top of this file), or undefined. */
export async function detectNodeIP(
  nodeName: string,
  hostnameOverride: string | null,
  sources: NodeIPSources = {},
): Promise<string | undefined> {
  if (hostnameOverride !== null && isIP(hostnameOverride) !== 0) return hostnameOverride;
  const resolve =
    sources.resolve ??
    (async (name: string) =>
      (await lookup(name, { all: true }).catch(() => [])).map((a) => a.address));
  const interfaces = (sources.interfaces ?? networkInterfaces)();
  // validateNodeIP also wants the address on one of this host's interfaces.
  const local = new Set(
    Object.values(interfaces).flatMap((list) => (list ?? []).map((a) => a.address)),
  );
  const resolved = (await resolve(nodeName)).filter((ip) => isValidNodeIP(ip) && local.has(ip));
  const byName = resolved.find((ip) => isIP(ip) === 4) ?? resolved[0];
  if (byName !== undefined) return byName;
  const routes = await (sources.routes ?? (() => readFile('/proc/net/route', 'utf8')))().catch(
    () => '',
  );
  const iface = defaultRouteInterface(routes);
  if (iface === undefined) return undefined;
  const addrs = interfaces[iface] ?? [];
  return addrs.find((a) => a.family === 'IPv4' && isValidNodeIP(a.address))?.address;
}
