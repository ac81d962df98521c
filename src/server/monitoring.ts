/**
 * The kubelet API's monitoring routes: /healthz (ping, log, syncloop; `?verbose`,
 * `?exclude=`), /healthz/<check>, /metrics, /metrics/probes, /metrics/resource,
 * /metrics/cadvisor, /stats/summary and /configz. Answers follow upstream byte for byte where clients
 * parse them (the healthz listing, Prometheus text, `{"kubeletconfig": ...}`).
 */
import { cpus, totalmem } from 'node:os';
import type { KubeletMetrics } from '../metrics/registry.ts';
import { renderCadvisorMetrics } from '../stats/cadvisor-metrics.ts';
import { renderResourceMetrics } from '../stats/resource-metrics.ts';
import type { StatsProvider, Summary } from '../stats/types.ts';
import { isAbortError } from '../util/errors.ts';
import type { Logger, LogVerbosity } from '../util/logger.ts';
import { serveDebugFlags } from './debug-flags.ts';
import { HttpError, type ParsedTarget } from './handlers.ts';
import type { ApiRequest, ApiResponse } from './transport.ts';

/** One named healthz check: undefined when healthy, else why not. */
export interface HealthCheck {
  readonly name: string;
  check(): string | undefined;
}

export interface MonitoringDeps {
  readonly logger: Logger;
  readonly metrics: KubeletMetrics | undefined;
  readonly stats: StatsProvider | undefined;
  /** The effective KubeletConfiguration /configz shows; undefined: 404. */
  readonly configz: unknown;
  /** /debug/flags/v's target; undefined: enableDebugFlagsHandler is false. */
  readonly debugFlags?: LogVerbosity | undefined;
  readonly healthChecks: readonly HealthCheck[];
}

const TEXT = 'text/plain; charset=utf-8';
const PROMETHEUS_TEXT = 'text/plain; version=0.0.4; charset=utf-8';

/** The healthz checks upstream's kubelet installs on :10250, in its order. */
export function kubeletHealthChecks(syncLoop?: () => string | undefined): HealthCheck[] {
  return [
    { name: 'ping', check: () => undefined },
    // The log check guards klog's flush; berth's logger writes synchronously.
    { name: 'log', check: () => undefined },
    { name: 'syncloop', check: () => syncLoop?.() },
  ];
}

function readOnly(req: ApiRequest, route: string): void {
  if (req.method !== 'GET' && req.method !== 'HEAD')
    throw new HttpError(405, `Cannot serve ${route}: GET only`);
}

/**
 * Serves the route when it is one of the monitoring routes; false leaves the request to
 * the caller's router.
 */
