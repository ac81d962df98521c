/**
 * What the kubelet API routes do once a request is authenticated and authorized:
 * list the node's pods, stream a container's log, run a command (the streaming URLs
 * are stream-target.ts). Paths are parsed here, strictly: a segment
 * that decodes to `..`, `.` or contains a slash is rejected before anything is read.
 */
import { lstatSync, realpathSync } from 'node:fs';
import path from 'node:path';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { cri, type CriClient } from '../cri/index.ts';
import {
  CONTAINER_NAME_LABEL,
  POD_NAME_LABEL,
  POD_NAMESPACE_LABEL,
  POD_UID_LABEL,
  containerLogPath,
  parseContainerAnnotations,
  podLogsDirectory,
} from '../container/labels.ts';
import type { RuntimeCache } from '../pleg/types.ts';
import type { Clock } from '../util/clock.ts';
import { BerthError } from '../util/errors.ts';
import { ContainerLogFiles, streamLogFiles, type LogOptions } from './logs.ts';
import type { ApiResponse } from './transport.ts';

/** A request the server answers with `status` and `message` (4xx, or 500). */
export class HttpError extends BerthError {
  readonly status: number;
  constructor(status: number, message: string, options?: { cause?: unknown }) {
    super(`BERTH_SERVER_HTTP_${status}`, message, options);
    this.status = status;
  }
}

/** The decoded path segments of a request target, and its query. */
export interface ParsedTarget {
  readonly segments: readonly string[];
  readonly query: URLSearchParams;
}

/** Splits `req.url` without normalizing it, so `..` cannot be resolved away unseen. */
export function parseTarget(rawUrl: string): ParsedTarget {
  const q = rawUrl.indexOf('?');
  const rawPath = q < 0 ? rawUrl : rawUrl.slice(0, q);
  if (!rawPath.startsWith('/'))
    throw new HttpError(400, 'Cannot serve a request target that is not an absolute path');
  const segments: string[] = [];
  const parts = rawPath.slice(1).split('/');
  for (const [i, part] of parts.entries()) {
    // One trailing slash is tolerated (/pods/, /runningpods/).
    if (part === '' && i === parts.length - 1 && i > 0) continue;
    let decoded: string;
    try {
      decoded = decodeURIComponent(part);
    } catch {
      throw new HttpError(400, `Cannot decode path segment "${part}"`);
    }
    if (
      decoded === '..' ||
      decoded === '.' ||
      decoded.includes('/') ||
      decoded.includes('\\') ||
      decoded.includes('\0')
    ) {
      throw new HttpError(
        400,
        `Cannot serve path segment "${part}": relative or containing a slash`,
      );
    }
    segments.push(decoded);
  }
  return { segments, query: new URLSearchParams(q < 0 ? '' : rawUrl.slice(q + 1)) };
}

export interface HandlerDeps {
  readonly cri: CriClient;
  readonly clock: Clock;
  readonly nodeName: string;
  readonly podLogsDir: string;
  /** The pods bound to this node, by UID (the pod source's view). */
  readonly pods: () => ReadonlyMap<string, Pod>;
  /** The runtime as of the PLEG's last relist; absent: every lookup asks the runtime. */
  readonly runtimeCache?: RuntimeCache;
}

/** Looks a pod up by namespace and name; 404 when this node does not run it. */
export function findPod(deps: HandlerDeps, namespace: string, name: string): Pod {
  for (const pod of deps.pods().values()) {
    if (pod.metadata?.namespace === namespace && pod.metadata.name === name) return pod;
  }
  throw new HttpError(404, `pod "${namespace}/${name}" not found on node "${deps.nodeName}"`);
}

export function requireContainer(pod: Pod, container: string): void {
  const spec = pod.spec;
  const names = [
    ...(spec?.containers ?? []),
    ...(spec?.initContainers ?? []),
    ...(spec?.ephemeralContainers ?? []),
  ].map((c) => c.name);
  if (!names.includes(container)) {
    throw new HttpError(
      404,
      `container "${container}" not found in pod "${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}"`,
    );
  }
}

