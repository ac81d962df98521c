/**
 * The sysctl admission check (upstream pkg/kubelet/sysctl): a pod may only set sysctls
 * that are known to be namespaced (the safe set, plus the node's allowedUnsafeSysctls
 * names or `prefix*` patterns), and none of a namespace it shares with the host.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';

const SAFE_SYSCTLS = [
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
  'net.ipv4.tcp_rmem',
  'net.ipv4.tcp_wmem',
  'net.ipv4.tcp_slow_start_after_idle',
  'net.ipv4.tcp_notsent_lowat',
];

/** Upstream's NormalizeName: `net/ipv4/x` and `net.ipv4.x` are the same sysctl. */
export function normalizeSysctl(name: string): string {
  const first = name.search(/[./]/);
  if (first < 0 || name[first] === '.') return name;
  return name.replace(/[./]/g, (c) => (c === '/' ? '.' : '/'));
}

type Namespace = 'ipc' | 'net' | undefined;

function namespaceOf(sysctl: string): Namespace {
  if (sysctl.startsWith('net.')) return 'net';
  if (sysctl.startsWith('kernel.shm') || sysctl.startsWith('kernel.msg') || sysctl === 'kernel.sem')
    return 'ipc';
  if (sysctl.startsWith('fs.mqueue.')) return 'ipc';
  return undefined;
}

/** Why the pod's sysctls are forbidden (upstream's message), or undefined when they are fine. */
export function forbiddenSysctl(pod: Pod, allowedUnsafe: readonly string[]): string | undefined {
  for (const s of pod.spec?.securityContext?.sysctls ?? []) {
    const name = normalizeSysctl(s.name);
    const allowed =
      SAFE_SYSCTLS.includes(name) ||
      allowedUnsafe.some((p) =>
        p.endsWith('*')
          ? name.startsWith(normalizeSysctl(p.slice(0, -1)))
          : normalizeSysctl(p) === name,
      );
    if (!allowed) return `forbidden sysctl: "${name}" not allowlisted`;
    const ns = namespaceOf(name);
    if (ns === 'net' && pod.spec?.hostNetwork === true)
      return `forbidden sysctl: "${name}" not allowed with host net enabled`;
    if (ns === 'ipc' && pod.spec?.hostIPC === true)
      return `forbidden sysctl: "${name}" not allowed with host ipc enabled`;
  }
  return undefined;
}
