/**
 * The CRI labels and annotations berth puts on sandboxes and containers, and the log
 * paths it hands the runtime. The names and value formats are the upstream kubelet's:
 * crictl, log collectors (fluent-bit, vector, promtail), node-problem-detector and the
 * upstream kubelet itself read them, and berth reads them back after a restart to
 * rebuild its view of the node without touching running containers.
 *
 * Labels identify (they are what ListPodSandbox/ListContainers filter on); annotations
 * carry the facts needed to manage a container the kubelet did not create in this
 * process: spec hash, restart count, termination message settings, grace periods,
 * preStop handler and ports.
 */
import path from 'node:path';
import type { Container, ContainerPort, LifecycleHandler, Pod } from 'kubernetes-types/core/v1.js';
import { hashContainer, normalizeContainerHash } from './container-hash.ts';

export { hashContainer, normalizeContainerHash, sameContainerHash } from './container-hash.ts';

/** Label: the pod's name (sandboxes and containers). */
export const POD_NAME_LABEL = 'io.kubernetes.pod.name';
/** Label: the pod's namespace (sandboxes and containers). */
export const POD_NAMESPACE_LABEL = 'io.kubernetes.pod.namespace';
/** Label: the pod's UID (sandboxes and containers); berth lists a pod's objects by it. */
export const POD_UID_LABEL = 'io.kubernetes.pod.uid';
/** Label: the container's name in the pod spec (containers only). */
export const CONTAINER_NAME_LABEL = 'io.kubernetes.container.name';

/** Annotation: spec hash, lower-case hex (see container-hash.ts). */
export const CONTAINER_HASH_ANNOTATION = 'io.kubernetes.container.hash';
/** Annotation: restart count, decimal. */
export const CONTAINER_RESTART_COUNT_ANNOTATION = 'io.kubernetes.container.restartCount';
/** Annotation: the container's terminationMessagePath. */
export const CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION =
  'io.kubernetes.container.terminationMessagePath';
/** Annotation: the container's terminationMessagePolicy (File, FallbackToLogsOnError). */
export const CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION =
  'io.kubernetes.container.terminationMessagePolicy';
/** Annotation: the preStop lifecycle handler as JSON, when the container has one. */
export const CONTAINER_PRESTOP_HANDLER_ANNOTATION = 'io.kubernetes.container.preStopHandler';
/** Annotation: the container's ports as a JSON array, when it declares any. */
export const CONTAINER_PORTS_ANNOTATION = 'io.kubernetes.container.ports';
/** Annotation: the pod's spec.terminationGracePeriodSeconds, decimal. */
export const POD_TERMINATION_GRACE_PERIOD_ANNOTATION = 'io.kubernetes.pod.terminationGracePeriod';
/** Annotation: the pod's metadata.deletionGracePeriodSeconds, decimal, once it is set. */
export const POD_DELETION_GRACE_PERIOD_ANNOTATION = 'io.kubernetes.pod.deletionGracePeriod';

/** The API server's defaults; static pods read from files may lack them. */
export const DEFAULT_TERMINATION_MESSAGE_PATH = '/dev/termination-log';
export const DEFAULT_TERMINATION_MESSAGE_POLICY = 'File';

/** Where upstream keeps pod logs; the `podLogsDir` KubeletConfiguration default. */
export const DEFAULT_POD_LOGS_DIR = '/var/log/pods';
/** Where upstream keeps the per-container symlinks log collectors tail. */
export const DEFAULT_CONTAINER_LOGS_DIR = '/var/log/containers';

// ext4 (and most Linux filesystems) cap a file name at 255 bytes.
const MAX_FILE_NAME_BYTES = 255;

/** The pod's own labels plus the three identity labels (which win on a clash). */
export function sandboxLabels(pod: Pod): Record<string, string> {
  return { ...pod.metadata?.labels, ...podIdentityLabels(pod) };
}

/** The pod's annotations, copied. */
export function sandboxAnnotations(pod: Pod): Record<string, string> {
  return { ...pod.metadata?.annotations };
}

/** The four identity labels of a container: pod name, namespace, UID, container name. */
export function containerLabels(
  pod: Pod,
  container: Pick<Container, 'name'>,
): Record<string, string> {
  return { ...podIdentityLabels(pod), [CONTAINER_NAME_LABEL]: container.name };
}