/** The runtime's containers of one pod container, newest (highest restart count) first. */
export async function runtimeContainers(
  deps: HandlerDeps,
  uid: string,
  container: string,
  signal: AbortSignal,
): Promise<cri.Container[]> {
  const res = await deps.cri.runtime.listContainers(
    { filter: { labelSelector: { [POD_UID_LABEL]: uid, [CONTAINER_NAME_LABEL]: container } } },
    { signal },
  );
  const restarts = (c: cri.Container): number =>
    parseContainerAnnotations(c.annotations).restartCount;
  return [...res.containers].sort(
    (a, b) =>
      restarts(b) - restarts(a) ||
      (b.createdAt > a.createdAt ? 1 : b.createdAt < a.createdAt ? -1 : 0),
  );
}

export function boolParam(query: URLSearchParams, ...names: string[]): boolean {
  for (const name of names) {
    const v = query.get(name);
    if (v === null) continue;
    if (v === '' || v === '1' || v === 'true') return true;
    if (v === '0' || v === 'false') return false;
    throw new HttpError(
      400,
      `Cannot parse query parameter ${name} as a boolean: current value is "${v}"`,
    );
  }
  return false;
}

function intParam(
  query: URLSearchParams,
  name: string,
  min: number,
  max: number,
): number | undefined {
  const v = query.get(name);
  if (v === null) return undefined;
  if (!/^\d{1,15}$/.test(v) || Number(v) < min || Number(v) > max) {
    throw new HttpError(
      400,
      `Cannot use query parameter ${name}: current value is "${v}", expected an integer in [${min}, ${max}]`,
    );
  }
  return Number(v);
}

/** PodLogOptions from the query string, validated as upstream does. */
export function parseLogOptions(
  query: URLSearchParams,
  now: number,
): LogOptions & { previous: boolean } {
  const tailLines = intParam(query, 'tailLines', 0, Number.MAX_SAFE_INTEGER);
  const limitBytes = intParam(query, 'limitBytes', 1, Number.MAX_SAFE_INTEGER);
  const sinceSeconds = intParam(query, 'sinceSeconds', 1, Number.MAX_SAFE_INTEGER);
  const sinceTime = query.get('sinceTime');
  if (sinceSeconds !== undefined && sinceTime !== null) {
    throw new HttpError(400, 'Cannot use both sinceSeconds and sinceTime');
  }
  let sinceMs: number | undefined;
  if (sinceSeconds !== undefined) sinceMs = now - sinceSeconds * 1000;
  if (sinceTime !== null) {
    sinceMs = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(sinceTime)
      ? Date.parse(sinceTime)
      : Number.NaN;
    if (Number.isNaN(sinceMs))
      throw new HttpError(
        400,
        `Cannot parse sinceTime as RFC3339: current value is "${sinceTime}"`,
      );
  }
  return {
    follow: boolParam(query, 'follow'),
    timestamps: boolParam(query, 'timestamps'),
    previous: boolParam(query, 'previous'),
    ...(tailLines !== undefined && { tailLines }),
    ...(limitBytes !== undefined && { limitBytes }),
    ...(sinceMs !== undefined && { sinceMs }),
  };
}

/**
 * Which container's log to read, from the pod status as upstream does: the previous one
 * is lastState.terminated; the current one is the running or terminated container, or
 * while it waits (back-off) the last terminated one. undefined: the status has not
 * named one yet, so the runtime's newest is read; an HttpError: nothing to read.
 */
