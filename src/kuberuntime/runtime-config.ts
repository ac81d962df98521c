/**
 * Turns a pod and its containers into CRI sandbox and container configs, with the
 * labels, annotations and log paths upstream uses (kuberuntime/labels.ts), the pod's
 * cgroup under the QoS hierarchy, namespaces, resources and security context.
 */
import { isAbsolute, resolve } from 'node:path';
import type { AppArmorProfile, Container, Pod, SeccompProfile } from 'kubernetes-types/core/v1.js';
import { appArmorProfileOf } from '../admission/apparmor.ts';
import { cri } from '../cri/index.ts';
import {
  containerAnnotations,
  containerLabels,
  containerLogPath,
  podLogsDirectory,
  sandboxAnnotations,
  sandboxLabels,
} from '../container/labels.ts';
import { kernelHostname } from './hostname.ts';
import { hugepageLimits } from './hugepages.ts';
import { containerOomScoreAdjust, containerUnified, type UnifiedOptions } from './memory-qos.ts';
import { qosClassOf, type QosClass } from '../container/qos.ts';
import { isPodLevelResourcesSet, podLevelResources } from '../container/pod-level.ts';
import { BerthError } from '../util/errors.ts';
import { milliCpu, parseQuantity } from '../util/quantity.ts';

export { qosClassOf, type QosClass };

export interface RuntimeConfigOptions {
  readonly podLogsDir: string;
  /** The kubelet's cgroupRoot ('' or '/' for the root). */
  readonly cgroupRoot: string;
  readonly cgroupsPerQOS: boolean;
  readonly nodeName: string;
  /** The cluster's DNS domain (the pod FQDN's suffix). */
  readonly clusterDomain: string;
  /** The pod's resolver configuration (kubelet/dns.ts). */
  readonly dns: (pod: Pod) => cri.DNSConfig | undefined;
  /** The pod cgroup in the runtime's driver naming (cm/pod-cgroups.ts); default: cgroupfs form. */
  readonly cgroupParent?: (pod: Pod) => string;
  /** Where Localhost seccomp profiles live (upstream: <rootDir>/seccomp). */
  readonly seccompProfileRoot?: string;
  /** seccompDefault: RuntimeDefault instead of Unconfined when a pod sets nothing. */
  readonly seccompDefault?: boolean;
  /** The node's hugepages-<size> resources (its capacity): each gets a CRI limit. */
  readonly hugePageSizes?: () => readonly string[];
  /** The node's memory capacity in bytes (Burstable containers' OOM score adjust). */
  readonly memoryCapacityBytes?: () => number | undefined;
  /** cgroup v2 keys of a container's resources (memory-qos.ts); absent: none (v1). */
  readonly unified?: () => UnifiedOptions;
}

export type SeccompOptions = Pick<RuntimeConfigOptions, 'seccompProfileRoot' | 'seccompDefault'>;
/** What a container's config takes from the node beyond the pod. */
export type ContainerConfigOptions = SeccompOptions &
  Pick<RuntimeConfigOptions, 'hugePageSizes' | 'memoryCapacityBytes' | 'unified'>;

/**
 * The CRI seccomp profile of a container (or, without one, of the pod): upstream's
 * RuntimeDefault / Unconfined / Localhost, the last resolved under seccompProfileRoot
 * and refused if it would leave it.
 */
export function seccompProfile(
  profile: SeccompProfile | undefined,
  o: SeccompOptions,
): cri.SecurityProfile {
  const type = profile?.type ?? (o.seccompDefault === true ? 'RuntimeDefault' : 'Unconfined');
  switch (type) {
    case 'RuntimeDefault':
      return { profileType: cri.SecurityProfile_ProfileType.RuntimeDefault, localhostRef: '' };
    case 'Localhost': {
      const name = profile?.localhostProfile ?? '';
      const root = o.seccompProfileRoot ?? '/var/lib/kubelet/seccomp';
      const full = resolve(root, name);
      if (name === '' || isAbsolute(name) || !full.startsWith(`${root}/`))
        throw new Error(
          `Cannot use the Localhost seccomp profile ${JSON.stringify(name)}: it must be a relative path below ${root}`,
        );
      return { profileType: cri.SecurityProfile_ProfileType.Localhost, localhostRef: full };
    }
    default:
      return { profileType: cri.SecurityProfile_ProfileType.Unconfined, localhostRef: '' };
  }
}

// Upstream's default masked and read-only /proc and /sys paths (runtime default).
const MASKED_PATHS = [
  '/proc/asound',
  '/proc/acpi',
  '/proc/kcore',
  '/proc/keys',
  '/proc/latency_stats',
  '/proc/timer_list',
  '/proc/timer_stats',
  '/proc/sched_debug',
  '/proc/scsi',
  '/sys/firmware',
  '/sys/devices/virtual/powercap',
];
const READONLY_PATHS = ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'];

