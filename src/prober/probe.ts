/**
 * Runs one probe attempt (exec, httpGet, tcpSocket) and says whether it passed. No
 * thresholds or timing here: the worker (worker.ts) decides what a result means.
 * gRPC probes are not implemented yet and report a failure that says so.
 */
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Container, Probe } from 'kubernetes-types/core/v1.js';
import { CriError, type CriClient } from '../cri/index.ts';

/** The outcome of one attempt; `output` is what the Unhealthy event shows. */
export interface ProbeOutcome {
  readonly result: 'success' | 'failure';
  readonly output: string;
}

/** Where and in what a probe runs. */
export interface ProbeTarget {
  readonly containerId: string;
  readonly container: Container;
  /** The pod's IP (sandbox status); undefined before the network is set up. */
  readonly podIP: string | undefined;
}

/** Upstream caps what it reads of an HTTP probe's body at 10 KiB. */
const MAX_BODY = 10 * 1024;
const USER_AGENT = 'kube-probe/1.37';

const fail = (output: string): ProbeOutcome => ({ result: 'failure', output });

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

/**
 * Runs `probe` once. Never throws for probe failures (they are results); rejects only
 * when `signal` aborts, so a stopping worker ends quietly.
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
    const port = resolvePort(probe.httpGet.port, target.container);
    if (port === undefined) return fail(`unable to resolve port ${String(probe.httpGet.port)}`);
    const host = probe.httpGet.host ?? target.podIP;
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
    const port = resolvePort(probe.tcpSocket.port, target.container);
    if (port === undefined) return fail(`unable to resolve port ${String(probe.tcpSocket.port)}`);
    const host = probe.tcpSocket.host ?? target.podIP;
    if (host === undefined || host === '') return fail('the pod has no IP address yet');
    return withTimeout(signal, timeoutSeconds * 1000, (s) => tcpProbe(host, port, s));
  }
  if (probe.grpc !== undefined) return fail('gRPC probes are not supported by berth yet');
  return fail('the probe has no handler (exec, httpGet, tcpSocket or grpc)');
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

interface HttpTarget {
  readonly scheme: 'http' | 'https';
  readonly host: string;
  readonly port: number;
  readonly path: string;
  readonly headers: readonly { readonly name: string; readonly value: string }[];
}

function httpProbe(t: HttpTarget, signal: AbortSignal): Promise<ProbeOutcome> {
  const headers: Record<string, string> = { 'user-agent': USER_AGENT, accept: '*/*' };
  for (const h of t.headers) headers[h.name.toLowerCase()] = h.value;
  const request = t.scheme === 'https' ? https.request : http.request;
  return new Promise((resolve) => {
    const req = request(
      {
        host: t.host,
        port: t.port,
        path: t.path.startsWith('/') ? t.path : `/${t.path}`,
        method: 'GET',
        headers,
        signal,
        // Probes skip certificate checks, as upstream does.
        ...(t.scheme === 'https' && { rejectUnauthorized: false }),
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (body.length < MAX_BODY) body += chunk.slice(0, MAX_BODY - body.length);
        });
        res.on('end', () => {
          const code = res.statusCode ?? 0;
          // 3xx counts as success: redirects are not followed (in particular not to
          // another host), which upstream also treats as a pass.
          resolve(
            code >= 200 && code < 400
              ? { result: 'success', output: body }
              : fail(`HTTP probe failed with statuscode: ${code}`),
          );
        });
        res.on('error', (err) => {
          resolve(fail(err.message));
        });
      },
    );
    req.on('error', (err) => {
      resolve(fail(signal.aborted ? 'timeout waiting for the HTTP response' : err.message));
    });
    req.end();
  });
}

function tcpProbe(host: string, port: number, signal: AbortSignal): Promise<ProbeOutcome> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, signal });
    socket.once('connect', () => {
      socket.destroy();
      resolve({ result: 'success', output: '' });
    });
    socket.once('error', (err) => {
      resolve(fail(signal.aborted ? `dial tcp ${host}:${port}: i/o timeout` : err.message));
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
