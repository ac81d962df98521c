/**
 * Runs one probe attempt (exec, httpGet, tcpSocket, grpc) and says whether it passed.
 * No thresholds or timing here: the worker (worker.ts) decides what a result means.
 */
import net from 'node:net';
import type { Container, Probe } from 'kubernetes-types/core/v1.js';
import { CriError, type CriClient } from '../cri/index.ts';
import { BerthError } from '../util/errors.ts';
import { grpcProbe } from './grpc-probe.ts';
import { goNetErrorText, joinHostPort } from './net-error.ts';
import {
  formatUrl,
  httpGet,
  HttpGetError,
  type HttpGetResponse,
  type HttpGetTarget,
} from './http-get.ts';

/**
 * The outcome of one attempt; `output` is what the Unhealthy event shows. A warning
 * counts as a success that is reported with a ProbeWarning event (upstream's
 * probe.Warning: an httpGet redirect to another host, which is not followed).
 */
export interface ProbeOutcome {
  readonly result: 'success' | 'failure' | 'warning';
  readonly output: string;
}

/** Where and in what a probe runs. */
export interface ProbeTarget {
  readonly containerId: string;
  readonly container: Container;
  /** The pod's IP (sandbox status); undefined before the network is set up. */
  readonly podIP: string | undefined;
}

const fail = (output: string): ProbeOutcome => ({ result: 'failure', output });

/**
 * A probe that cannot be run as written (a port name the container does not declare,
 * a port out of range, no handler). Upstream calls this an error, not a failure: the
 * attempt is reported and thrown away, so it counts toward no threshold and a liveness
 * probe with a typo never kills the container.
 */
export class ProbeConfigError extends BerthError {
  constructor(message: string) {
    super('BERTH_PROBE_CONFIG', message);
  }
}

/** resolvePort, or upstream's error for a port that cannot be probed. */
function portOrThrow(port: number | string | undefined, container: Container): number {
  const resolved = resolvePort(port, container);
  if (resolved !== undefined) return resolved;
  if (typeof port === 'string' && !/^\d+$/.test(port))
    throw new ProbeConfigError(`port "${port}" not found`);
  throw new ProbeConfigError(`invalid port number: ${String(port)}`);
}

/** Resolves a numeric or named container port; undefined when the name is unknown. */
export function resolvePort(
  port: number | string | undefined,
  container: Container,
): number | undefined {
  if (typeof port === 'number') return port > 0 && port < 65536 ? port : undefined;
  if (port === undefined) return undefined;
  if (/^\d+$/.test(port)) return resolvePort(Number(port), container);
  return container.ports?.find((p) => p.name === port)?.containerPort;
}

/** The probe's own host, or the pod IP when it names none (an empty host means none). */
function hostOrPodIP(host: string | undefined, podIP: string | undefined): string | undefined {
  return host === undefined || host === '' ? podIP : host;
}

/**
 * Runs `probe` once. Never throws for probe failures (they are results); rejects with
 * ProbeConfigError for a probe that cannot run, and when `signal` aborts, so a stopping
 * worker ends quietly.
 */
export async function runProbe(
  probe: Probe,
  target: ProbeTarget,
  runtime: Pick<CriClient['runtime'], 'execSync'>,
  signal: AbortSignal,
): Promise<ProbeOutcome> {
  const timeoutSeconds = Math.max(1, probe.timeoutSeconds ?? 1);
  if (probe.exec !== undefined)
    return execProbe(probe.exec.command ?? [], timeoutSeconds, target, runtime, signal);
  if (probe.httpGet !== undefined) {
    const port = portOrThrow(probe.httpGet.port, target.container);
    const host = hostOrPodIP(probe.httpGet.host, target.podIP);
    if (host === undefined || host === '') return fail('the pod has no IP address yet');
    return withTimeout(signal, timeoutSeconds * 1000, (s) =>
      httpProbe(
        {
          scheme: probe.httpGet?.scheme === 'HTTPS' ? 'https' : 'http',
          host,
          port,
          path: probe.httpGet?.path ?? '/',
          headers: probe.httpGet?.httpHeaders ?? [],
        },
        s,
      ),
    );
  }
  if (probe.tcpSocket !== undefined) {
    const port = portOrThrow(probe.tcpSocket.port, target.container);
    const host = hostOrPodIP(probe.tcpSocket.host, target.podIP);
    if (host === undefined || host === '') return fail('the pod has no IP address yet');
    return withTimeout(signal, timeoutSeconds * 1000, (s) => tcpProbe(host, port, s));
  }
  if (probe.grpc !== undefined) {
    // GRPCAction has no host: upstream always probes the pod IP.
    const port = portOrThrow(probe.grpc.port, target.container);
    const host = target.podIP;
    if (host === undefined || host === '') return fail('the pod has no IP address yet');
    const service = probe.grpc.service ?? '';
    return grpcProbe({ host, port, service }, timeoutSeconds, signal);
  }
  throw new ProbeConfigError('the probe has no handler (exec, httpGet, tcpSocket or grpc)');
}