/** Options of {@link containerAnnotations}. */
export interface ContainerAnnotationOptions {
  /** The restart count this instance of the container gets (0 for the first). */
  readonly restartCount: number;
  /** Annotations from device plugins and the like; berth's own keys override them. */
  readonly extra?: Readonly<Record<string, string>>;
}

/** The annotations of a new container instance, as upstream writes them. */
export function containerAnnotations(
  pod: Pod,
  container: Container,
  options: ContainerAnnotationOptions,
): Record<string, string> {
  const annotations: Record<string, string> = {
    ...options.extra,
    [CONTAINER_HASH_ANNOTATION]: hashContainer(container),
    [CONTAINER_RESTART_COUNT_ANNOTATION]: String(options.restartCount),
    [CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION]:
      container.terminationMessagePath ?? DEFAULT_TERMINATION_MESSAGE_PATH,
    [CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION]:
      container.terminationMessagePolicy ?? DEFAULT_TERMINATION_MESSAGE_POLICY,
  };
  const deletionGrace = pod.metadata?.deletionGracePeriodSeconds;
  if (deletionGrace !== undefined) {
    annotations[POD_DELETION_GRACE_PERIOD_ANNOTATION] = String(deletionGrace);
  }
  const terminationGrace = pod.spec?.terminationGracePeriodSeconds;
  if (terminationGrace !== undefined) {
    annotations[POD_TERMINATION_GRACE_PERIOD_ANNOTATION] = String(terminationGrace);
  }
  const preStop = container.lifecycle?.preStop;
  if (preStop !== undefined) {
    // JSON so that the handler is still readable (and runnable) after a kubelet restart.
    annotations[CONTAINER_PRESTOP_HANDLER_ANNOTATION] = JSON.stringify(preStop);
  }
  if (container.ports !== undefined && container.ports.length > 0) {
    annotations[CONTAINER_PORTS_ANNOTATION] = JSON.stringify(container.ports);
  }
  return annotations;
}

/** What a sandbox's labels say about its pod. Missing labels read as ''. */
export interface SandboxLabelInfo {
  readonly podName: string;
  readonly podNamespace: string;
  readonly podUid: string;
  /** The pod's own labels: everything but the identity labels. */
  readonly labels: Record<string, string>;
}

/** Reads the identity labels back from a sandbox; tolerates any of them missing. */
export function parseSandboxLabels(labels: Readonly<Record<string, string>>): SandboxLabelInfo {
  const own: Record<string, string> = {};
  for (const [key, value] of Object.entries(labels)) {
    if (key !== POD_NAME_LABEL && key !== POD_NAMESPACE_LABEL && key !== POD_UID_LABEL) {
      own[key] = value;
    }
  }
  return {
    podName: labels[POD_NAME_LABEL] ?? '',
    podNamespace: labels[POD_NAMESPACE_LABEL] ?? '',
    podUid: labels[POD_UID_LABEL] ?? '',
    labels: own,
  };
}

/** What a container's labels say. Missing labels read as ''. */
export interface ContainerLabelInfo {
  readonly podName: string;
  readonly podNamespace: string;
  readonly podUid: string;
  readonly containerName: string;
}

/** Reads the identity labels back from a container; tolerates any of them missing. */
export function parseContainerLabels(labels: Readonly<Record<string, string>>): ContainerLabelInfo {
  return {
    podName: labels[POD_NAME_LABEL] ?? '',
    podNamespace: labels[POD_NAMESPACE_LABEL] ?? '',
    podUid: labels[POD_UID_LABEL] ?? '',
    containerName: labels[CONTAINER_NAME_LABEL] ?? '',
  };
}

/**
 * What a container's annotations say. A missing or garbled value reads as its default
 * (restart count 0, hash undefined, no handler) rather than failing, as upstream does:
 * a container from an older or foreign kubelet must not stop the sync of its pod.
 */
export interface ContainerAnnotationInfo {
  /** Normalised lower-case hex; undefined when absent or garbled (never equal to a spec's). */
  readonly hash: string | undefined;
  /** Whether the restart-count annotation was present and a valid count. */
  readonly hasRestartCount: boolean;
  readonly restartCount: number;
  readonly terminationMessagePath: string;
  readonly terminationMessagePolicy: string;
  readonly podTerminationGracePeriodSeconds: number | undefined;
  readonly podDeletionGracePeriodSeconds: number | undefined;
  readonly preStopHandler: LifecycleHandler | undefined;
  readonly ports: ContainerPort[] | undefined;
}

