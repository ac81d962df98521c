/**
 * Docker-link style service variables, as upstream's kubelet makes them
 * (getServiceEnvVarMap + envvars.FromServices): for every service with a cluster IP,
 * `<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT`, `<NAME>_SERVICE_PORT_<PORTNAME>` for
 * named ports, `<NAME>_PORT` for the first port and `<NAME>_PORT_<port>_<PROTO>` with
 * `_PROTO`, `_PORT` and `_ADDR` for each port.
 *
 * Which services: those of the pod's namespace when enableServiceLinks (default true)
 * and always the `kubernetes` service of `default`, so in-cluster clients find the
 * apiserver; a same-named service of the pod's namespace wins over it.
 */
import type { Pod, Service } from 'kubernetes-types/core/v1.js';

/** The apiserver's services in the default namespace (upstream's masterServices). */
const MASTER_SERVICES: ReadonlySet<string> = new Set(['kubernetes']);
const DEFAULT_NAMESPACE = 'default';

/** Upper case with `-` as `_` (makeEnvVariableName). */
export function serviceEnvName(name: string): string {
  return name.replaceAll('-', '_').toUpperCase();
}

/** True when the service has a cluster IP (not headless "None", not unset). */
export function hasClusterIP(service: Service): boolean {
  const ip = service.spec?.clusterIP ?? '';
  return ip !== '' && ip !== 'None';
}

function joinHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The variables of one service, in upstream's order. */
export function serviceVariables(service: Service): [string, string][] {
  if (!hasClusterIP(service)) return [];
  const prefix = serviceEnvName(service.metadata?.name ?? '');
  const ip = service.spec?.clusterIP ?? '';
  const ports = service.spec?.ports ?? [];
  const out: [string, string][] = [[`${prefix}_SERVICE_HOST`, ip]];
  const first = ports[0];
  // Validation requires a port on every service with a cluster IP; be safe without one.
  if (first !== undefined) {
    out.push([`${prefix}_SERVICE_PORT`, String(first.port)]);
    for (const p of ports) {
      if (p.name !== undefined && p.name !== '') {
        out.push([`${prefix}_SERVICE_PORT_${serviceEnvName(p.name)}`, String(p.port)]);
      }
    }
  }
  ports.forEach((p, i) => {
    const proto = (p.protocol ?? 'TCP') || 'TCP';
    const lower = proto.toLowerCase();
    const url = `${lower}://${joinHostPort(ip, p.port)}`;
    if (i === 0) out.push([`${prefix}_PORT`, url]);
    const portPrefix = `${prefix}_PORT_${p.port}_${proto.toUpperCase()}`;
    out.push(
      [portPrefix, url],
      [`${portPrefix}_PROTO`, lower],
      [`${portPrefix}_PORT`, String(p.port)],
      [`${portPrefix}_ADDR`, ip],
    );
  });
  return out;
}

/** The services whose variables a pod in `namespace` gets, sorted by name. */
export function servicesForPod(
  namespace: string,
  enableServiceLinks: boolean,
  services: Iterable<Service>,
): Service[] {
  const byName = new Map<string, Service>();
  for (const service of services) {
    if (!hasClusterIP(service)) continue;
    const name = service.metadata?.name ?? '';
    const ns = service.metadata?.namespace ?? '';
    if (ns === DEFAULT_NAMESPACE && MASTER_SERVICES.has(name)) {
      if (!byName.has(name)) byName.set(name, service);
    } else if (ns === namespace && enableServiceLinks) {
      byName.set(name, service);
    }
  }
  // Upstream iterates a Go map (random order); sorting makes the env reproducible.
  return [...byName.values()].sort((a, b) => {
    const x = a.metadata?.name ?? '';
    const y = b.metadata?.name ?? '';
    return x < y ? -1 : x > y ? 1 : 0;
  });
}

/**
 * The service variables of `pod`. `services` may hold the services of every
 * namespace (or just the pod's and `default`); the rest are ignored.
 */
export function serviceEnv(pod: Pod, services: Iterable<Service>): Map<string, string> {
  const namespace = pod.metadata?.namespace ?? '';
  const links = pod.spec?.enableServiceLinks ?? true;
  const env = new Map<string, string>();
  for (const service of servicesForPod(namespace, links, services)) {
    for (const [k, v] of serviceVariables(service)) env.set(k, v);
  }
  return env;
}
