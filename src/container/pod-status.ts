/**
 * The runtime's view of a pod (upstream's kubecontainer.PodStatus), in two grains:
 * RuntimePodSnapshot, the raw sandboxes and containers the PLEG's relist found for it,
 * and RuntimePodStatus, the observed state the sync plan (kuberuntime/plan.ts) and the
 * status manager read. kuberuntime's RuntimeStatusReader turns the first into the
 * second with ContainerStatus / PodSandboxStatus and the converters below; the plan
 * never talks to the runtime.
 *
 * Times are milliseconds since the epoch (CRI's nanosecond bigints, truncated). The
 * identity of a container instance comes from the labels and annotations berth (or the
 * upstream kubelet) wrote when creating it (labels.ts).
 */
import { cri } from '../cri/index.ts';
import { parseContainerAnnotations, parseContainerLabels, parseSandboxLabels } from './labels.ts';

/** Everything the runtime has for one pod (by the io.kubernetes.pod.uid label), as the PLEG last listed it. */
export interface RuntimePodSnapshot {
  readonly uid: string;
  readonly sandboxes: readonly cri.PodSandbox[];
  readonly containers: readonly cri.Container[];
}

/** A sandbox's state: `ready` while its network namespace and pause process are up. */
export type SandboxState = 'ready' | 'notready';

/** One pod sandbox. */
export interface SandboxStatus {
  readonly id: string;
  readonly state: SandboxState;
  /** Sandbox attempt: 0 for the pod's first sandbox, +1 on each re-creation. */
  readonly attempt: number;
  readonly createdAt: number;
  /** Primary pod IP; absent when the runtime reported none (or was not asked). */
  readonly ip?: string;
  /** All pod IPs, primary first. */
  readonly ips: readonly string[];
  /**
   * The network namespace the sandbox was created with: `node` for hostNetwork pods.
   * Only PodSandboxStatus reports it; absent when the sandbox came from a list, and the
   * plan then skips the checks that need it (network mode changed, no pod IP).
   */
  readonly network?: 'pod' | 'node';
}

/**
 * A container instance's state. `created`: made but never started (or start failed);
 * `unknown`: the runtime lost track of it — it may still be running.
 */
export type RuntimeContainerState = 'created' | 'running' | 'exited' | 'unknown';

/** One container instance (one restart of a spec container is one instance). */
export interface RuntimeContainer {
  readonly id: string;
  /** The container's name in the pod spec. */
  readonly name: string;
  readonly state: RuntimeContainerState;
  /** The restart count of this instance: 0 for the first run. */
  readonly attempt: number;
  /** Set once exited; absent for containers only known from a list. */
  readonly exitCode?: number;
  /** Runtime's reason once exited, e.g. `Completed`, `Error`, `OOMKilled`. */
  readonly reason?: string;
  readonly message?: string;
  readonly createdAt: number;
  readonly startedAt?: number;
  readonly finishedAt?: number;
  /** Spec hash from the annotation, normalised hex; '' when absent or garbled. */
  readonly hash: string;
  readonly image: string;
  readonly imageRef: string;
  readonly sandboxId: string;
  /** What ContainerStatus reports the container runs with (CRI resources); absent: not reported. */
  readonly resources?: RuntimeResources;
}

/**
 * A container's resources as the runtime reports them (upstream's
 * toKubeContainerResources): cpu limit from quota/period and request from shares, in
 * millicores; the memory limit in bytes. The memory request is not a cgroup setting.
 */
export interface RuntimeResources {
  readonly cpuLimit?: number;
  readonly cpuRequest?: number;
  readonly memoryLimit?: number;
}

/** Upstream's toKubeContainerResources over CRI's LinuxContainerResources. */
export function runtimeResources(
  r: cri.ContainerResources | undefined,
): RuntimeResources | undefined {
  const linux = r?.linux;
  if (linux === undefined) return undefined;
  const period = Number(linux.cpuPeriod);
  const quota = Number(linux.cpuQuota);
  const shares = Number(linux.cpuShares);
  const memory = Number(linux.memoryLimitInBytes);
  // QuotaToMilliCPU; SharesToMilliCPU (shares below the minimum of 2 mean none).
  const cpuLimit = period > 0 && quota > 0 ? Math.floor((quota * 1000) / period) : 0;
  const cpuRequest = shares >= 2 ? Math.ceil((shares * 1000) / 1024) : 0;
  const out: RuntimeResources = {
    ...(cpuLimit > 0 && { cpuLimit }),
    ...(cpuRequest > 0 && { cpuRequest }),
    ...(memory > 0 && { memoryLimit: memory }),
  };
  return Object.keys(out).length === 0 ? undefined : out;
}

