/**
 * The probe benchmark's pods and how their probe logs are read back. Each pod's
 * container logs the wall-clock time at which every readiness and liveness request
 * reached it, one log per probe. The container's clock is the host's, so the logs line
 * up with the benchmark's measurement window. Logs are read with CRI ExecSync, not
 * through the agent, so reading them costs both agents the same (nothing).
 *
 * Two targets serve the probes:
 * - `server` (default): /probe-target from the grpc-health test image, a Go HTTP server
 *   that stamps each request on arrival and forks nothing. What it logs is when the
 *   agent's probe arrived.
 * - `cgi`: busybox httpd with two CGI scripts that append `ts` output. Each probe forks
 *   httpd's child, a shell and a pipeline, so at 100 pods (200 probes a second) the
 *   logged time also holds how long those processes waited for a CPU. Kept to compare
 *   with the runs made with it.
 */
import type { Container, Pod, Probe, Volume } from 'kubernetes-types/core/v1.js';
import { GrpcCriClient } from '../src/cri/index.ts';
import type { Cluster } from '../test/harness/cluster.ts';
import { parseProbeLog } from './probe-stats.ts';

export const PROBE_PORT = 8080;

export type ProbeTargetKind = 'server' | 'cgi';
export const PROBE_TARGETS: readonly ProbeTargetKind[] = ['server', 'cgi'];

// `ts %.s` (busybox) prints the epoch with microseconds; busybox date has no %N.
// ${0##*/} is the script's own name, so one script serves both paths.
const CGI_LINES = [
  '#!/bin/sh',
  'echo | ts %.s >> /tmp/${0##*/}.log',
  'printf "Content-Type: text/plain\\r\\n\\r\\nok\\n"',
];

/** The CGI container's shell command: writes the site, then execs httpd in the foreground. */
const HTTPD_SCRIPT = [
  'mkdir -p /www/cgi-bin',
  'echo ok > /www/index.html',
  `printf '%s\\n' ${CGI_LINES.map((l) => `'${l}'`).join(' ')} > /www/cgi-bin/r`,
  'chmod +x /www/cgi-bin/r',
  'cp /www/cgi-bin/r /www/cgi-bin/l',
  `exec httpd -f -p ${PROBE_PORT} -h /www`,
].join(' && ');

const SERVER_LOG_DIR = '/log';

/** How one kind of target is run, probed and read back. */
interface TargetShape {
  readonly readinessPath: string;
  readonly livenessPath: string;
  container(cluster: Cluster): Pick<Container, 'image' | 'command' | 'volumeMounts'>;
  readonly volumes: Volume[];
  /** The ExecSync command that prints the log of `probe` ('r' or 'l'). */
  catLog(probe: 'r' | 'l'): string[];
}

const TARGETS: Record<ProbeTargetKind, TargetShape> = {
  server: {
    readinessPath: '/r',
    livenessPath: '/l',
    container: (cluster) => ({
      image: cluster.images.grpcHealthLocal,
      command: ['/probe-target', '-port', String(PROBE_PORT), '-dir', SERVER_LOG_DIR],
      volumeMounts: [{ name: 'log', mountPath: SERVER_LOG_DIR }],
    }),
    volumes: [{ name: 'log', emptyDir: {} }],
    catLog: (probe) => ['/probe-target', '-cat', `${SERVER_LOG_DIR}/${probe}.log`],
  },
  cgi: {
    readinessPath: '/cgi-bin/r',
    livenessPath: '/cgi-bin/l',
    container: (cluster) => ({
      image: cluster.images.busyboxLocal,
      command: ['sh', '-c', HTTPD_SCRIPT],
    }),
    volumes: [],
    catLog: (probe) => ['cat', `/tmp/${probe}.log`],
  },
};

/** One benchmark pod: the preloaded busybox image, readiness and liveness every second. */
export function probePod(
  cluster: Cluster,
  options: {
    readonly name: string;
    readonly namespace: string;
    readonly nodeName: string;
    readonly labels: Record<string, string>;
    readonly target: ProbeTargetKind;
  },
): Pod {
  const target = TARGETS[options.target];
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
      volumes: target.volumes,
      containers: [
        {
          name: 'httpd',
          ...target.container(cluster),
          imagePullPolicy: 'Never',
          readinessProbe: probe(target.readinessPath),
          livenessProbe: probe(target.livenessPath),
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
  cmd: string[],
): Promise<number[]> {
  const res = await client.runtime.execSync({ containerId, cmd, timeout: 30n });
  if (res.exitCode !== 0) {
    throw new Error(
      `Cannot read a probe log in ${containerId}: ${cmd.join(' ')} exited ${res.exitCode}: ${res.stderr.toString()}`,
    );
  }
  return parseProbeLog(res.stdout.toString('utf8'));
}

/** Reads both probe logs of every pod, `concurrency` pods at a time. */
export async function readProbeLogs(
  cluster: Cluster,
  namespace: string,
  pods: readonly string[],
  kind: ProbeTargetKind,
  concurrency = 4,
): Promise<ProbeLogs[]> {
  const target = TARGETS[kind];
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
            readiness: await readLog(client, newest.id, target.catLog('r')),
            liveness: await readLog(client, newest.id, target.catLog('l')),
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
