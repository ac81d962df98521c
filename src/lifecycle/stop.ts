/**
 * Stopping a container the way upstream's killContainer does, and the postStart step
 * after StartContainer.
 *
 * stopContainerWithHooks: Killing event -> preStop (when the container has one and the
 * grace period is above 0), cut at the end of the grace period -> StopContainer with
 * what is left of the grace period in whole seconds, never less than upstream's minimum
 * of 2 s. A preStop therefore never extends the termination: at most grace + 2 s pass
 * before SIGKILL.
 *
 * runPostStart: runs the postStart handler; on failure records FailedPostStartHook and
 * kills the container itself through stopContainerWithHooks, with the Killing message
 * "FailedPostStartHook" and the pod's grace period. Its preStop runs as well: upstream
 * kills a failed-postStart container through the same killContainer, preStop included.
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { CriNotFoundError, type CriClient } from '../cri/index.ts';
import type { EventRecorder } from '../events/types.ts';
import type { Clock } from '../util/clock.ts';
import { BerthError } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import type { HandlerResult, HandlerRunner } from './handler.ts';
import { containerTarget } from '../events/targets.ts';

/** Upstream's minimumGracePeriodInSeconds: StopContainer never gets less. */
export const MINIMUM_GRACE_PERIOD_SECONDS = 2;
/** Upstream's runtimeRequestTimeout, added to the grace period as StopContainer's deadline. */
const RUNTIME_REQUEST_TIMEOUT_MS = 120_000;

export interface StopDeps {
  readonly cri: { readonly runtime: Pick<CriClient['runtime'], 'stopContainer'> };
  readonly runner: Pick<HandlerRunner, 'run'>;
  readonly recorder: EventRecorder;
  readonly clock: Clock;
  readonly logger?: Logger;
}

export interface StopRequest {
  readonly pod: Pod;
  /** The container's spec (its lifecycle.preStop is run); may be restored from annotations. */
  readonly container: Container;
  readonly containerId: string;
  /** Already resolved by the caller (pod, deletion or probe grace period, or an override). */
  readonly gracePeriodSeconds: number;
  /** The Killing event's message; empty means upstream's "Stopping container <name>". */
  readonly message: string;
}

/**
 * What happened. `preStop` is `none` without a hook (or with grace 0), `completed` or
 * `failed` when it ended in time (a failure is recorded as FailedPreStopHook), `cut`
 * when the grace period ended first. `stopGraceSeconds` is what StopContainer got.
 */
export interface StopResult {
  readonly preStop: 'none' | 'completed' | 'failed' | 'cut';
  readonly stopGraceSeconds: number;
}

/** The grace period ended while the preStop hook was still running. */
export class PreStopDeadlineError extends BerthError {
  constructor(seconds: number) {
    super(
      'BERTH_PRESTOP_DEADLINE',
      `PreStop hook did not complete within the ${seconds}s grace period`,
    );
  }
}

/**
 * Runs the preStop hook (bounded by the grace period) and stops the container. Rejects
 * when `signal` aborts or StopContainer fails (a container that is already gone is
 * not a failure).
 */
export async function stopContainerWithHooks(
  deps: StopDeps,
  req: StopRequest,
  signal: AbortSignal,
): Promise<StopResult> {
  const { pod, container, containerId } = req;
  const grace = Math.max(0, Math.floor(req.gracePeriodSeconds));
  const log = deps.logger?.child({
    pod: `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`,
    container: container.name,
    containerId,
  });
  deps.recorder.event(
    containerTarget(pod, container.name),
    'Normal',
    'Killing',
    req.message === '' ? `Stopping container ${container.name}` : req.message,
  );
  let remaining = grace;
  let preStop: StopResult['preStop'] = 'none';
  const hook = container.lifecycle?.preStop;
  if (hook !== undefined && grace > 0) {
    const began = deps.clock.monotonic();
    preStop = await runBounded(deps, req, hook, grace, signal);
    // Whole seconds spent, truncated as upstream: a 0.9 s hook leaves the grace intact.
    remaining = grace - Math.floor((deps.clock.monotonic() - began) / 1000);
    if (preStop === 'cut')
      log?.info('PreStop hook not completed in grace period', { gracePeriod: grace });
  }
  const stopGraceSeconds = Math.max(MINIMUM_GRACE_PERIOD_SECONDS, remaining);
  try {
    await deps.cri.runtime.stopContainer(
      { containerId, timeout: BigInt(stopGraceSeconds) },
      { signal, timeoutMs: stopGraceSeconds * 1000 + RUNTIME_REQUEST_TIMEOUT_MS },
    );
  } catch (err) {
    if (!(err instanceof CriNotFoundError)) throw err;
  }
  return { preStop, stopGraceSeconds };
}