/** `<cgroupRoot>/kubepods[/burstable|/besteffort]/pod<uid>` with cgroupsPerQOS. */
export function podCgroupParent(
  pod: Pod,
  o: Pick<RuntimeConfigOptions, 'cgroupRoot' | 'cgroupsPerQOS'>,
): string {
  const root = o.cgroupRoot === '' || o.cgroupRoot === '/' ? '' : o.cgroupRoot.replace(/\/$/, '');
  if (!o.cgroupsPerQOS) return root === '' ? '/' : root;
  const qos = qosClassOf(pod);
  const tier = qos === 'Guaranteed' ? '' : `/${qos.toLowerCase()}`;
  return `${root}/kubepods${tier}/pod${pod.metadata?.uid ?? ''}`;
}

/** The pod's supplementalGroups, then its fsGroup (upstream adds it so volumes are usable). */
function supplementalGroups(pod: Pod): bigint[] {
  const sc = pod.spec?.securityContext;
  const groups = [...(sc?.supplementalGroups ?? [])];
  if (sc?.fsGroup !== undefined && !groups.includes(sc.fsGroup)) groups.push(sc.fsGroup);
  return groups.map((g) => BigInt(g));
}

/**
 * The pod's namespaces; `userns` is the pod's user namespace from the userns manager
 * (NODE, or POD with its mappings), absent where none is wired (tests).
 */
function namespaceOptions(pod: Pod, userns?: cri.UserNamespace): cri.NamespaceOption {
  const s = pod.spec;
  return cri.NamespaceOption.fromPartial({
    ...(userns !== undefined && { usernsOptions: userns }),
    network: s?.hostNetwork === true ? cri.NamespaceMode.NODE : cri.NamespaceMode.POD,
    pid:
      s?.hostPID === true
        ? cri.NamespaceMode.NODE
        : s?.shareProcessNamespace === true
          ? cri.NamespaceMode.POD
          : cri.NamespaceMode.CONTAINER,
    ipc: s?.hostIPC === true ? cri.NamespaceMode.NODE : cri.NamespaceMode.POD,
  });
}

function dnsOf(pod: Pod, o: RuntimeConfigOptions): { dnsConfig?: cri.DNSConfig } {
  const dns = o.dns(pod);
  return dns === undefined ? {} : { dnsConfig: dns };
}

function sandboxSeccomp(pod: Pod, o: SeccompOptions): cri.SecurityProfile | undefined {
  try {
    return seccompProfile(pod.spec?.securityContext?.seccompProfile, o);
  } catch {
    // A bad pod-level Localhost profile fails each container (CreateContainerConfigError).
    return undefined;
  }
}

/**
 * The pod's CRI sandbox config. `userns` is the pod's user namespace
 * (UserNamespaceManager.getOrCreateUserNamespaceMappings); a `hostUsers: false` pod
 * without one is refused, never run in the host's user namespace instead.
 */
export function sandboxConfig(
  pod: Pod,
  attempt: number,
  o: RuntimeConfigOptions,
  userns?: cri.UserNamespace,
): cri.PodSandboxConfig {
  const meta = pod.metadata ?? {};
  const spec = pod.spec;
  checkUserNamespace(pod, userns);
  const portMappings = (spec?.containers ?? []).flatMap((c) =>
    (c.ports ?? [])
      .filter((p) => p.hostPort !== undefined && p.hostPort > 0)
      .map((p) => ({
        protocol:
          p.protocol === 'UDP'
            ? cri.Protocol.UDP
            : p.protocol === 'SCTP'
              ? cri.Protocol.SCTP
              : cri.Protocol.TCP,
        containerPort: p.containerPort,
        hostPort: p.hostPort ?? 0,
        hostIp: p.hostIP ?? '',
      })),
  );
  // A hostNetwork pod shares the node's UTS namespace: the runtime must not set a hostname
  // (runc refuses to without a private UTS namespace), as upstream leaves it empty.
  const hostname = spec?.hostNetwork === true ? '' : kernelHostname(pod, o.clusterDomain);
  const privileged = (spec?.containers ?? []).some((c) => c.securityContext?.privileged === true);
  return cri.PodSandboxConfig.fromPartial({
    metadata: {
      name: meta.name ?? '',
      namespace: meta.namespace ?? '',
      uid: meta.uid ?? '',
      attempt,
    },
    hostname,
    logDirectory: podLogsDirectory(
      { namespace: meta.namespace ?? '', name: meta.name ?? '', uid: meta.uid ?? '' },
      o.podLogsDir,
    ),
    ...dnsOf(pod, o),
    portMappings,
    labels: sandboxLabels(pod),
    annotations: sandboxAnnotations(pod),
    linux: {
      cgroupParent: o.cgroupParent?.(pod) ?? podCgroupParent(pod, o),
      securityContext: {
        namespaceOptions: namespaceOptions(pod, userns),
        privileged,
        ...(spec?.securityContext?.runAsUser !== undefined && {
          runAsUser: { value: BigInt(spec.securityContext.runAsUser) },
        }),
        ...(spec?.securityContext?.runAsGroup !== undefined && {
          runAsGroup: { value: BigInt(spec.securityContext.runAsGroup) },
        }),
        supplementalGroups: supplementalGroups(pod),
      },
      ...(sandboxSeccomp(pod, o) !== undefined && { seccomp: sandboxSeccomp(pod, o) }),
      sysctls: Object.fromEntries(
        (spec?.securityContext?.sysctls ?? []).map((s) => [s.name, s.value]),
      ),
    },
  });
}

