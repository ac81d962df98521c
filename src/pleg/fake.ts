/**
 * A Pleg for other managers' unit tests: the test sets what "the runtime" holds
 * (`setPod`, `removePod`); nothing is published until a relist, which diffs it against
 * the last relist and sends the same events as RelistPleg (the Pleg contract,
 * contract.ts). No CRI, no timers: `run` only waits for its signal.
 */
import { cri } from '../cri/index.ts';
import type { Clock } from '../util/clock.ts';
import type { RuntimePodSnapshot } from '../container/pod-status.ts';
import type { Pleg, PodLifecycleEvent, PodLifecycleEventType } from './types.ts';

const UNHEALTHY_AFTER_MS = 3 * 60_000;

export interface FakePlegOptions {
  readonly clock: Clock;
  readonly onEvents?: (events: readonly PodLifecycleEvent[]) => void;
}

function containerEvent(
  old: cri.ContainerState | undefined,
  now: cri.ContainerState | undefined,
): PodLifecycleEventType | undefined {
  if (now === undefined) return old === undefined ? undefined : 'ContainerRemoved';
  if (old === now) return undefined;
  if (now === cri.ContainerState.CONTAINER_RUNNING) return 'ContainerStarted';
  if (now === cri.ContainerState.CONTAINER_EXITED) return 'ContainerDied';
  return 'ContainerChanged';
}

export class FakePleg implements Pleg {
  readonly strategy = 'generic' as const;
  /** Every relist, counted (upper layers force one after changing a pod). */
  relists = 0;
  /** Every batch of events sent, in order. */
  readonly sent: (readonly PodLifecycleEvent[])[] = [];
  readonly #o: FakePlegOptions;
  readonly #runtime = new Map<string, RuntimePodSnapshot>();
  #published = new Map<string, RuntimePodSnapshot>();
  #lastRelistAt = 0;
  /** When the last relist ended, on the clock's monotonic scale (health). */
  #lastRelistMono = 0;

  constructor(options: FakePlegOptions) {
    this.#o = options;
  }

  /** What the runtime holds for a pod from now on (seen at the next relist). */
  setPod(snapshot: RuntimePodSnapshot): void {
    this.#runtime.set(snapshot.uid, snapshot);
  }

  /** The runtime no longer has anything for the pod (seen at the next relist). */
  removePod(uid: string): void {
    this.#runtime.delete(uid);
  }

  get lastRelistAt(): number {
    return this.#lastRelistAt;
  }

  get(uid: string): RuntimePodSnapshot {
    return this.#published.get(uid) ?? { uid, sandboxes: [], containers: [] };
  }

  uids(): string[] {
    return [...this.#published.keys()];
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

  run(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      signal.addEventListener(
        'abort',
        () => {
          resolve();
        },
        { once: true },
      );
    });
  }

  relist(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted === true) {
      const reason: unknown = signal.reason;
      return Promise.reject(reason instanceof Error ? reason : new Error('aborted'));
    }
    this.relists++;
    const events: PodLifecycleEvent[] = [];
    for (const uid of new Set([...this.#published.keys(), ...this.#runtime.keys()])) {
      const before = this.#published.get(uid);
      const after = this.#runtime.get(uid);
      const oldC = new Map((before?.containers ?? []).map((c) => [c.id, c.state]));
      const newC = new Map((after?.containers ?? []).map((c) => [c.id, c.state]));
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
    // Newest first, as RelistPleg publishes them.
    this.#published = new Map(
      [...this.#runtime].map(([uid, s]) => [
        uid,
        {
          uid,
          sandboxes: [...s.sandboxes].sort((a, b) => Number(b.createdAt - a.createdAt)),
          containers: [...s.containers].sort((a, b) => Number(b.createdAt - a.createdAt)),
        },
      ]),
    );
    this.#lastRelistAt = this.#o.clock.now();
    this.#lastRelistMono = this.#o.clock.monotonic();
    if (events.length > 0) {
      this.sent.push(events);
      this.#o.onEvents?.(events);
    }
    return Promise.resolve();
  }
}