/** Runs the hook until it ends or the grace period does, whichever is first. */
async function runBounded(
  deps: StopDeps,
  req: StopRequest,
  hook: NonNullable<NonNullable<Container['lifecycle']>['preStop']>,
  grace: number,
  signal: AbortSignal,
): Promise<'completed' | 'failed' | 'cut'> {
  const hookAbort = new AbortController();
  const timerAbort = new AbortController();
  const onAbort = (): void => {
    hookAbort.abort(signal.reason);
    timerAbort.abort(signal.reason);
  };
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    const ran = deps.runner
      .run(req.pod, req.container, req.containerId, hook, hookAbort.signal)
      .then(
        (r): { kind: 'ended'; r: HandlerResult } => ({ kind: 'ended', r }),
        (err: unknown): { kind: 'aborted'; err: unknown } => ({ kind: 'aborted', err }),
      );
    const deadline = deps.clock.sleep(grace * 1000, timerAbort.signal).then(
      () => ({ kind: 'deadline' }) as const,
      () => ({ kind: 'cancelled' }) as const,
    );
    const first = await Promise.race([ran, deadline]);
    if (first.kind === 'deadline') {
      // Stop the hook now (an exec call is cancelled, a sleep ends) and wait for it to
      // settle, so nothing of it outlives the kill.
      hookAbort.abort(new PreStopDeadlineError(grace));
      await ran;
      signal.throwIfAborted();
      return 'cut';
    }
    timerAbort.abort();
    await deadline;
    signal.throwIfAborted();
    if (first.kind === 'aborted') throw first.err;
    // The timer is cancelled only by the caller's abort, handled just above.
    if (first.kind === 'cancelled') throw new Error('preStop deadline timer cancelled');
    if (first.r.ok) return 'completed';
    deps.logger?.error('PreStop hook failed', {
      pod: `${req.pod.metadata?.namespace ?? ''}/${req.pod.metadata?.name ?? ''}`,
      container: req.container.name,
      containerId: req.containerId,
      error: first.r.message,
    });
    // Not the handler's message: its output could carry secrets into the API.
    deps.recorder.event(
      containerTarget(req.pod, req.container.name),
      'Warning',
      'FailedPreStopHook',
      'PreStopHook failed',
    );
    return 'failed';
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

export interface PostStartRequest {
  readonly pod: Pod;
  readonly container: Container;
  readonly containerId: string;
  /**
   * The grace period for the kill after a failure; default the pod's
   * (deletionGracePeriodSeconds, else terminationGracePeriodSeconds, else 30).
   */
  readonly gracePeriodSeconds?: number;
}

/**
 * `ok: true` when there is no postStart or it passed. Otherwise the container was
 * killed (or the kill failed: `killError`); the caller shows `reason` and `message` as
 * the container's waiting state until the next start (upstream's PostStartHookError).
 */
export type PostStartResult =
  | { readonly ok: true }
  | {
      readonly ok: false;
      readonly reason: 'PostStartHookError';
      readonly message: string;
      readonly killError?: unknown;
    };

/** The grace period upstream uses for kills that are not probe kills. */
export function podGracePeriodSeconds(pod: Pod): number {
  return pod.metadata?.deletionGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? 30;
}

/**
 * Runs the container's postStart handler right after StartContainer; on failure records
 * FailedPostStartHook and kills the container. Rejects only when `signal` aborts.
 */
export async function runPostStart(
  deps: StopDeps,
  req: PostStartRequest,
  signal: AbortSignal,
): Promise<PostStartResult> {
  const hook = req.container.lifecycle?.postStart;
  if (hook === undefined) return { ok: true };
  const r = await deps.runner.run(req.pod, req.container, req.containerId, hook, signal);
  if (r.ok) return { ok: true };
  deps.logger?.error('Failed to execute PostStartHook', {
    pod: `${req.pod.metadata?.namespace ?? ''}/${req.pod.metadata?.name ?? ''}`,
    container: req.container.name,
    containerId: req.containerId,
    error: r.message,
  });
  deps.recorder.event(
    containerTarget(req.pod, req.container.name),
    'Warning',
    'FailedPostStartHook',
    'PostStartHook failed',
  );
  const failed = { ok: false, reason: 'PostStartHookError', message: r.message } as const;
  try {
    await stopContainerWithHooks(
      deps,
      {
        pod: req.pod,
        container: req.container,
        containerId: req.containerId,
        gracePeriodSeconds: req.gracePeriodSeconds ?? podGracePeriodSeconds(req.pod),
        message: 'FailedPostStartHook',
      },
      signal,
    );
  } catch (killError) {
    signal.throwIfAborted();
    return { ...failed, killError };
  }
  return failed;
}
