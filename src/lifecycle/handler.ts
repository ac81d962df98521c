/**
 * Runs a container's lifecycle handler (postStart or preStop): exec through CRI
 * ExecSync, httpGet, or sleep. As upstream:
 * - exec has no timeout of its own (ExecSync timeout 0, no call deadline): the
 *   caller's signal bounds it (the preStop grace period, the pod sync);
 * - httpGet has no timeout either, sends User-Agent kube-lifecycle/1.37, follows
 *   same-host redirects, and any HTTP answer counts as success (the status code is not
 *   checked); a handler with scheme HTTPS answered in plain HTTP is retried over HTTP
 *   without the Authorization header, with a Warning event LifecycleHTTPFallback;
 * - sleep waits its seconds on the injected clock.
 */
import type { Container, LifecycleHandler, Pod } from 'kubernetes-types/core/v1.js';
import { CriError, type CriClient } from '../cri/index.ts';
import type { EventRecorder } from '../events/types.ts';
import { podDescription } from '../container/format.ts';
import { formatUrl, httpGet, HttpGetError, type HttpGetTarget } from '../prober/http-get.ts';
import { resolvePort } from '../prober/probe.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import { podTarget } from '../events/targets.ts';

/**
 * The outcome of a handler. `message` is upstream's description of a failure (the
 * handler, container, pod and error, with an exec handler's output); it belongs in logs
 * and the container's waiting message, not in events, which upstream keeps to
 * "PostStartHook failed" / "PreStopHook failed" so that output cannot leak secrets.
 */
export type HandlerResult =
  { readonly ok: true } | { readonly ok: false; readonly message: string; readonly error: string };

export interface HandlerRunnerOptions {
  readonly runtime: Pick<CriClient['runtime'], 'execSync'>;
  readonly recorder: EventRecorder;
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * The pod's IP for httpGet handlers without a host (upstream reads the runtime's pod
   * status, as the API status may not have it yet right after the sandbox started).
   * Default: `pod.status.podIP`.
   */
  readonly podIP?: (pod: Pod, signal: AbortSignal) => Promise<string | undefined>;
}

/** Go's %v of a []string: `[sh -c echo hi]`. */
function goList(items: readonly string[]): string {
  return `[${items.join(' ')}]`;
}

export class HandlerRunner {
  readonly #o: HandlerRunnerOptions;

  constructor(options: HandlerRunnerOptions) {
    this.#o = options;
  }

  /**
   * Runs `handler` for the container instance `containerId`. Resolves with the result
   * (a failing handler is a result, not an exception); rejects with the signal's reason
   * once `signal` aborts, whatever the handler was doing.
   */
  async run(
    pod: Pod,
    container: Container,
    containerId: string,
    handler: LifecycleHandler,
    signal: AbortSignal,
  ): Promise<HandlerResult> {
    signal.throwIfAborted();
    const where = `for Container ${JSON.stringify(container.name)} in Pod ${JSON.stringify(podDescription(pod))}`;
    if (handler.exec !== undefined) {
      const cmd = handler.exec.command ?? [];
      const r = await this.#exec(containerId, cmd, signal);
      return r.ok
        ? r
        : {
            ok: false,
            error: r.error,
            message: `Exec lifecycle hook (${goList(cmd)}) ${where} failed - error: ${r.error}, message: ${JSON.stringify(r.output)}`,
          };
    }
    if (handler.httpGet !== undefined) {
      const path = handler.httpGet.path ?? '';
      const error = await this.#http(pod, container, handler.httpGet, signal);
      return error === undefined
        ? { ok: true }
        : {
            ok: false,
            error,
            message: `HTTP lifecycle hook (${path}) ${where} failed - error: ${error}`,
          };
    }
    if (handler.sleep !== undefined) {
      // Cut by the signal, the sleep rejects with its reason (the caller's deadline).
      await this.#o.clock.sleep(Math.max(0, handler.sleep.seconds) * 1000, signal);
      return { ok: true };
    }
    const error = `invalid handler: ${JSON.stringify(handler)}`;
    return { ok: false, error, message: `Cannot run handler: ${error}` };
  }

  async #exec(
    containerId: string,
    cmd: readonly string[],
    signal: AbortSignal,
  ): Promise<{ ok: true } | { ok: false; error: string; output: string }> {
    try {
      const r = await this.#o.runtime.execSync(
        { containerId, cmd: [...cmd], timeout: 0n },
        // No deadline, as upstream: the hook may run as long as the caller allows.
        { signal, timeoutMs: 0 },
      );
      if (r.exitCode === 0) return { ok: true };
      const output = Buffer.concat([r.stdout, r.stderr]).toString('utf8');
      return {
        ok: false,
        error: `command '${cmd.join(' ')}' exited with ${r.exitCode}: ${r.stderr.toString('utf8')}`,
        output,
      };
    } catch (err) {
      signal.throwIfAborted();
      return { ok: false, error: err instanceof CriError ? err.details : String(err), output: '' };
    }
  }

  /** Returns undefined on success, else the error text. */
  async #http(
    pod: Pod,
    container: Container,
    action: NonNullable<LifecycleHandler['httpGet']>,
    signal: AbortSignal,
  ): Promise<string | undefined> {
    let host = action.host ?? '';
    if (host === '') {
      host = (await (this.#o.podIP?.(pod, signal) ?? Promise.resolve(pod.status?.podIP))) ?? '';
      signal.throwIfAborted();
      if (host === '') return 'failed to find networking container: the pod has no IP address';
    }
    const port = resolvePort(action.port, container);
    if (port === undefined) return `unable to resolve port ${String(action.port)}`;
    const target: HttpGetTarget = {
      scheme: action.scheme === 'HTTPS' ? 'https' : 'http',
      host,
      port,
      path: action.path ?? '',
      headers: action.httpHeaders ?? [],
    };
    try {
      await httpGet(target, 'lifecycle', signal);
      return undefined;
    } catch (err) {
      signal.throwIfAborted();
      if (!(err instanceof HttpGetError)) throw err;
      if (!err.plaintextAnswer) return err.message;
      return this.#fallback(pod, target, err, signal);
    }
  }

  /** HTTPS answered in plain HTTP: retry over HTTP, as upstream keeps old hooks working. */
  async #fallback(
    pod: Pod,
    target: HttpGetTarget,
    original: HttpGetError,
    signal: AbortSignal,
  ): Promise<string | undefined> {
    const hostPort = new URL(formatUrl(target)).host;
    this.#o.logger.info('HTTPS request to lifecycle hook got HTTP response, retrying with HTTP', {
      host: hostPort,
    });
    try {
      await httpGet(
        {
          ...target,
          scheme: 'http',
          // The credentials were meant for TLS; upstream does not send them in clear.
          headers: target.headers.filter((h) => h.name.toLowerCase() !== 'authorization'),
        },
        'lifecycle',
        signal,
      );
    } catch (err) {
      signal.throwIfAborted();
      if (!(err instanceof HttpGetError)) throw err;
      // The fallback failing too reports the HTTPS error, as upstream.
      return original.message;
    }
    this.#o.recorder.event(
      podTarget(pod),
      'Warning',
      'LifecycleHTTPFallback',
      `request to HTTPS lifecycle hook ${hostPort} got HTTP response, retry with HTTP succeeded`,
    );
    return undefined;
  }
}