/** Reads a container's annotations back; never throws. */
export function parseContainerAnnotations(
  annotations: Readonly<Record<string, string>>,
): ContainerAnnotationInfo {
  const restartCount = parseCount(annotations[CONTAINER_RESTART_COUNT_ANNOTATION]);
  return {
    hash: normalizeContainerHash(annotations[CONTAINER_HASH_ANNOTATION]),
    hasRestartCount: restartCount !== undefined,
    restartCount: restartCount ?? 0,
    terminationMessagePath: annotations[CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION] ?? '',
    terminationMessagePolicy: annotations[CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION] ?? '',
    podTerminationGracePeriodSeconds: parseInteger(
      annotations[POD_TERMINATION_GRACE_PERIOD_ANNOTATION],
    ),
    podDeletionGracePeriodSeconds: parseInteger(annotations[POD_DELETION_GRACE_PERIOD_ANNOTATION]),
    preStopHandler: parseJsonObject(annotations[CONTAINER_PRESTOP_HANDLER_ANNOTATION]),
    ports: parsePorts(annotations[CONTAINER_PORTS_ANNOTATION]),
  };
}

/** `<podLogsDir>/<namespace>_<name>_<uid>`: the sandbox's CRI log directory. */
export function podLogsDirectory(
  pod: { readonly namespace: string; readonly name: string; readonly uid: string },
  podLogsDir: string = DEFAULT_POD_LOGS_DIR,
): string {
  return path.join(podLogsDir, `${pod.namespace}_${pod.name}_${pod.uid}`);
}

/** `<container>/<restartCount>.log`: a container's CRI log path, relative to the pod's. */
export function containerLogPath(containerName: string, restartCount: number): string {
  return path.join(containerName, `${restartCount}.log`);
}

/**
 * `<containerLogsDir>/<pod>_<namespace>_<container>-<containerId>.log`, the symlink log
 * collectors tail; the name is cut to fit the filesystem's 255-byte limit like upstream.
 */
export function containerLogSymlink(
  pod: { readonly namespace: string; readonly name: string },
  containerName: string,
  containerId: string,
  containerLogsDir: string = DEFAULT_CONTAINER_LOGS_DIR,
): string {
  const suffix = '.log';
  const base = Buffer.from(`${pod.name}_${pod.namespace}_${containerName}-${containerId}`);
  const cut = base.subarray(0, MAX_FILE_NAME_BYTES - suffix.length).toString();
  return path.join(containerLogsDir, cut + suffix);
}

function podIdentityLabels(pod: Pod): Record<string, string> {
  return {
    [POD_NAME_LABEL]: pod.metadata?.name ?? '',
    [POD_NAMESPACE_LABEL]: pod.metadata?.namespace ?? '',
    [POD_UID_LABEL]: pod.metadata?.uid ?? '',
  };
}

function parseCount(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d{1,9}$/.test(value)) return undefined;
  return Number(value);
}

function parseInteger(value: string | undefined): number | undefined {
  if (value === undefined || !/^-?\d{1,15}$/.test(value)) return undefined;
  return Number(value);
}

function parseJsonObject(value: string | undefined): LifecycleHandler | undefined {
  const parsed = parseJson(value);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  // Shape beyond "an object" is the consumer's to check: a handler it cannot run is
  // skipped there, with a log line naming the container.
  return parsed;
}

function parsePorts(value: string | undefined): ContainerPort[] | undefined {
  const parsed = parseJson(value);
  if (!Array.isArray(parsed)) return undefined;
  const ports: ContainerPort[] = [];
  for (const entry of parsed as unknown[]) {
    if (typeof entry !== 'object' || entry === null) return undefined;
    const port = (entry as { containerPort?: unknown }).containerPort;
    if (typeof port !== 'number' || !Number.isInteger(port)) return undefined;
    ports.push(entry as ContainerPort);
  }
  return ports;
}

function parseJson(value: string | undefined): unknown {
  if (value === undefined) return undefined;
  try {
    return JSON.parse(value) as unknown;
  } catch {
    // Garbled annotation: treated as absent, like upstream.
    return undefined;
  }
}
