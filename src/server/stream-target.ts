/**
 * The runtime's streaming URL for /exec, /attach and /portForward: the path and query
 * checked, the pod and container found (the PLEG's cache first for exec and attach),
 * and the CRI Exec, Attach or PortForward call made.
 */
import { cri } from '../cri/index.ts';
import { CONTAINER_NAME_LABEL, POD_UID_LABEL } from '../container/labels.ts';
import {
  boolParam,
  findPod,
  HttpError,
  requireContainer,
  runtimeContainers,
  type HandlerDeps,
  type ParsedTarget,
} from './handlers.ts';

/** The kind of stream an upgrade route asks the runtime for. */
export type StreamKind = 'exec' | 'attach' | 'portForward';

/** The streams an exec or attach carries, as asked of the runtime (no stderr with a TTY). */
export interface StreamFlags {
  readonly stdin: boolean;
  readonly stdout: boolean;
  readonly stderr: boolean;
  readonly tty: boolean;
}

/** What the runtime gave for a stream route: its URL, and for exec/attach the streams. */
export interface StreamTarget {
  readonly url: string;
  readonly streams?: StreamFlags;
}

/** Asks the runtime for the streaming URL of /exec, /attach or /portForward. */
export async function streamingUrl(
  deps: HandlerDeps,
  kind: StreamKind,
  target: ParsedTarget,
  signal: AbortSignal,
): Promise<StreamTarget> {
  const [, namespace, podName, container] = target.segments;
  const expected = kind === 'portForward' ? 3 : 4;
  // Upstream also accepts /{ns}/{pod}/{uid}/{container}: the UID must then match.
  const withUid = kind !== 'portForward' && target.segments.length === 5;
  if (
    namespace === undefined ||
    podName === undefined ||
    (target.segments.length !== expected && !withUid)
  ) {
    throw new HttpError(400, `Cannot serve ${kind}: unexpected path`);
  }
  const pod = findPod(deps, namespace, podName);
  const uid = pod.metadata?.uid ?? '';
  const q = target.query;
  if (kind === 'portForward') {
    const ports = [...q.getAll('port'), ...q.getAll('ports').flatMap((p) => p.split(','))].map(
      (p) => {
        if (!/^\d{1,5}$/.test(p) || Number(p) < 1 || Number(p) > 65535) {
          throw new HttpError(400, `Cannot forward port "${p}": expected an integer in [1, 65535]`);
        }
        return Number(p);
      },
    );
    const sandboxes = await deps.cri.runtime.listPodSandbox(
      {
        filter: {
          labelSelector: { [POD_UID_LABEL]: uid },
          state: { state: cri.PodSandboxState.SANDBOX_READY },
        },
      },
      { signal },
    );
    const sandbox = sandboxes.items[0];
    if (sandbox === undefined)
      throw new HttpError(404, `pod "${namespace}/${podName}" has no ready sandbox`);
    const r = await deps.cri.runtime.portForward(
      { podSandboxId: sandbox.id, port: ports },
      { signal },
    );
    return { url: r.url };
  }
  const name = withUid ? target.segments[4] : container;
  if (withUid && target.segments[3] !== uid)
    throw new HttpError(404, `pod "${namespace}/${podName}" with that UID not found`);
  if (name === undefined)
    throw new HttpError(400, `Cannot serve ${kind}: no container in the path`);
  requireContainer(pod, name);
  const stdin = boolParam(q, 'stdin', 'input');
  const stdout = boolParam(q, 'stdout', 'output');
  const stderr = boolParam(q, 'stderr', 'error');
  const tty = boolParam(q, 'tty');
  if (!stdin && !stdout && !stderr)
    throw new HttpError(400, 'Cannot stream: at least one of stdin, stdout or stderr is required');
  const streams: StreamFlags = { stdin, stdout, stderr: stderr && !tty, tty };
  const cmd = q.getAll('command');
  if (kind === 'exec' && cmd.length === 0)
    throw new HttpError(400, 'Cannot exec: no command given');
  const ask = async (containerId: string): Promise<StreamTarget> => {
    const r =
      kind === 'attach'
        ? await deps.cri.runtime.attach({ containerId, ...streams }, { signal })
        : await deps.cri.runtime.exec({ containerId, cmd, ...streams }, { signal });
    return { url: r.url, streams };
  };
  // The PLEG's last relist (at most a second old) names the running container without a
  // CRI round trip (about 1 ms here); if that container has ended since, the runtime
  // refuses it and the live listing below decides.
  const cached = deps.runtimeCache
    ?.get(uid)
    .containers.find(
      (c) =>
        c.state === cri.ContainerState.CONTAINER_RUNNING && c.labels[CONTAINER_NAME_LABEL] === name,
    );
  if (cached !== undefined) {
    try {
      return await ask(cached.id);
    } catch (err) {
      if (signal.aborted) throw err;
    }
  }
  const running = (await runtimeContainers(deps, uid, name, signal)).find(
    (c) => c.state === cri.ContainerState.CONTAINER_RUNNING,
  );
  if (running === undefined)
    throw new HttpError(404, `container "${name}" in pod "${namespace}/${podName}" is not running`);
  return await ask(running.id);
}