/** Everything the runtime knows about one pod. */
export interface RuntimePodStatus {
  readonly uid: string;
  readonly name: string;
  readonly namespace: string;
  /** Newest first. */
  readonly sandboxes: readonly SandboxStatus[];
  /** Newest first (several instances of one spec container may be present). */
  readonly containers: readonly RuntimeContainer[];
}

/** Nanosecond CRI timestamp to milliseconds; 0 (unset) stays 0. */
export function nanosToMillis(ns: bigint): number {
  return Number(ns / 1_000_000n);
}

/** A sandbox from ListPodSandbox: no IPs and no network mode. */
export function sandboxFromList(sandbox: cri.PodSandbox): SandboxStatus {
  return {
    id: sandbox.id,
    state: sandboxState(sandbox.state),
    attempt: sandbox.metadata?.attempt ?? 0,
    createdAt: nanosToMillis(sandbox.createdAt),
    ips: [],
  };
}

/** A sandbox from PodSandboxStatus, with its IPs and network mode. */
export function sandboxFromStatus(status: cri.PodSandboxStatus): SandboxStatus {
  const primary = status.network?.ip ?? '';
  const additional = (status.network?.additionalIps ?? []).map((entry) => entry.ip);
  const ips = [primary, ...additional].filter((ip) => ip !== '');
  const mode = status.linux?.namespaces?.options?.network;
  return {
    id: status.id,
    state: sandboxState(status.state),
    attempt: status.metadata?.attempt ?? 0,
    createdAt: nanosToMillis(status.createdAt),
    ...(primary === '' ? {} : { ip: primary }),
    ips,
    network: mode === cri.NamespaceMode.NODE ? 'node' : 'pod',
  };
}

/** A container from ListContainers: state and identity, no exit code or times. */
export function containerFromList(container: cri.Container): RuntimeContainer {
  const labels = parseContainerLabels(container.labels);
  const annotations = parseContainerAnnotations(container.annotations);
  return {
    id: container.id,
    name: container.metadata?.name ?? labels.containerName,
    state: containerState(container.state),
    attempt: annotations.hasRestartCount
      ? annotations.restartCount
      : (container.metadata?.attempt ?? 0),
    createdAt: nanosToMillis(container.createdAt),
    hash: annotations.hash ?? '',
    image: container.image?.image ?? '',
    imageRef: container.imageRef,
    sandboxId: container.podSandboxId,
  };
}

/**
 * A container from ContainerStatus. The status does not name its sandbox, so the caller
 * passes the id it listed the container under.
 */
export function containerFromStatus(
  status: cri.ContainerStatus,
  sandboxId: string,
): RuntimeContainer {
  const labels = parseContainerLabels(status.labels);
  const annotations = parseContainerAnnotations(status.annotations);
  const state = containerState(status.state);
  const startedAt = nanosToMillis(status.startedAt);
  const finishedAt = nanosToMillis(status.finishedAt);
  const resources = runtimeResources(status.resources);
  return {
    id: status.id,
    // The label is what upstream trusts here; metadata is the fallback.
    name: labels.containerName === '' ? (status.metadata?.name ?? '') : labels.containerName,
    state,
    attempt: annotations.hasRestartCount
      ? annotations.restartCount
      : (status.metadata?.attempt ?? 0),
    ...(state === 'exited' || state === 'unknown' ? { exitCode: status.exitCode } : {}),
    ...(status.reason === '' ? {} : { reason: status.reason }),
    ...(status.message === '' ? {} : { message: status.message }),
    createdAt: nanosToMillis(status.createdAt),
    ...(startedAt === 0 ? {} : { startedAt }),
    ...(finishedAt === 0 ? {} : { finishedAt }),
    hash: annotations.hash ?? '',
    image: status.image?.image ?? '',
    imageRef: status.imageRef,
    sandboxId,
    ...(resources !== undefined && { resources }),
  };
}

/** Input of {@link groupRuntimePods}: sandboxes and containers already converted. */
export interface RuntimeObjects {
  readonly sandboxes: readonly {
    readonly sandbox: SandboxStatus;
    readonly labels: Record<string, string>;
    readonly metadata?: cri.PodSandboxMetadata | undefined;
  }[];
  readonly containers: readonly {
    readonly container: RuntimeContainer;
    readonly labels: Record<string, string>;
  }[];
}

