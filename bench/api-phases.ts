/**
 * The measured operations of the kubelet API benchmarks (bench/api.ts one agent after
 * another, bench/api-paired.ts both at once), each one kubectl invocation through the
 * real API server: the pods they need, one `kubectl exec -- true`, one `kubectl logs
 * -f` of a fast writer, one download through `kubectl port-forward`.
 */
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { Cluster } from '../test/harness/cluster.ts';
import { run } from '../test/harness/exec.ts';
import { forwardedPort, MarkerScanner, mibPerSecond } from './api-stats.ts';

export const NAMESPACE = 'berth-bench-api';
const MARKER = 'BENCH-END-OF-LOG';

/** The sizes the pods are made for. */
export interface PhaseSizes {
  readonly logBytes: number;
  readonly forwardBytes: number;
  /** How many log writers (one per follow round). */
  readonly rounds: number;
}

/** A busybox pod bound to `node` that runs `script`; in the benchmark's namespace by default. */
export function busyboxPod(
  cluster: Cluster,
  name: string,
  node: string,
  script: string,
  namespace = NAMESPACE,
): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace },
    spec: {
      nodeName: node,
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'main',
          image: cluster.images.busyboxLocal,
          imagePullPolicy: 'Never',
          command: ['sh', '-c', script],
        },
      ],
    },
  };
}

const kubectlArgs = (cluster: Cluster, args: readonly string[]): string[] => [
  '--kubeconfig',
  cluster.adminKubeconfig,
  '-n',
  NAMESPACE,
  ...args,
];

/** Runs kubectl in the benchmark's namespace. */
export async function kubectl(
  cluster: Cluster,
  args: readonly string[],
  options: { input?: string; timeoutMs?: number; okCodes?: readonly number[] } = {},
): Promise<string> {
  return (await run(cluster.bin.kubectl, kubectlArgs(cluster, args), options)).stdout;
}

/**
 * The pods one pass needs on `node`: one to exec in, busybox httpd serving a
 * `forwardBytes` file, and `rounds` loggers, each waiting for /tmp/go and then writing
 * `logBytes` of 99-character lines and the marker.
 */
export function benchPods(cluster: Cluster, node: string, prefix: string, s: PhaseSizes): Pod[] {
  const logger = (r: number) =>
    busyboxPod(
      cluster,
      `${prefix}-logs-${r}`,
      node,
      `echo ready; while [ ! -e /tmp/go ]; do sleep 0.05; done; ` +
        `head -c ${s.logBytes} /dev/zero | tr '\\0' a | fold -w 99; echo ${MARKER}; sleep 3600`,
    );
  return [
    busyboxPod(cluster, `${prefix}-exec`, node, 'sleep 3600'),
    busyboxPod(
      cluster,
      `${prefix}-web`,
      node,
      `mkdir -p /www; head -c ${s.forwardBytes} /dev/zero > /www/big; echo up; httpd -f -p 8080 -h /www`,
    ),
    ...Array.from({ length: s.rounds }, (_, r) => logger(r)),
  ];
}

/** Creates `pods` and waits until every pod of the namespace is Ready. */
export async function createPods(cluster: Cluster, pods: readonly Pod[]): Promise<void> {
  await kubectl(cluster, ['apply', '-f', '-'], {
    input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: pods }),
  });
  await kubectl(cluster, ['wait', '--for=condition=Ready', 'pod', '--all', '--timeout=180s'], {
    timeoutMs: 200_000,
  });
}

/** Deletes every pod of the namespace, without waiting. */
export async function deletePods(cluster: Cluster): Promise<void> {
  await kubectl(
    cluster,
    ['delete', 'pods', '--all', '--grace-period=0', '--force', '--wait=false'],
    {
      okCodes: [0, 1],
    },
  );
}

/** One `kubectl exec <prefix>-exec -- true`; its round trip in milliseconds. */
export async function execOnce(cluster: Cluster, prefix: string): Promise<number> {
  const t = performance.now();
  await kubectl(cluster, ['exec', `${prefix}-exec`, '--', 'true']);
  return performance.now() - t;
}

interface Followed {
  /** From the spawn of kubectl to its first stdout byte. */
  readonly firstByteMs: number;
  readonly scanner: MarkerScanner;
  /** When each stdout chunk arrived (performance.now()) and the bytes before it. */
  readonly chunks: readonly { readonly at: number; readonly offset: number }[];
  readonly endMs: number;
}

