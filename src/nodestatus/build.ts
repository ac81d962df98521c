/**
 * Builds the Node object and its status from what the host and the runtime report.
 * Pure: the manager calls it every nodeStatusUpdateFrequency and posts the result
 * when it differs from what was last posted (heartbeat times aside).
 */
import type {
  ContainerImage,
  Node,
  NodeCondition,
  NodeRuntimeHandler,
  NodeStatus,
  Taint,
} from 'kubernetes-types/core/v1.js';
import { milliCpu, parseQuantity } from '../util/quantity.ts';
import { goArch, toKi, type HostCapacity, type HostSystemInfo } from './host-info.ts';

/** The version berth reports: within the v1.37 skew window, marked as berth. */
export const KUBELET_VERSION = 'v1.37.2-berth.0.1.0';

export interface NodeStatusInput {
  readonly nodeName: string;
  readonly capacity: HostCapacity;
  readonly systemInfo: HostSystemInfo;
  readonly maxPods: number;
  /** runtimeName://runtimeVersion from CRI Version, e.g. containerd://2.4.2 */
  readonly containerRuntimeVersion: string;
  readonly nodeIPs: readonly string[];
  readonly kubeletPort: number;
  /** Node.status.declaredFeatures (default: `declaredFeatures()` with every gate at its default). */
  readonly declaredFeatures?: readonly string[];
  /** Memory held back by evictionHard memory.available (bytes). */
  readonly evictionMemoryBytes: number;
  /** Fraction of ephemeral storage held back by evictionHard nodefs.available. */
  readonly evictionNodefsFraction: number;
  /** kubeReserved + systemReserved; absent: nothing reserved. */
  readonly reserved?: NodeReserved;
  /** Why the node is not ready, or undefined when it is. */
  readonly notReadyReason: string | undefined;
  /** The eviction manager's pressure conditions now True; absent: none. */
  readonly pressure?: readonly string[];
  /** status.volumesInUse, sorted; absent: not reported (no volume manager). */
  readonly volumesInUse?: readonly string[];
  /** status.images (see nodeImages); absent: keep what the Node reports. */
  readonly images?: readonly ContainerImage[];
  /** status.runtimeHandlers from CRI Status (nodeRuntimeHandlers); absent: not known yet. */
  readonly runtimeHandlers?: readonly NodeRuntimeHandler[];
  /** status.features from CRI Status (nodeFeatures); absent: the runtime reports none. */
  readonly features?: NodeFeatures;
  readonly now: Date;
}

/** Upstream's MaxNamesPerImageInNodeStatus. */
const MAX_NAMES_PER_IMAGE = 5;

/** One image as the runtime lists it. */
export interface RuntimeImage {
  readonly id: string;
  readonly repoTags: readonly string[];
  readonly repoDigests: readonly string[];
  readonly sizeBytes: number;
}

/**
 * status.images as upstream's Images setter builds it (the scheduler's ImageLocality
 * score reads it): largest first (equal sizes by descending ID), at most `max` images
 * (nodeStatusMaxImages; -1 is no limit), each with its digests then its tags, at most
 * five names.
 */
export function nodeImages(images: readonly RuntimeImage[], max: number): ContainerImage[] {
  const sorted = [...images].sort((a, b) =>
    a.sizeBytes === b.sizeBytes
      ? a.id < b.id
        ? 1
        : a.id > b.id
          ? -1
          : 0
      : b.sizeBytes - a.sizeBytes,
  );
  const kept = max > -1 ? sorted.slice(0, max) : sorted;
  return kept.map((i) => ({
    names: [...i.repoDigests, ...i.repoTags].slice(0, MAX_NAMES_PER_IMAGE),
    sizeBytes: i.sizeBytes,
  }));
}

/** What kubeReserved and systemReserved hold back together, per resource. */
export interface NodeReserved {
  readonly cpuMilli: number;
  readonly memoryBytes: number;
  readonly ephemeralStorageBytes: number;
}

/** kubeReserved and systemReserved (resource -> quantity, validated at load) summed. */
export function nodeReserved(
  ...reservations: readonly Readonly<Record<string, string>>[]
): NodeReserved {
  const sum = (resource: string, parse: (q: string) => number): number =>
    reservations.reduce((total, r) => {
      const q = r[resource];
      return q === undefined ? total : total + parse(q);
    }, 0);
  return {
    cpuMilli: sum('cpu', milliCpu),
    memoryBytes: sum('memory', parseQuantity),
    ephemeralStorageBytes: sum('ephemeral-storage', parseQuantity),
  };
}

/** CPU as a Quantity prints it: whole cores plainly, anything else in millicores. */
function cpuQuantity(milli: number): string {
  return milli % 1000 === 0 ? String(milli / 1000) : `${milli}m`;
}

