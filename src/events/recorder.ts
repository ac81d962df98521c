/**
 * `ApiEventRecorder`: core/v1 Events written the way the kubelet writes them.
 *
 * - Shape: source {component "kubelet", host <node>}, reportingComponent "kubelet",
 *   reportingInstance <node>, involvedObject from the target, first/lastTimestamp and
 *   count; the name is `<object>.<unix nanoseconds in hex>`; cluster-scoped targets
 *   (the Node) record into "default", as upstream.
 * - Aggregation: an identical event (same target, type, reason and message) seen again
 *   PATCHes the existing Event's count and lastTimestamp instead of creating another;
 *   the last 4096 keys are remembered (LRU). If that Event is gone, a new one is made.
 * - Rate limit: a token bucket of eventRecordQPS / eventBurst (default 50 / 100);
 *   events over it are dropped and counted. Upstream's per-object spam filter and
 *   similar-message aggregation are not modelled.
 * - Delivery: `event()` only enqueues (bounded queue, overflow dropped and counted) and
 *   never throws; one background loop sends in order, retrying transient failures
 *   with back-off. `close()` stops intake and drains, giving up after a timeout.
 */
import type { Event } from 'kubernetes-types/core/v1.js';
import { retryDelay } from '../util/backoff.ts';
import type { Clock } from '../util/clock.ts';
import { isAbortError } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import { TokenBucket } from '../kube/rate-limiter.ts';
import { EVENTS, inNamespace, isNotFound, KubeApiError, type KubeClient } from '../kube/types.ts';
import type { EventRecorder, EventTarget, EventType } from './types.ts';

/** Options of `ApiEventRecorder`; rates default to the kubelet's eventRecordQPS / eventBurst. */
export interface ApiEventRecorderOptions {
  readonly client: KubeClient;
  /** The node's name: source.host and reportingInstance. */
  readonly nodeName: string;
  readonly clock: Clock;
  readonly logger: Logger;
  /** eventRecordQPS (default 50). Zero or less disables the limit. */
  readonly qps?: number;
  /** eventBurst (default 100). */
  readonly burst?: number;
  /** Events waiting to be sent before new ones are dropped (default 1000). */
  readonly queueSize?: number;
  /** Distinct events remembered for aggregation (default 4096). */
  readonly cacheSize?: number;
  /** Attempts per event for transient failures (default 3). */
  readonly maxAttempts?: number;
  /** source.component and reportingComponent (default "kubelet"). */
  readonly component?: string;
  readonly random?: () => number;
}

/** Counters for metrics and tests. */
export interface EventRecorderStats {
  readonly created: number;
  /** Aggregated into an existing Event (PATCH of count / lastTimestamp). */
  readonly patched: number;
  readonly droppedRateLimited: number;
  readonly droppedQueueFull: number;
  /** Recorded after close(), or still queued when close() timed out. */
  readonly droppedClosed: number;
  /** Given up after an error. */
  readonly failed: number;
  readonly queued: number;
}

interface Pending {
  readonly key: string;
  readonly target: EventTarget;
  readonly type: EventType;
  readonly reason: string;
  readonly message: string;
  readonly at: number;
}

interface Aggregate {
  readonly namespace: string;
  readonly name: string;
  count: number;
  readonly firstTimestamp: string;
}

/** metav1.Time: RFC 3339 with whole seconds. */
export function eventTimestamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function isTransient(err: unknown): boolean {
  return (
    err instanceof KubeApiError &&
    (err.status === 0 || err.status === 429 || err.status >= 500 || err.reason === 'Timeout')
  );
}