export async function serveMonitoring(
  deps: MonitoringDeps,
  target: ParsedTarget,
  req: ApiRequest,
  res: ApiResponse,
  signal: AbortSignal,
): Promise<boolean> {
  const [first, second, ...rest] = target.segments;
  const route = `/${target.segments.join('/')}`;
  if (first === 'healthz') {
    if (rest.length > 0) return false;
    readOnly(req, route);
    serveHealthz(deps, second, target.query, res);
    return true;
  }
  if (first === 'metrics' && rest.length === 0) {
    if (second !== undefined && !['probes', 'resource', 'cadvisor'].includes(second)) return false;
    readOnly(req, route);
    if (second === 'resource') {
      await serveResourceMetrics(deps, res, signal);
      return true;
    }
    if (second === 'cadvisor') {
      if (deps.stats === undefined) throw new HttpError(404, '404 page not found');
      const summary = await deps.stats.summary({ onlyCpuAndMemory: false, signal });
      const machine = { cpuCores: cpus().length, memoryBytes: totalmem() };
      res
        .writeHead(200, { 'Content-Type': PROMETHEUS_TEXT })
        .end(renderCadvisorMetrics(summary, machine));
      return true;
    }
    if (deps.metrics === undefined) throw new HttpError(404, '404 page not found');
    const registry = second === 'probes' ? deps.metrics.probesRegistry : deps.metrics.registry;
    const body = await registry.metrics();
    res.writeHead(200, { 'Content-Type': registry.contentType }).end(body);
    return true;
  }
  if (first === 'stats' && second === 'summary' && rest.length === 0) {
    readOnly(req, route);
    if (deps.stats === undefined) throw new HttpError(404, '404 page not found');
    const only = target.query.get('only_cpu_and_memory');
    if (only !== null && only !== 'true' && only !== 'false')
      throw new HttpError(
        400,
        `Cannot parse query parameter only_cpu_and_memory as a boolean: current value is "${only}"`,
      );
    const summary = await deps.stats.summary({ onlyCpuAndMemory: only === 'true', signal });
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(summary));
    return true;
  }
  if (first === 'debug' && second === 'flags' && rest.length === 1 && rest[0] === 'v') {
    await serveDebugFlags(deps.debugFlags, req, res, signal);
    return true;
  }
  if (first === 'configz' && second === undefined) {
    readOnly(req, route);
    if (deps.configz === undefined) throw new HttpError(404, '404 page not found');
    res
      .writeHead(200, { 'Content-Type': 'application/json' })
      .end(JSON.stringify({ kubeletconfig: deps.configz }));
    return true;
  }
  return false;
}

async function serveResourceMetrics(
  deps: MonitoringDeps,
  res: ApiResponse,
  signal: AbortSignal,
): Promise<void> {
  let summary: Summary | undefined;
  if (deps.stats !== undefined) {
    try {
      summary = await deps.stats.summary({ onlyCpuAndMemory: true, signal });
    } catch (err) {
      if (isAbortError(err) || signal.aborted) throw err;
      // Upstream answers 200 with resource_scrape_error 1: the scraper sees why, per node.
      deps.logger.warn('Cannot collect resource metrics', { error: String(err) });
    }
  }
  res.writeHead(200, { 'Content-Type': PROMETHEUS_TEXT }).end(renderResourceMetrics(summary));
}

/** apiserver-style healthz: "ok", or the per-check listing (always shown on failure). */
function serveHealthz(
  deps: MonitoringDeps,
  only: string | undefined,
  query: URLSearchParams,
  res: ApiResponse,
): void {
  if (only !== undefined) {
    const check = deps.healthChecks.find((c) => c.name === only);
    if (check === undefined) throw new HttpError(404, '404 page not found');
    const problem = check.check();
    if (problem === undefined) res.writeHead(200, { 'Content-Type': TEXT }).end('ok');
    else res.writeHead(500, { 'Content-Type': TEXT }).end(`internal server error: ${problem}\n`);
    return;
  }
  const excluded = new Set(query.getAll('exclude'));
  let out = '';
  let failed = false;
  for (const c of deps.healthChecks) {
    if (excluded.delete(c.name)) {
      out += `[+]${c.name} excluded: ok\n`;
      continue;
    }
    const problem = c.check();
    if (problem === undefined) {
      out += `[+]${c.name} ok\n`;
    } else {
      failed = true;
      // The reason goes to the log, not to an unauthenticated-looking endpoint's body.
      out += `[-]${c.name} failed: reason withheld\n`;
      deps.logger.warn('healthz check failed', { check: c.name, reason: problem });
    }
  }
  if (excluded.size > 0) {
    const names = [...excluded].map((n) => JSON.stringify(n)).join(', ');
    out += `warn: some health checks cannot be excluded: no matches for ${names}\n`;
  }
  if (failed) {
    res.writeHead(500, { 'Content-Type': TEXT }).end(`${out}healthz check failed\n`);
    return;
  }
  if (!query.has('verbose')) {
    res.writeHead(200, { 'Content-Type': TEXT }).end('ok');
    return;
  }
  res.writeHead(200, { 'Content-Type': TEXT }).end(`${out}healthz check passed\n`);
}