async function execProbe(
  command: readonly string[],
  timeoutSeconds: number,
  target: ProbeTarget,
  runtime: Pick<CriClient['runtime'], 'execSync'>,
  signal: AbortSignal,
): Promise<ProbeOutcome> {
  try {
    const r = await runtime.execSync(
      { containerId: target.containerId, cmd: [...command], timeout: BigInt(timeoutSeconds) },
      // The runtime enforces the probe timeout; the call deadline only guards a stuck runtime.
      { signal, timeoutMs: (timeoutSeconds + 10) * 1000 },
    );
    const output = Buffer.concat([r.stdout, r.stderr]).toString('utf8');
    return r.exitCode === 0
      ? { result: 'success', output }
      : fail(output === '' ? `command exited with code ${r.exitCode}` : output);
  } catch (err) {
    if (signal.aborted) throw err;
    if (err instanceof CriError && err.code === 'BERTH_CRI_DEADLINE_EXCEEDED')
      return fail(`command timed out after ${timeoutSeconds}s`);
    return fail(err instanceof CriError ? err.details : String(err));
  }
}

/** Upstream's classification of an httpGet answer: 2xx passes, 3xx passes with a warning. */
async function httpProbe(t: HttpGetTarget, signal: AbortSignal): Promise<ProbeOutcome> {
  let res: HttpGetResponse;
  try {
    res = await httpGet(t, 'probe', signal);
  } catch (err) {
    // The timeout aborted it (a parent abort is rethrown by withTimeout).
    if (signal.aborted)
      return fail(
        `Get "${formatUrl(t)}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`,
      );
    if (!(err instanceof HttpGetError)) throw err;
    return fail(err.message);
  }
  const code = res.statusCode;
  if (code >= 200 && code < 300) return { result: 'success', output: res.body };
  // Only a redirect that was not followed (another host, or no Location) gets here.
  if (code >= 300 && code < 400)
    return { result: 'warning', output: `Probe terminated redirects, Response body: ${res.body}` };
  // Upstream keeps the body out of the message: it may hold what the event must not show.
  return fail(`HTTP probe failed with statuscode: ${code}`);
}

function tcpProbe(host: string, port: number, signal: AbortSignal): Promise<ProbeOutcome> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, signal });
    socket.once('connect', () => {
      socket.destroy();
      resolve({ result: 'success', output: '' });
    });
    socket.once('error', (err) => {
      resolve(
        fail(
          signal.aborted
            ? `dial tcp ${joinHostPort(host, port)}: i/o timeout`
            : goNetErrorText(err, { host, port }),
        ),
      );
    });
  });
}

/**
 * Runs `fn` with a signal that aborts after `ms` or when `parent` aborts; the parent's
 * listener and the timer are always removed, so a worker's long-lived signal does not
 * collect one listener per probe. A parent abort rejects, a timeout resolves through `fn`.
 */
async function withTimeout<T>(
  parent: AbortSignal,
  ms: number,
  fn: (s: AbortSignal) => Promise<T>,
): Promise<T> {
  const ac = new AbortController();
  const onAbort = (): void => {
    ac.abort(parent.reason);
  };
  parent.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => {
    ac.abort(new Error('probe timeout'));
  }, ms);
  try {
    const out = await fn(ac.signal);
    parent.throwIfAborted();
    return out;
  } finally {
    clearTimeout(timer);
    parent.removeEventListener('abort', onAbort);
  }
}