/**
 * Groups converted sandboxes and containers by pod UID, newest first. A sandbox's pod
 * comes from its CRI metadata (falling back to its labels), a container's from its
 * labels; objects naming no pod UID are not berth's and are left out.
 */
export function groupRuntimePods(objects: RuntimeObjects): Map<string, RuntimePodStatus> {
  interface Builder {
    uid: string;
    name: string;
    namespace: string;
    sandboxes: SandboxStatus[];
    containers: RuntimeContainer[];
  }
  const pods = new Map<string, Builder>();
  const builder = (uid: string, name: string, namespace: string): Builder => {
    let pod = pods.get(uid);
    if (pod === undefined) {
      pod = { uid, name, namespace, sandboxes: [], containers: [] };
      pods.set(uid, pod);
    }
    if (pod.name === '') pod.name = name;
    if (pod.namespace === '') pod.namespace = namespace;
    return pod;
  };
  for (const { sandbox, labels, metadata } of objects.sandboxes) {
    const info = parseSandboxLabels(labels);
    const uid = nonEmpty(metadata?.uid) ?? info.podUid;
    if (uid === '') continue;
    const pod = builder(
      uid,
      nonEmpty(metadata?.name) ?? info.podName,
      nonEmpty(metadata?.namespace) ?? info.podNamespace,
    );
    pod.sandboxes.push(sandbox);
  }
  for (const { container, labels } of objects.containers) {
    const info = parseContainerLabels(labels);
    if (info.podUid === '') continue;
    builder(info.podUid, info.podName, info.podNamespace).containers.push(container);
  }
  const result = new Map<string, RuntimePodStatus>();
  for (const [uid, pod] of pods) {
    result.set(uid, {
      ...pod,
      sandboxes: pod.sandboxes.toSorted(newestFirst),
      containers: pod.containers.toSorted(newestFirst),
    });
  }
  return result;
}

/** Groups raw ListPodSandbox / ListContainers items by pod UID (see groupRuntimePods). */
export function runtimePodsFromLists(
  sandboxes: readonly cri.PodSandbox[],
  containers: readonly cri.Container[],
): Map<string, RuntimePodStatus> {
  return groupRuntimePods({
    sandboxes: sandboxes.map((s) => ({
      sandbox: sandboxFromList(s),
      labels: s.labels,
      metadata: s.metadata,
    })),
    containers: containers.map((c) => ({ container: containerFromList(c), labels: c.labels })),
  });
}

/**
 * The newest instance of spec container `name`, in any sandbox or, with `sandboxId`,
 * in that sandbox only.
 */
export function latestContainer(
  status: RuntimePodStatus,
  name: string,
  sandboxId?: string,
): RuntimeContainer | undefined {
  let latest: RuntimeContainer | undefined;
  for (const container of status.containers) {
    if (container.name !== name) continue;
    if (sandboxId !== undefined && container.sandboxId !== sandboxId) continue;
    if (latest === undefined || newestFirst(container, latest) < 0) latest = container;
  }
  return latest;
}

/**
 * The restart count a new instance of `name` gets: one more than the newest
 * instance's, or 0 when none is left (upstream's best effort after garbage collection).
 */
export function nextRestartCount(status: RuntimePodStatus, name: string): number {
  const latest = latestContainer(status, name);
  return latest === undefined ? 0 : latest.attempt + 1;
}

interface Dated {
  readonly createdAt: number;
  readonly attempt: number;
  readonly id: string;
}

function newestFirst(a: Dated, b: Dated): number {
  if (a.createdAt !== b.createdAt) return b.createdAt - a.createdAt;
  // Millisecond timestamps can tie; the higher attempt is the later one, and the id
  // makes the order (and so the plan) deterministic.
  if (a.attempt !== b.attempt) return b.attempt - a.attempt;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

function sandboxState(state: cri.PodSandboxState): SandboxState {
  return state === cri.PodSandboxState.SANDBOX_READY ? 'ready' : 'notready';
}

function containerState(state: cri.ContainerState): RuntimeContainerState {
  switch (state) {
    case cri.ContainerState.CONTAINER_CREATED:
      return 'created';
    case cri.ContainerState.CONTAINER_RUNNING:
      return 'running';
    case cri.ContainerState.CONTAINER_EXITED:
      return 'exited';
    case cri.ContainerState.CONTAINER_UNKNOWN:
    case cri.ContainerState.UNRECOGNIZED:
      return 'unknown';
  }
}