type ConditionSpec = Pick<NodeCondition, 'type' | 'status' | 'reason' | 'message'>;

/** Upstream's MemoryPressure / DiskPressure / PIDPressure setters: True and False wording. */
const PRESSURE_SPECS: readonly (readonly [ConditionSpec, ConditionSpec])[] = [
  [
    {
      type: 'MemoryPressure',
      status: 'True',
      reason: 'KubeletHasInsufficientMemory',
      message: 'kubelet has insufficient memory available',
    },
    {
      type: 'MemoryPressure',
      status: 'False',
      reason: 'KubeletHasSufficientMemory',
      message: 'kubelet has sufficient memory available',
    },
  ],
  [
    {
      type: 'DiskPressure',
      status: 'True',
      reason: 'KubeletHasDiskPressure',
      message: 'kubelet has disk pressure',
    },
    {
      type: 'DiskPressure',
      status: 'False',
      reason: 'KubeletHasNoDiskPressure',
      message: 'kubelet has no disk pressure',
    },
  ],
  [
    {
      type: 'PIDPressure',
      status: 'True',
      reason: 'KubeletHasInsufficientPID',
      message: 'kubelet has insufficient PID available',
    },
    {
      type: 'PIDPressure',
      status: 'False',
      reason: 'KubeletHasSufficientPID',
      message: 'kubelet has sufficient PID available',
    },
  ],
];

function conditionSpecs(input: NodeStatusInput): ConditionSpec[] {
  const pressure = new Set(input.pressure ?? []);
  return [
    ...PRESSURE_SPECS.map(([on, off]) => (pressure.has(on.type) ? on : off)),
    input.notReadyReason === undefined
      ? {
          type: 'Ready',
          status: 'True',
          reason: 'KubeletReady',
          message: 'kubelet is posting ready status',
        }
      : {
          type: 'Ready',
          status: 'False',
          reason: 'KubeletNotReady',
          message: input.notReadyReason,
        },
  ];
}

/** Keeps lastTransitionTime while a condition's status is unchanged; heartbeat is now. */
function mergeConditions(
  previous: readonly NodeCondition[] | undefined,
  specs: ConditionSpec[],
  now: string,
): NodeCondition[] {
  return specs.map((spec) => {
    const old = previous?.find((c) => c.type === spec.type);
    const lastTransitionTime =
      old !== undefined && old.status === spec.status ? (old.lastTransitionTime ?? now) : now;
    return { ...spec, lastHeartbeatTime: now, lastTransitionTime };
  });
}

/** RFC 3339 with second precision, as metav1.Time serializes. */
/**
 * Node.status.declaredFeatures (NodeDeclaredFeatures, GA in v1.37): the API server sends
 * WebSocket exec, attach and port-forward straight to a node declaring
 * ExtendWebSocketsToKubelet (server/ws-translate.ts serves them), lets a resize of a
 * regular init container through to a node declaring
 * InPlacePodVerticalScalingInitContainers (src/allocation records every init
 * container's allocation, as upstream), and a resize of pod-level resources to one
 * declaring InPlacePodLevelResourcesVerticalScaling (its gate on: pod cgroups and
 * container limits follow spec.resources), and RestartAllContainersOnContainerExits (a
 * container restart rule's RestartAllContainers: kuberuntime/restart-all.ts); without it
 * the scheduler keeps such pods off the node. Sorted, as upstream lists them.
 */
export function declaredFeatures(
  gates: Readonly<Record<string, boolean | undefined>> = {},
): readonly string[] {
  return [
    'ExtendWebSocketsToKubelet',
    ...(gates['InPlacePodLevelResourcesVerticalScaling'] !== false
      ? ['InPlacePodLevelResourcesVerticalScaling']
      : []),
    'InPlacePodVerticalScalingInitContainers',
    'RestartAllContainersOnContainerExits',
  ];
}

export function apiTime(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * The runtime's handlers as the Node reports them (upstream's toKubeRuntimeHandlers and
 * RuntimeHandlers setter): each with both features, false when the runtime says nothing.
 */
export function nodeRuntimeHandlers(
  handlers: readonly { name: string; features?: CriHandlerFeatures | undefined }[],
): NodeRuntimeHandler[] {
  return handlers.map((h) => ({
    name: h.name,
    features: {
      recursiveReadOnlyMounts: h.features?.recursiveReadOnlyMounts ?? false,
      userNamespaces: h.features?.userNamespaces ?? false,
    },
  }));
}

/** status.features (upstream's NodeFeatures setter); undefined when the runtime has none. */
export function nodeFeatures(
  features: { supplementalGroupsPolicy: boolean } | undefined,
): NodeFeatures | undefined {
  return features === undefined
    ? undefined
    : { supplementalGroupsPolicy: features.supplementalGroupsPolicy };
}