/** A hostUsers: false pod must have its own user namespace (never the host's). */
function checkUserNamespace(pod: Pod, userns: cri.UserNamespace | undefined): void {
  if (pod.spec?.hostUsers === false && userns?.mode !== cri.NamespaceMode.POD)
    throw new BerthError(
      'BERTH_USERNS_MISSING',
      'Cannot run the pod without a user namespace of its own: it sets `spec.hostUsers: false`',
    );
}

/**
 * Whether the container asks for an unmasked /proc. The API server accepts `Unmasked`
 * only with `hostUsers: false`; a pod that bypassed it (a static pod) gets its words.
 */
function procMountUnmasked(pod: Pod, c: Container): boolean {
  const type = c.securityContext?.procMount;
  if (type === undefined || type === 'Default') return false;
  if (type !== 'Unmasked')
    throw new BerthError(
      'BERTH_PROCMOUNT_INVALID',
      `securityContext.procMount: Unsupported value: "${type}": supported values: "Default", "Unmasked"`,
    );
  if (pod.spec?.hostUsers !== false)
    throw new BerthError(
      'BERTH_PROCMOUNT_INVALID',
      'securityContext.procMount: Invalid value: "Unmasked": `hostUsers` must be false to use `Unmasked`',
    );
  return true;
}

/**
 * In a pod user namespace every mount is idmapped with the pod's mappings (upstream's
 * applyPlatformSpecificContainerConfig), so volume files owned by host root are the
 * container's root's, and what the container writes lands as host root.
 */
function idmappedMounts(
  mounts: readonly cri.Mount[],
  userns: cri.UserNamespace | undefined,
): cri.Mount[] {
  if (userns?.mode !== cri.NamespaceMode.POD) return [...mounts];
  return mounts.map((m) => ({
    ...m,
    uidMappings: userns.uids.map((x) => ({ ...x })),
    gidMappings: userns.gids.map((x) => ({ ...x })),
  }));
}

/** The CRI AppArmor profile, and the deprecated string form older runtimes read. */
function appArmorFields(
  profile: AppArmorProfile | undefined,
): { apparmor: cri.SecurityProfile; apparmorProfile: string } | undefined {
  const T = cri.SecurityProfile_ProfileType;
  if (profile === undefined) return undefined;
  switch (profile.type) {
    case 'RuntimeDefault':
      return {
        apparmor: { profileType: T.RuntimeDefault, localhostRef: '' },
        apparmorProfile: 'runtime/default',
      };
    case 'Unconfined':
      return {
        apparmor: { profileType: T.Unconfined, localhostRef: '' },
        apparmorProfile: 'unconfined',
      };
    case 'Localhost': {
      const name = profile.localhostProfile ?? '';
      return {
        apparmor: { profileType: T.Localhost, localhostRef: name },
        apparmorProfile: `localhost/${name}`,
      };
    }
    default:
      return undefined;
  }
}

/**
 * The container's cpu and memory limits, a limit it leaves unset taken from the pod-level
 * limit (upstream's getCPULimit / getMemoryLimit with PodLevelResources): the container
 * is then bounded in its own cgroup too, which the pod's readers of limits rely on.
 */
function containerLimits(pod: Pod, c: Container): Readonly<Record<string, string>> {
  const own = c.resources?.limits ?? {};
  const podLevel = podLevelResources(pod)?.limits;
  if (podLevel === undefined || !isPodLevelResourcesSet(pod)) return own;
  const out: Record<string, string> = { ...own };
  for (const r of ['cpu', 'memory'] as const) {
    const fromPod = podLevel[r];
    const mine = own[r];
    if ((mine === undefined || parseQuantity(mine) === 0) && fromPod !== undefined)
      out[r] = fromPod;
  }
  return out;
}