/** Spawns kubectl; resolves once `MARKER` has been printed. */
function follow(
  cluster: Cluster,
  args: readonly string[],
  onFirstByte: () => void,
): Promise<Followed> {
  const child = spawn(cluster.bin.kubectl, kubectlArgs(cluster, args), {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const started = performance.now();
  const scanner = new MarkerScanner(MARKER);
  let firstByteMs = -1;
  const chunks: { at: number; offset: number }[] = [];
  return new Promise<Followed>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      const at = performance.now();
      chunks.push({ at, offset: scanner.bytes });
      if (firstByteMs < 0) {
        firstByteMs = at - started;
        onFirstByte();
      }
      if (scanner.push(chunk)) {
        resolve({ firstByteMs, scanner, chunks, endMs: at });
        child.kill('SIGTERM');
      }
    });
    child.on('exit', (code) => {
      reject(new Error(`kubectl ${args.join(' ')} exited (${String(code)}) before the marker`));
    });
  });
}

/**
 * Follows logger `round` of the pod set with `kubectl logs -f`, triggers its output once
 * the follow has printed the first line, and reads to the marker: the follow's first
 * byte (from kubectl's spawn) and the bulk's throughput (from the first chunk after the
 * trigger, so the trigger's own exec round trip is not counted).
 */
export async function followRound(
  cluster: Cluster,
  prefix: string,
  round: number,
): Promise<{ firstByteMs: number; mibps: number | null }> {
  const podName = `${prefix}-logs-${round}`;
  let sawFirst: () => void = () => undefined;
  const first = new Promise<void>((resolve) => (sawFirst = resolve));
  const f = follow(cluster, ['logs', '-f', podName], () => {
    sawFirst();
  });
  await first;
  const trigger = performance.now();
  await kubectl(cluster, ['exec', podName, '--', 'touch', '/tmp/go']);
  const { firstByteMs, scanner, chunks, endMs } = await f;
  const bulk = chunks.find((c) => c.at > trigger) ?? { at: trigger, offset: 0 };
  return {
    firstByteMs,
    mibps: mibPerSecond((scanner.bytesBefore ?? 0) - bulk.offset, endMs - bulk.at),
  };
}

/**
 * `kubectl logs -f` of the pod set's httpd, which printed one line: milliseconds from
 * kubectl's spawn to its first output byte. kubectl is stopped then.
 */
export function firstByteOnce(cluster: Cluster, prefix: string): Promise<number> {
  const child = spawn(cluster.bin.kubectl, kubectlArgs(cluster, ['logs', '-f', `${prefix}-web`]), {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const started = performance.now();
  return new Promise<number>((resolve, reject) => {
    child.stdout.once('data', () => {
      resolve(performance.now() - started);
      child.kill('SIGTERM');
    });
    child.on('exit', (code) => {
      reject(new Error(`kubectl logs -f ${prefix}-web exited (${String(code)}) before a byte`));
    });
  });
}

/** GETs http://127.0.0.1:port/big; the bytes and milliseconds it took. */
function download(port: number): Promise<{ bytes: number; ms: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request({ host: '127.0.0.1', port, path: '/big' }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => (bytes += c.length));
      res.on('end', () => {
        resolve({ bytes, ms: performance.now() - started });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** `kubectl port-forward` to the pod set's httpd and one download of its file: MiB/s. */
export async function forwardRound(
  cluster: Cluster,
  prefix: string,
  forwardBytes: number,
): Promise<number | null> {
  const child = spawn(
    cluster.bin.kubectl,
    kubectlArgs(cluster, ['port-forward', `pod/${prefix}-web`, ':8080']),
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString();
        const p = forwardedPort(out);
        if (p !== undefined) resolve(p);
      });
      child.on('exit', () => {
        reject(new Error(`kubectl port-forward exited: ${out}`));
      });
    });
    const got = await download(port);
    if (got.bytes !== forwardBytes)
      throw new Error(`port-forward moved ${got.bytes} bytes, not ${forwardBytes}`);
    return mibPerSecond(got.bytes, got.ms);
  } finally {
    child.kill('SIGTERM');
  }
}