/** v1.NodeFeatures (newer than the kubernetes-types release berth uses). */
export interface NodeFeatures {
  readonly supplementalGroupsPolicy?: boolean;
}

interface CriHandlerFeatures {
  readonly recursiveReadOnlyMounts: boolean;
  readonly userNamespaces: boolean;
}

export function buildNodeStatus(
  previous: NodeStatus | undefined,
  input: NodeStatusInput,
): NodeStatus {
  const c = input.capacity;
  const capacity: Record<string, string> = {
    cpu: String(c.cpu),
    memory: toKi(c.memoryBytes),
    'ephemeral-storage': toKi(c.ephemeralStorageBytes),
    pods: String(input.maxPods),
  };
  for (const [size, bytes] of Object.entries(c.hugepages))
    capacity[`hugepages-${size}`] = String(bytes);
  const hugeTotal = Object.values(c.hugepages).reduce((a, b) => a + b, 0);
  const r = input.reserved ?? { cpuMilli: 0, memoryBytes: 0, ephemeralStorageBytes: 0 };
  // Upstream: allocatable = capacity - kubeReserved - systemReserved - the hard eviction
  // threshold (and, for memory, the huge pages), never below 0.
  const allocatable: Record<string, string> = {
    ...capacity,
    cpu: cpuQuantity(Math.max(0, c.cpu * 1000 - r.cpuMilli)),
    memory: toKi(
      Math.max(0, c.memoryBytes - r.memoryBytes - input.evictionMemoryBytes - hugeTotal),
    ),
    'ephemeral-storage': String(
      Math.max(
        0,
        Math.floor(
          c.ephemeralStorageBytes * (1 - input.evictionNodefsFraction) - r.ephemeralStorageBytes,
        ),
      ),
    ),
  };
  const now = apiTime(input.now);
  const addresses = [
    ...input.nodeIPs.map((ip) => ({ type: 'InternalIP', address: ip })),
    { type: 'Hostname', address: input.nodeName },
  ];
  const status: NodeStatus & { declaredFeatures: string[]; features?: NodeFeatures } = {
    capacity,
    allocatable,
    // NodeDeclaredFeatures: what the API server may rely on this node for.
    declaredFeatures: [...(input.declaredFeatures ?? declaredFeatures())],
    conditions: mergeConditions(previous?.conditions, conditionSpecs(input), now),
    addresses,
    ...(input.images !== undefined && { images: [...input.images] }),
    // Upstream's RuntimeHandlers and NodeFeatures setters (their gates are on in v1.37).
    ...(input.runtimeHandlers !== undefined &&
      input.runtimeHandlers.length > 0 && { runtimeHandlers: [...input.runtimeHandlers] }),
    ...(input.features !== undefined && { features: input.features }),
    // Sent even when empty: a strategic patch without the field would keep the old list.
    ...(input.volumesInUse !== undefined && { volumesInUse: [...input.volumesInUse].sort() }),
    daemonEndpoints: { kubeletEndpoint: { Port: input.kubeletPort } },
    nodeInfo: {
      machineID: input.systemInfo.machineID,
      systemUUID: input.systemInfo.systemUUID,
      bootID: input.systemInfo.bootID,
      kernelVersion: input.systemInfo.kernelVersion,
      osImage: input.systemInfo.osImage,
      containerRuntimeVersion: input.containerRuntimeVersion,
      kubeletVersion: KUBELET_VERSION,
      kubeProxyVersion: '',
      operatingSystem: input.systemInfo.operatingSystem,
      architecture: input.systemInfo.architecture,
    },
  };
  return status;
}

/** The status with heartbeat times removed: what decides whether a post is needed. */
export function statusFingerprint(status: NodeStatus | undefined): string {
  if (status === undefined) return '';
  const conditions = (status.conditions ?? []).map((c) => ({
    type: c.type,
    status: c.status,
    reason: c.reason,
    message: c.message,
  }));
  return JSON.stringify({ ...status, conditions });
}

export function initialNode(input: {
  nodeName: string;
  labels: Readonly<Record<string, string>>;
  taints: readonly Taint[];
  providerID?: string;
}): Node {
  const os = 'linux';
  const archName = goArch();
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: input.nodeName,
      labels: {
        'kubernetes.io/hostname': input.nodeName,
        'kubernetes.io/os': os,
        'kubernetes.io/arch': archName,
        'beta.kubernetes.io/os': os,
        'beta.kubernetes.io/arch': archName,
        ...input.labels,
      },
      annotations: { 'volumes.kubernetes.io/controller-managed-attach-detach': 'true' },
    },
    spec: {
      ...(input.taints.length > 0 && { taints: [...input.taints] }),
      ...(input.providerID !== undefined &&
        input.providerID !== '' && { providerID: input.providerID }),
    },
  };
}