function resources(
  pod: Pod,
  c: Container,
  qos: QosClass,
  options: ContainerConfigOptions,
): cri.LinuxContainerResources {
  const req = c.resources?.requests ?? {};
  const lim = containerLimits(pod, c);
  const cpuReq = req['cpu'] ?? c.resources?.limits?.['cpu'];
  // cpu.shares: 1024 per core, at least 2 (upstream MilliCPUToShares).
  const cpuShares =
    cpuReq === undefined ? 2 : Math.max(2, Math.floor((milliCpu(cpuReq) * 1024) / 1000));
  const period = 100_000;
  const cpuQuota =
    lim['cpu'] === undefined
      ? 0
      : Math.max(1000, Math.floor((milliCpu(lim['cpu']) * period) / 1000));
  const memoryLimit = lim['memory'] === undefined ? 0 : Math.floor(parseQuantity(lim['memory']));
  const oomScoreAdj = containerOomScoreAdjust(pod, c, qos, options.memoryCapacityBytes?.());
  const unified = options.unified === undefined ? {} : containerUnified(c, options.unified());
  return cri.LinuxContainerResources.fromPartial({
    cpuShares: BigInt(cpuShares),
    cpuPeriod: lim['cpu'] === undefined ? 0n : BigInt(period),
    cpuQuota: BigInt(cpuQuota),
    memoryLimitInBytes: BigInt(memoryLimit),
    oomScoreAdj: BigInt(oomScoreAdj),
    hugepageLimits: hugepageLimits(c, options.hugePageSizes?.() ?? []),
    unified,
  });
}

export function containerConfig(
  pod: Pod,
  container: Container,
  restartCount: number,
  imageRef: string,
  env: readonly cri.KeyValue[],
  mounts: readonly cri.Mount[],
  options: ContainerConfigOptions = {},
  /** The container whose PID namespace to join (an ephemeral container's target). */
  pidTargetId?: string,
  /** The pod's user namespace, as its sandbox has it. */
  userns?: cri.UserNamespace,
): cri.ContainerConfig {
  const sc = container.securityContext;
  const privileged = sc?.privileged === true;
  const podSc = pod.spec?.securityContext;
  const runAsUser = sc?.runAsUser ?? podSc?.runAsUser;
  const runAsGroup = sc?.runAsGroup ?? podSc?.runAsGroup;
  checkUserNamespace(pod, userns);
  const unmasked = procMountUnmasked(pod, container);
  return cri.ContainerConfig.fromPartial({
    metadata: { name: container.name, attempt: restartCount },
    image: { image: imageRef, userSpecifiedImage: container.image ?? '' },
    command: container.command ?? [],
    args: container.args ?? [],
    workingDir: container.workingDir ?? '',
    envs: [...env],
    mounts: idmappedMounts(mounts, userns),
    labels: containerLabels(pod, container),
    annotations: containerAnnotations(pod, container, { restartCount }),
    logPath: containerLogPath(container.name, restartCount),
    stdin: container.stdin === true,
    stdinOnce: container.stdinOnce === true,
    tty: container.tty === true,
    linux: {
      resources: resources(pod, container, qosClassOf(pod), options),
      securityContext: {
        privileged,
        namespaceOptions:
          pidTargetId === undefined
            ? namespaceOptions(pod, userns)
            : {
                ...namespaceOptions(pod, userns),
                pid: cri.NamespaceMode.TARGET,
                targetId: pidTargetId,
              },
        ...(runAsUser !== undefined && { runAsUser: { value: BigInt(runAsUser) } }),
        ...(runAsGroup !== undefined && { runAsGroup: { value: BigInt(runAsGroup) } }),
        readonlyRootfs: sc?.readOnlyRootFilesystem === true,
        noNewPrivs: sc?.allowPrivilegeEscalation === false,
        capabilities: {
          addCapabilities: sc?.capabilities?.add ?? [],
          dropCapabilities: sc?.capabilities?.drop ?? [],
        },
        supplementalGroups: supplementalGroups(pod),
        seccomp: seccompProfile(sc?.seccompProfile ?? podSc?.seccompProfile, options),
        ...appArmorFields(appArmorProfileOf(pod, container)),
        // procMount Unmasked: no masked or read-only /proc paths (upstream's
        // ConvertToRuntimeMaskedPaths); the user namespace keeps the host's /proc safe.
        maskedPaths: privileged || unmasked ? [] : MASKED_PATHS,
        readonlyPaths: privileged || unmasked ? [] : READONLY_PATHS,
      },
    },
  });
}
