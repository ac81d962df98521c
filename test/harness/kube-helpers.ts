/** Small kubectl-based helpers for end-to-end tests: apply, get JSON, wait for a condition. */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster } from './cluster.ts';

export async function applyJson(cluster: Cluster, obj: unknown): Promise<void> {
  await cluster.kubectl(['apply', '-f', '-'], { input: JSON.stringify(obj) });
}

export async function getJson<T>(
  cluster: Cluster,
  args: readonly string[],
): Promise<T | undefined> {
  try {
    return JSON.parse(await cluster.kubectl([...args, '-o', 'json'])) as T;
  } catch (err) {
    if (err instanceof Error && /NotFound|not found/.test(err.message)) return undefined;
    throw err;
  }
}

/** Polls until `check` returns a value (not undefined); fails with the last observation. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 60_000,
  intervalMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `Timed out after ${timeoutMs} ms waiting for ${what}${last instanceof Error ? `: ${last.message}` : ''}`,
      );
    await sleep(intervalMs);
  }
}

export async function getPod(cluster: Cluster, ns: string, name: string): Promise<Pod | undefined> {
  return getJson<Pod>(cluster, ['-n', ns, 'get', 'pod', name]);
}

export async function waitForPod(
  cluster: Cluster,
  ns: string,
  name: string,
  what: string,
  ok: (pod: Pod) => boolean,
  timeoutMs = 60_000,
): Promise<Pod> {
  return eventually(
    `pod ${ns}/${name} ${what}`,
    async () => {
      const pod = await getPod(cluster, ns, name);
      return pod !== undefined && ok(pod) ? pod : undefined;
    },
    timeoutMs,
  );
}

export const isRunningAndReady = (pod: Pod): boolean =>
  pod.status?.phase === 'Running' &&
  (pod.status.containerStatuses ?? []).every((c) => c.ready && c.state?.running !== undefined);

export interface EventSummary {
  reason: string;
  message: string;
  type: string;
  involvedObject: { name?: string; uid?: string; fieldPath?: string };
  source?: { component?: string; host?: string };
}

export async function podEvents(
  cluster: Cluster,
  ns: string,
  name: string,
): Promise<EventSummary[]> {
  const list = await getJson<{ items: EventSummary[] }>(cluster, [
    '-n',
    ns,
    'get',
    'events',
    '--field-selector',
    `involvedObject.name=${name}`,
  ]);
  return list?.items ?? [];
}

/** A busybox pod bound to `node`, with the preloaded image and no service-account volume. */
export function busyboxPod(
  cluster: Cluster,
  name: string,
  node: string,
  opts: {
    command?: string[];
    restartPolicy?: 'Always' | 'OnFailure' | 'Never';
    image?: string;
    imagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';
    namespace?: string;
    grace?: number;
    extraSpec?: Record<string, unknown>;
    containers?: { name: string; command: string[] }[];
  } = {},
): Pod {
  const containers = (
    opts.containers ?? [{ name: 'main', command: opts.command ?? ['sleep', '3600'] }]
  ).map((c) => ({
    name: c.name,
    image: opts.image ?? cluster.images.busyboxLocal,
    imagePullPolicy: opts.imagePullPolicy ?? 'IfNotPresent',
    command: c.command,
  }));
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: opts.namespace ?? 'default' },
    spec: {
      nodeName: node,
      automountServiceAccountToken: false,
      restartPolicy: opts.restartPolicy ?? 'Always',
      terminationGracePeriodSeconds: opts.grace ?? 5,
      containers,
      ...opts.extraSpec,
    },
  };
}

/** A kubernetes.io/dockerconfigjson Secret holding the cluster registry's credentials. */
export async function applyRegistrySecret(
  cluster: Cluster,
  name: string,
  namespace = 'default',
): Promise<void> {
  const { username, password } = cluster.registry.credentials;
  const auth = Buffer.from(`${username}:${password}`).toString('base64');
  const config = JSON.stringify({ auths: { [cluster.registry.host]: { auth } } });
  await applyJson(cluster, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace },
    type: 'kubernetes.io/dockerconfigjson',
    data: { '.dockerconfigjson': Buffer.from(config).toString('base64') },
  });
}

/** Pods in `namespace` matching a label selector. */
export async function listPods(
  cluster: Cluster,
  selector: string,
  namespace = 'default',
): Promise<Pod[]> {
  const list = await getJson<{ items: Pod[] }>(cluster, [
    '-n',
    namespace,
    'get',
    'pods',
    '-l',
    selector,
  ]);
  return list?.items ?? [];
}

/** A busybox pod whose single container `main` gets `extra` (probes, ports, hooks). */
export function probedPod(
  cluster: Cluster,
  name: string,
  node: string,
  command: string[],
  extra: Partial<Container>,
  spec: Record<string, unknown> = {},
): Pod {
  const pod = busyboxPod(cluster, name, node, { command, extraSpec: spec });
  const [main] = pod.spec?.containers ?? [];
  if (main === undefined) throw new Error('busyboxPod made no container');
  return { ...pod, spec: { ...pod.spec, containers: [{ ...main, ...extra }] } };
}
