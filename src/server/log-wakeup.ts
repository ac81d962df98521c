/**
 * Waking a log follower when its container writes, instead of only on a timer.
 *
 * `kubectl logs -f` polled at 250 ms showed new lines up to a quarter of a second
 * late; upstream's kubelet waits on inotify (fsnotify) and shows them at once. This
 * watches the container's log directory, not the file: a rotation renames the live
 * file and the runtime creates a new one, and a directory watch sees writes to
 * whichever file is live. The timer stays as the fallback (and for the checks that
 * run on quiet logs), so a watch that cannot be set up, or that fails later, only
 * costs latency.
 */
import { watch, type FSWatcher } from 'node:fs';
import type { Clock } from '../util/clock.ts';

export class LogWakeup {
  #watcher: FSWatcher | undefined;
  /** Something changed since the last wait returned. */
  #dirty = false;
  #wake: (() => void) | undefined;

  /** Watches `dir`; with `dir` undefined (or unwatchable) waits are plain sleeps. */
  constructor(dir: string | undefined) {
    if (dir === undefined) return;
    try {
      this.#watcher = watch(dir, { persistent: false }, () => {
        this.#dirty = true;
        this.#wake?.();
      });
      this.#watcher.on('error', () => {
        this.close();
      });
    } catch {
      this.#watcher = undefined;
    }
  }

  /** Whether writes wake the follower (false: timer only). */
  get watching(): boolean {
    return this.#watcher !== undefined;
  }

  /**
   * Resolves after `ms` on `clock`, or as soon as the directory changes (at once if it
   * changed since the last wait). Rejects when `signal` aborts.
   */
  async wait(ms: number, clock: Clock, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    if (this.#dirty) {
      this.#dirty = false;
      return;
    }
    const done = new AbortController();
    const changed = new Promise<void>((resolve) => {
      this.#wake = resolve;
    });
    // Ended by `done` once a change won the race, or by `signal` (checked below).
    const sleeping = clock.sleep(ms, AbortSignal.any([signal, done.signal])).catch(() => undefined);
    try {
      await Promise.race([sleeping, changed]);
    } finally {
      this.#wake = undefined;
      this.#dirty = false;
      done.abort();
    }
    signal.throwIfAborted();
  }

  close(): void {
    this.#watcher?.close();
    this.#watcher = undefined;
    this.#wake?.();
  }
}
