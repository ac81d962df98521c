/**
 * GenericPleg and its evented variant (see types.ts). One relist runs at a time;
 * requests made while one runs coalesce into a single follow-up relist.
 */
import { cri, CriUnimplementedError, type RuntimeService } from '../cri/index.ts';
import type { KubeletMetrics } from '../metrics/registry.ts';
import { retryDelay } from '../util/backoff.ts';
import type { Clock } from '../util/clock.ts';
import { isAborted } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import { POD_UID_LABEL } from '../container/labels.ts';
import type { RuntimePodSnapshot } from '../container/pod-status.ts';
import type { Pleg, PodLifecycleEvent, PodLifecycleEventType } from './types.ts';

export interface PlegOptions {
  readonly runtime: Pick<
    RuntimeService,
    'listPodSandbox' | 'listContainers' | 'getContainerEvents'
  >;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly onEvents: (events: readonly PodLifecycleEvent[]) => void;
  /** Relist period: 1 s generic; the evented safety net uses `eventedRelistMs`. */
  readonly relistMs?: number;
  readonly eventedRelistMs?: number;
  /** Use GetContainerEvents when the runtime offers it. */
  readonly evented?: boolean;
  /** Records kubelet_pleg_relist_duration/interval_seconds and pleg_last_seen_seconds. */
  readonly metrics?: KubeletMetrics;
}

const UNHEALTHY_AFTER_MS = 3 * 60_000;

function containerEvent(
  old: cri.Container | undefined,
  now: cri.Container | undefined,
): PodLifecycleEventType | undefined {
  if (now === undefined) return old === undefined ? undefined : 'ContainerRemoved';
  if (old?.state === now.state) return undefined;
  if (now.state === cri.ContainerState.CONTAINER_RUNNING) return 'ContainerStarted';
  if (now.state === cri.ContainerState.CONTAINER_EXITED) return 'ContainerDied';
  return 'ContainerChanged';
}

export class RelistPleg implements Pleg {
  readonly #o: PlegOptions;
  #pods = new Map<string, RuntimePodSnapshot>();
  #lastRelistAt = 0;
  /** When the last relist ended, on the clock's monotonic scale (health). */
  #lastRelistMono = 0;
  /** When the previous relist began (upstream measures the interval start to start). */
  #lastRelistStart = 0;
  #relisting: Promise<void> | undefined;
  #again = false;
  #eventsUp = false;
  readonly strategy: 'generic' | 'evented';

  constructor(options: PlegOptions) {
    this.#o = options;
    this.strategy = options.evented === true ? 'evented' : 'generic';
  }

  get lastRelistAt(): number {
    return this.#lastRelistAt;
  }

  get(uid: string): RuntimePodSnapshot {
    return this.#pods.get(uid) ?? { uid, sandboxes: [], containers: [] };
  }