/** An `EventRecorder` that writes core/v1 Events through a `KubeClient` (see the top of this file). */
export class ApiEventRecorder implements EventRecorder {
  readonly #o: ApiEventRecorderOptions;
  readonly #limiter: TokenBucket;
  readonly #queue: Pending[] = [];
  readonly #cache = new Map<string, Aggregate>();
  readonly #stop = new AbortController();
  #pumping = false;
  #pump: Promise<void> = Promise.resolve();
  #closed = false;
  #sequence = 0;
  #stats = {
    created: 0,
    patched: 0,
    droppedRateLimited: 0,
    droppedQueueFull: 0,
    droppedClosed: 0,
    failed: 0,
  };

  constructor(options: ApiEventRecorderOptions) {
    this.#o = options;
    this.#limiter = new TokenBucket({
      qps: options.qps ?? 50,
      burst: options.burst ?? 100,
      clock: options.clock,
    });
  }

  event(target: EventTarget, type: EventType, reason: string, message: string): void {
    try {
      this.#o.logger.debug('Event occurred', {
        object: `${target.namespace ?? ''}/${target.name}`,
        kind: target.kind,
        type,
        reason,
        message,
      });
      if (this.#closed) {
        this.#stats.droppedClosed++;
        return;
      }
      if (!this.#limiter.tryTake()) {
        this.#stats.droppedRateLimited++;
        if (this.#stats.droppedRateLimited % 100 === 1) {
          this.#o.logger.warn('Dropping events over the event rate limit', {
            dropped: this.#stats.droppedRateLimited,
            reason,
          });
        }
        return;
      }
      if (this.#queue.length >= (this.#o.queueSize ?? 1000)) {
        this.#stats.droppedQueueFull++;
        return;
      }
      const key = JSON.stringify([
        target.kind,
        target.namespace ?? '',
        target.name,
        target.uid,
        target.apiVersion ?? '',
        target.fieldPath ?? '',
        type,
        reason,
        message,
      ]);
      this.#queue.push({ key, target, type, reason, message, at: this.#o.clock.now() });
      if (!this.#pumping) {
        this.#pumping = true;
        this.#pump = this.#drain().catch((err: unknown) => {
          // Only a bug gets here; the next event starts a new sender.
          this.#pumping = false;
          this.#o.logger.error('Event sender stopped', { error: String(err) });
        });
      }
    } catch (err) {
      // Recording an event must never fail the caller's operation.
      this.#o.logger.error('Cannot record event', { reason, error: String(err) });
    }
  }

  stats(): EventRecorderStats {
    return { ...this.#stats, queued: this.#queue.length };
  }

  /**
   * Stops taking events and sends what is queued; after `timeoutMs` (default 5 s)
   * aborts the request in flight and drops the rest. Idempotent.
   */
  async close(timeoutMs = 5000): Promise<void> {
    this.#closed = true;
    const timer = new AbortController();
    const timedOut = this.#o.clock.sleep(timeoutMs, timer.signal).then(
      () => true,
      () => false,
    );
    const drained = this.#pump.then(() => false);
    const late = await Promise.race([drained, timedOut]);
    timer.abort();
    if (late) {
      this.#stats.droppedClosed += this.#queue.length;
      this.#queue.length = 0;
      this.#stop.abort();
      await this.#pump;
    }
  }

  async #drain(): Promise<void> {
    for (;;) {
      const next = this.#queue.shift();
      if (next === undefined) {
        // Set before returning, in the same turn as the empty check, so event() restarts us.
        this.#pumping = false;
        return;
      }
      try {
        await this.#deliver(next);
      } catch (err) {
        if (this.#stop.signal.aborted && isAbortError(err)) {
          this.#stats.droppedClosed++;
          continue;
        }
        this.#stats.failed++;
        this.#o.logger.warn('Cannot send event, dropping it', {
          reason: next.reason,
          object: `${next.target.namespace ?? ''}/${next.target.name}`,
          error: err instanceof Error ? err.message : String(err),
        });
      }
    }
  }

  async #deliver(p: Pending): Promise<void> {
    const attempts = this.#o.maxAttempts ?? 3;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#send(p);
        return;
      } catch (err) {
        if (attempt + 1 >= attempts || !isTransient(err)) throw err;
        const delay = retryDelay(attempt, 1000, 10_000, this.#o.random ?? Math.random);
        await this.#o.clock.sleep(delay, this.#stop.signal);
      }
    }
  }

  async #send(p: Pending): Promise<void> {
    const signal = this.#stop.signal;
    const cached = this.#cache.get(p.key);
    if (cached !== undefined) {
      const count = cached.count + 1;
      try {
        await this.#o.client.patch<Event>(
          inNamespace(EVENTS, cached.namespace),
          cached.name,
          { count, lastTimestamp: eventTimestamp(p.at), message: p.message },
          'strategic',
          { signal },
        );
        cached.count = count;
        this.#remember(p.key, cached);
        this.#stats.patched++;
        return;
      } catch (err) {
        // The Event was deleted (TTL, or by hand): start a new one, keeping the count.
        if (!isNotFound(err)) throw err;
        this.#cache.delete(p.key);
        await this.#create(p, count, cached.firstTimestamp);
        return;
      }
    }
    await this.#create(p, 1, eventTimestamp(p.at));
  }

  async #create(p: Pending, count: number, firstTimestamp: string): Promise<void> {
    const namespace = p.target.namespace ?? 'default';
    // Upstream names events <object>.<unix nanoseconds, hex>; the sequence keeps names
    // made within one millisecond apart.
    const nanos = BigInt(p.at) * 1_000_000n + BigInt(this.#sequence++ % 1_000_000);
    const name = `${p.target.name}.${nanos.toString(16)}`;
    const component = this.#o.component ?? 'kubelet';
    const event: Event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name, namespace },
      involvedObject: {
        kind: p.target.kind,
        name: p.target.name,
        uid: p.target.uid,
        apiVersion: p.target.apiVersion ?? 'v1',
        ...(p.target.namespace === undefined ? {} : { namespace: p.target.namespace }),
        ...(p.target.fieldPath === undefined ? {} : { fieldPath: p.target.fieldPath }),
      },
      reason: p.reason,
      message: p.message,
      type: p.type,
      source: { component, host: this.#o.nodeName },
      firstTimestamp,
      lastTimestamp: eventTimestamp(p.at),
      count,
      reportingComponent: component,
      reportingInstance: this.#o.nodeName,
    };
    await this.#o.client.create(inNamespace(EVENTS, namespace), event, {
      signal: this.#stop.signal,
    });
    this.#remember(p.key, { namespace, name, count, firstTimestamp });
    this.#stats.created++;
  }

  #remember(key: string, value: Aggregate): void {
    this.#cache.delete(key);
    this.#cache.set(key, value);
    const limit = this.#o.cacheSize ?? 4096;
    while (this.#cache.size > limit) {
      const oldest = this.#cache.keys().next();
      if (oldest.done === true) break;
      this.#cache.delete(oldest.value);
    }
  }
}
