/**
 * The probe benchmark's pods and how their probe logs are read back. Each pod runs
 * busybox httpd with two CGI scripts, /cgi-bin/r (readiness) and /cgi-bin/l
 * (liveness), that append the time each request reached the container to
 * /tmp/<script>.log. The container's clock is the host's, so the logs line up with the
 * benchmark's measurement window. Logs are read with CRI ExecSync, not through the
 * agent, so reading them costs both agents the same (nothing).
 */
import type { Pod, Probe } from 'kubernetes-types/core/v1.js';
import { GrpcCriClient } from '../src/cri/index.ts';
import type { Cluster } from '../test/harness/cluster.ts';
import { parseProbeLog } from './probe-stats.ts';

export const PROBE_PORT = 8080;
export const READINESS_PATH = '/cgi-bin/r';
export const LIVENESS_PATH = '/cgi-bin/l';

// `ts %.s` (busybox) prints the epoch with microseconds; busybox date has no %N.
// ${0##*/} is the script's own name, so one script serves both paths.
const CGI_LINES = [
  '#!/bin/sh',
  'echo | ts %.s >> /tmp/${0##*/}.log',
  'printf "Content-Type: text/plain\\r\\n\\r\\nok\\n"',
];

/** The container's shell command: writes the site, then execs httpd in the foreground. */
export const HTTPD_SCRIPT = [
  'mkdir -p /www/cgi-bin',
  'echo ok > /www/index.html',
  `printf '%s\\n' ${CGI_LINES.map((l) => `'${l}'`).join(' ')} > /www/cgi-bin/r`,
  'chmod +x /www/cgi-bin/r',
  'cp /www/cgi-bin/r /www/cgi-bin/l',
  `exec httpd -f -p ${PROBE_PORT} -h /www`,
].join(' && ');

/** One benchmark pod: the preloaded busybox image, readiness and liveness every second. */
export function probePod(
  cluster: Cluster,
  options: {
    readonly name: string;
    readonly namespace: string;
    readonly nodeName: string;
    readonly labels: Record<string, string>;
  },
): Pod {
  const probe = (path: string): Probe => ({
    httpGet: { path, port: PROBE_PORT },
    periodSeconds: 1,
  });
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: options.name, namespace: options.namespace, labels: options.labels },
    spec: {
      nodeName: options.nodeName,
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 1,
      restartPolicy: 'Always',
      // The test cluster runs no DNS; ClusterFirst would only add a warning event per pod.
      dnsPolicy: 'Default',
      containers: [
        {
          name: 'httpd',
          image: cluster.images.busyboxLocal,
          imagePullPolicy: 'Never',
          command: ['sh', '-c', HTTPD_SCRIPT],
          readinessProbe: probe(READINESS_PATH),
          livenessProbe: probe(LIVENESS_PATH),
        },
      ],
    },
  };
}

/** Ready condition True. */
export function isReady(pod: Pod): boolean {
  return (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

export interface ProbeLogs {
  readonly pod: string;
  /** Epoch ms of each request, ascending; empty when the log could not be read. */
  readonly readiness: readonly number[];
  readonly liveness: readonly number[];
  readonly error?: string;
}

const CONTAINER_RUNNING = 1;

async function readLog(
  client: GrpcCriClient,
  containerId: string,
  file: string,
): Promise<number[]> {
  const res = await client.runtime.execSync({
    containerId,
    cmd: ['cat', file],
    timeout: 30n,
  });
  if (res.exitCode !== 0) {
    throw new Error(
      `Cannot read ${file} in ${containerId}: cat exited ${res.exitCode}: ${res.stderr.toString()}`,
    );
  }
  return parseProbeLog(res.stdout.toString('utf8'));
}

/** Reads both probe logs of every pod, `concurrency` pods at a time. */
export async function readProbeLogs(
  cluster: Cluster,
  namespace: string,
  pods: readonly string[],
  concurrency = 4,
): Promise<ProbeLogs[]> {
  const client = new GrpcCriClient(cluster.runtime.socket, { defaultTimeoutMs: 60_000 });
  try {
    const out: ProbeLogs[] = [];
    let next = 0;
    const worker = async (): Promise<void> => {
      for (let i = next++; i < pods.length; i = next++) {
        const pod = pods[i];
        if (pod === undefined) continue;
        try {
          const { containers } = await client.runtime.listContainers({
            filter: {
              state: { state: CONTAINER_RUNNING },
              labelSelector: {
                'io.kubernetes.pod.name': pod,
                'io.kubernetes.pod.namespace': namespace,
              },
            },
          });
          const newest = containers.sort((a, b) => Number(b.createdAt - a.createdAt))[0];
          if (newest === undefined) throw new Error(`Cannot find a running container of ${pod}`);
          out.push({
            pod,
            readiness: await readLog(client, newest.id, '/tmp/r.log'),
            liveness: await readLog(client, newest.id, '/tmp/l.log'),
          });
        } catch (err) {
          out.push({ pod, readiness: [], liveness: [], error: String(err) });
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    return out.sort((a, b) => a.pod.localeCompare(b.pod, 'en', { numeric: true }));
  } finally {
    client.close();
  }
}