function logContainerId(pod: Pod, name: string, previous: boolean): string | undefined | HttpError {
  const all = [
    ...(pod.status?.containerStatuses ?? []),
    ...(pod.status?.initContainerStatuses ?? []),
    ...(pod.status?.ephemeralContainerStatuses ?? []),
  ];
  const st = all.find((c) => c.name === name);
  const where = `container "${name}" in pod "${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}"`;
  const strip = (id: string | undefined): string | undefined =>
    id === undefined || id === '' ? undefined : id.replace(/^[a-z0-9.+-]+:\/\//, '');
  const last = strip(st?.lastState?.terminated?.containerID);
  if (previous) {
    return last ?? new HttpError(400, `previous terminated ${where} not found`);
  }
  if (st === undefined) return undefined;
  if (st.state?.running !== undefined) return strip(st.containerID);
  if (st.state?.terminated !== undefined) return strip(st.state.terminated.containerID) ?? last;
  if (st.state?.waiting !== undefined) {
    return (
      last ??
      new HttpError(400, `${where} is waiting to start: ${st.state.waiting.reason ?? 'unknown'}`)
    );
  }
  return undefined;
}

/**
 * A directory that must be a real directory below `root` (no symlink anywhere on the
 * way). Synchronous: two metadata lookups in the node's own log directory take
 * microseconds, and each trip through libuv's thread pool cost about 0.3 ms of a logs
 * request's latency on a busy node.
 */
function requireRealDir(dir: string, root: string): void {
  let real: string | undefined;
  try {
    if (lstatSync(dir).isDirectory()) real = realpathSync.native(dir);
  } catch {
    // Missing, unreadable or not a directory on the way: no log directory either way.
  }
  if (real?.startsWith(`${root}${path.sep}`) !== true)
    throw new HttpError(404, 'The container has no log directory');
}

/** GET /containerLogs/{ns}/{pod}/{container}. */
export async function serveContainerLogs(
  deps: HandlerDeps,
  target: ParsedTarget,
  res: ApiResponse,
  signal: AbortSignal,
): Promise<void> {
  const [, namespace, podName, container] = target.segments;
  if (
    namespace === undefined ||
    podName === undefined ||
    container === undefined ||
    target.segments.length !== 4
  ) {
    throw new HttpError(
      400,
      'Cannot serve container logs: expected /containerLogs/{namespace}/{pod}/{container}',
    );
  }
  const options = parseLogOptions(target.query, deps.clock.now());
  const pod = findPod(deps, namespace, podName);
  requireContainer(pod, container);
  const uid = pod.metadata?.uid ?? '';
  const wanted = logContainerId(pod, container, options.previous);
  if (typeof wanted === 'object') throw wanted;
  // The status names the instance; the PLEG's last relist usually has it, which saves
  // a CRI listing (about 1 ms here, half of berth's answer on a kept-alive connection).
  // Anything else asks the runtime, as before.
  const chosen =
    (wanted === undefined
      ? undefined
      : deps.runtimeCache?.get(uid).containers.find((c) => c.id === wanted)) ??
    (await runtimeContainers(deps, uid, container, signal).then((containers) =>
      wanted === undefined ? containers[0] : containers.find((c) => c.id === wanted),
    ));
  if (chosen === undefined) {
    throw new HttpError(
      404,
      `container "${container}" in pod "${namespace}/${podName}" has no log in the runtime`,
    );
  }
  const restartCount = parseContainerAnnotations(chosen.annotations).restartCount;
  // Built only from names the API gave berth and the UID; then checked on disk.
  let root: string;
  try {
    root = realpathSync.native(deps.podLogsDir);
  } catch (err) {
    throw new HttpError(404, 'The node has no pod log directory', { cause: err });
  }
  const podDir = podLogsDirectory({ namespace, name: podName, uid }, root);
  requireRealDir(podDir, root);
  requireRealDir(path.join(podDir, container), root);
  const files = await ContainerLogFiles.open(
    path.join(podDir, containerLogPath(container, restartCount)),
    deps.clock.now(),
  ).catch((err: unknown) => {
    throw new HttpError(
      404,
      `Cannot read the log of container "${container}": no regular log file`,
      { cause: err },
    );
  });
  try {
    res.writeHead(200, {
      'Content-Type': 'text/plain; charset=utf-8',
    });
    await streamLogFiles(files, res, {
      ...options,
      follow: options.follow && !options.previous,
      clock: deps.clock,
      signal,
      beforeWait: () => {
        if (!res.headersSent) res.flushHeaders?.();
      },
      isRunning: async () => {
        const s = await deps.cri.runtime.containerStatus({ containerId: chosen.id }, { signal });
        return s.status?.state === cri.ContainerState.CONTAINER_RUNNING;
      },
    });
  } finally {
    await files.close();
  }
  res.end();
}

/**
 * POST /run/{ns}/{pod}/{container} (or /{ns}/{pod}/{uid}/{container}): runs `cmd` (split
 * on spaces, upstream's legacy form) with CRI ExecSync and answers its stdout then
 * stderr. A non-zero exit is a 500 carrying the output, as upstream's RunInContainer.
 */
export async function serveRun(
  deps: HandlerDeps,
  target: ParsedTarget,
  res: ApiResponse,
  signal: AbortSignal,
): Promise<void> {
  const [, namespace, podName] = target.segments;
  const n = target.segments.length;
  if (namespace === undefined || podName === undefined || (n !== 4 && n !== 5))
    throw new HttpError(400, 'Cannot run: expected /run/{namespace}/{pod}/{container}');
  const pod = findPod(deps, namespace, podName);
  const uid = pod.metadata?.uid ?? '';
  if (n === 5 && target.segments[3] !== uid)
    throw new HttpError(404, `pod "${namespace}/${podName}" with that UID not found`);
  const name = target.segments[n - 1] ?? '';
  requireContainer(pod, name);
  const cmd = (target.query.get('cmd') ?? '').split(' ').filter((a) => a !== '');
  if (cmd.length === 0) throw new HttpError(400, 'Cannot run: the cmd query parameter is empty');
  const running = (await runtimeContainers(deps, uid, name, signal)).find(
    (c) => c.state === cri.ContainerState.CONTAINER_RUNNING,
  );
  if (running === undefined)
    throw new HttpError(404, `container "${name}" in pod "${namespace}/${podName}" is not running`);
  const r = await deps.cri.runtime.execSync(
    { containerId: running.id, cmd, timeout: 0n },
    { signal },
  );
  const output = Buffer.concat([r.stdout, r.stderr]);
  if (r.exitCode !== 0) {
    throw new HttpError(
      500,
      `command '${cmd.join(' ')}' exited with ${r.exitCode}: ${output.toString()}`,
    );
  }
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': output.length });
  res.end(output);
}

/**
 * GET /runningpods/: the pods the runtime is running, as a PodList with only identity
 * and container names and images (upstream's shape), whatever the API server says.
 */
export async function runningPods(deps: HandlerDeps, signal: AbortSignal): Promise<unknown> {
  const running = await deps.cri.runtime.listContainers(
    { filter: { state: { state: cri.ContainerState.CONTAINER_RUNNING } } },
    { signal },
  );
  const pods = new Map<string, Pod>();
  for (const c of running.containers) {
    const uid = c.labels[POD_UID_LABEL];
    if (uid === undefined) continue; // not a kubelet's container
    let pod = pods.get(uid);
    if (pod === undefined) {
      pod = {
        metadata: {
          name: c.labels[POD_NAME_LABEL] ?? '',
          namespace: c.labels[POD_NAMESPACE_LABEL] ?? '',
          uid,
        },
        spec: { containers: [] },
        status: {},
      };
      pods.set(uid, pod);
    }
    pod.spec?.containers.push({
      name: c.labels[CONTAINER_NAME_LABEL] ?? c.metadata?.name ?? '',
      image: c.image?.image ?? c.imageRef,
      resources: {},
    });
  }
  return { kind: 'PodList', apiVersion: 'v1', metadata: {}, items: [...pods.values()] };
}