  uids(): string[] {
    return [...this.#pods.keys()];
  }

  healthProblem(): string | undefined {
    if (this.#lastRelistAt === 0) return undefined;
    // Elapsed time, not wall time: a clock stepped an hour forward must not make the
    // last relist look an hour old (with the evented PLEG's 5 min relists: minutes of
    // NotReady), as upstream's clock.Since reads Go's monotonic clock.
    const age = this.#o.clock.monotonic() - this.#lastRelistMono;
    if (age <= UNHEALTHY_AFTER_MS) return undefined;
    return `PLEG is not healthy: pleg was last seen active ${Math.round(age / 1000)}s ago; threshold is ${UNHEALTHY_AFTER_MS / 1000}s`;
  }

  #takeAgain(): boolean {
    const again = this.#again;
    this.#again = false;
    return again;
  }

  relist(signal?: AbortSignal): Promise<void> {
    if (this.#relisting !== undefined) {
      this.#again = true;
      return this.#relisting;
    }
    const run = async (): Promise<void> => {
      try {
        // A request that arrives while relisting sets #again (read afresh each round).
        for (let again = true; again; again = this.#takeAgain()) {
          await this.#relistOnce(signal);
        }
      } finally {
        this.#relisting = undefined;
      }
    };
    this.#relisting = run();
    return this.#relisting;
  }

  async #relistOnce(signal: AbortSignal | undefined): Promise<void> {
    const m = this.#o.metrics;
    const started = this.#o.clock.monotonic();
    if (m !== undefined && this.#lastRelistStart > 0)
      m.plegRelistInterval.observe((started - this.#lastRelistStart) / 1000);
    this.#lastRelistStart = started;
    try {
      await this.#diffRuntime(signal);
    } finally {
      m?.plegRelistDuration.observe((this.#o.clock.monotonic() - started) / 1000);
    }
    m?.plegLastSeen.set(Math.floor(this.#lastRelistAt / 1000));
  }

  async #diffRuntime(signal: AbortSignal | undefined): Promise<void> {
    const opts = signal === undefined ? {} : { signal };
    const [sandboxes, containers] = await Promise.all([
      this.#o.runtime.listPodSandbox({}, opts),
      this.#o.runtime.listContainers({}, opts),
    ]);
    const next = new Map<string, { sandboxes: cri.PodSandbox[]; containers: cri.Container[] }>();
    const slot = (uid: string): { sandboxes: cri.PodSandbox[]; containers: cri.Container[] } => {
      let s = next.get(uid);
      if (s === undefined) {
        s = { sandboxes: [], containers: [] };
        next.set(uid, s);
      }
      return s;
    };
    for (const s of sandboxes.items) {
      const uid = s.labels[POD_UID_LABEL] ?? s.metadata?.uid;
      if (uid !== undefined && uid !== '') slot(uid).sandboxes.push(s);
    }
    for (const c of containers.containers) {
      const uid = c.labels[POD_UID_LABEL];
      if (uid !== undefined && uid !== '') slot(uid).containers.push(c);
    }
    const events: PodLifecycleEvent[] = [];
    const uids = new Set([...this.#pods.keys(), ...next.keys()]);
    for (const uid of uids) {
      const before = this.#pods.get(uid);
      const after = next.get(uid);
      const oldC = new Map((before?.containers ?? []).map((c) => [c.id, c]));
      const newC = new Map((after?.containers ?? []).map((c) => [c.id, c]));
      for (const id of new Set([...oldC.keys(), ...newC.keys()])) {
        const type = containerEvent(oldC.get(id), newC.get(id));
        if (type !== undefined) events.push({ podUID: uid, type, id });
      }
      const oldS = new Map((before?.sandboxes ?? []).map((s) => [s.id, s.state]));
      const newS = new Map((after?.sandboxes ?? []).map((s) => [s.id, s.state]));
      for (const id of new Set([...oldS.keys(), ...newS.keys()])) {
        if (oldS.get(id) !== newS.get(id)) events.push({ podUID: uid, type: 'SandboxChanged', id });
      }
    }
    // Newest first, as the sync loop expects.
    const sorted = new Map<string, RuntimePodSnapshot>();
    for (const [uid, s] of next) {
      sorted.set(uid, {
        uid,
        sandboxes: s.sandboxes.sort((a, b) => Number(b.createdAt - a.createdAt)),
        containers: s.containers.sort((a, b) => Number(b.createdAt - a.createdAt)),
      });
    }
    this.#pods = sorted;
    this.#lastRelistAt = this.#o.clock.now();
    this.#lastRelistMono = this.#o.clock.monotonic();
    if (events.length > 0) this.#o.onEvents(events);
  }

  async #periodic(signal: AbortSignal): Promise<void> {
    let failures = 0;
    while (!signal.aborted) {
      try {
        await this.relist(signal);
        failures = 0;
      } catch (err) {
        if (isAborted(signal)) return;
        failures++;
        this.#o.logger.warn('PLEG relist failed', { error: String(err), failures });
      }
      const period = this.#eventsUp
        ? (this.#o.eventedRelistMs ?? 30_000)
        : (this.#o.relistMs ?? 1000);
      await this.#o.clock
        .sleep(failures > 0 ? Math.min(period, retryDelay(failures, 200, 5000)) : period, signal)
        .catch(() => undefined);
    }
  }

  /** Consumes GetContainerEvents; each event triggers a coalesced relist. */
  async #events(signal: AbortSignal): Promise<void> {
    let failures = 0;
    while (!signal.aborted) {
      try {
        for await (const e of this.#o.runtime.getContainerEvents({ signal, timeoutMs: 0 })) {
          if (!this.#eventsUp) {
            this.#eventsUp = true;
            failures = 0;
            this.#o.logger.info('Evented PLEG: receiving container events from the runtime');
          }
          this.#onRuntimeEvent(e, signal);
        }
      } catch (err) {
        if (isAborted(signal)) return;
        if (err instanceof CriUnimplementedError) {
          this.#o.logger.info(
            'The runtime has no container events (GetContainerEvents); PLEG relists only',
          );
          return;
        }
        failures++;
        this.#o.logger.warn(
          'Container event stream failed, relisting every second until it is back',
          { error: String(err), failures },
        );
      }
      this.#eventsUp = false;
      await this.#o.clock.sleep(retryDelay(failures, 500, 30_000), signal).catch(() => undefined);
    }
  }

  /** The event's content is not needed: a relist right away reads the same truth. */
  #onRuntimeEvent(event: cri.ContainerEventResponse, signal: AbortSignal): void {
    this.#o.logger.debug('Runtime container event', {
      containerID: event.containerId,
      type: event.containerEventType,
    });
    this.relist(signal).catch((err: unknown) => {
      if (!signal.aborted)
        this.#o.logger.warn('PLEG relist after event failed', { error: String(err) });
    });
  }

  async run(signal: AbortSignal): Promise<void> {
    const loops = [this.#periodic(signal)];
    if (this.#o.evented === true) loops.push(this.#events(signal));
    await Promise.all(loops);
  }
}
