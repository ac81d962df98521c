/**
 * The file pod source (upstream's pkg/kubelet/config file.go, file_linux.go):
 * staticPodPath is a directory of manifests, or one manifest. It is read at start,
 * every fileCheckFrequency, and, for a directory, as soon as inotify (node's fs.watch)
 * reports a change, so a manifest dropped in starts without waiting for the period.
 * Every read hands the merger the whole set of pods (a snapshot, like upstream's
 * UndeltaStore), so a removed or broken manifest's pod goes away.
 *
 * Hidden files (a leading dot) are skipped, subdirectories are not entered, one pod
 * per file, at most 10 MiB each. A manifest that cannot be used is reported once per
 * distinct problem (logs, and the kubelet's Warning event on the Node) and left out;
 * the others are unaffected. Two files naming the same pod: the later file (in name
 * order) wins, as upstream's store keeps the last. Unlike upstream, a symlink that
 * leads outside the directory is refused: the directory is the trust boundary a
 * kubeadm-style node grants static pods.
 */
import { watch, type FSWatcher } from 'node:fs';
import { open, readdir, realpath, stat } from 'node:fs/promises';
import { join, sep } from 'node:path';
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { Clock } from '../util/clock.ts';
import { isAborted } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import {
  decodeStaticPod,
  ManifestError,
  MAX_MANIFEST_BYTES,
  podFullName,
  type DecodedPod,
} from './static-pod.ts';

export interface StaticSourceOptions {
  readonly nodeName: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly periodMs: number;
  /** Every read's pods (the whole set from this source). */
  readonly onUpdate: (pods: Pod[]) => void;
  /** A manifest (file or URL) that cannot be used, once per distinct problem. */
  readonly onProblem?: (where: string, message: string) => void;
}

export interface FileSourceOptions extends StaticSourceOptions {
  readonly path: string;
  /** Wait after a watch event before reading, so a file written in steps is read whole. */
  readonly settleMs?: number;
}

/**
 * Reports each (place, problem) once until it changes or clears: sources re-read
 * every 20 s, and an event per read would bury the Node's events.
 */
export class ProblemLog {
  readonly #last = new Map<string, string>();
  readonly #round = new Set<string>();
  readonly #o: Pick<StaticSourceOptions, 'logger' | 'onProblem'>;

  constructor(o: Pick<StaticSourceOptions, 'logger' | 'onProblem'>) {
    this.#o = o;
  }

  /** Starts a read: places not reported again before `endRound` are forgotten. */
  beginRound(): void {
    this.#round.clear();
  }

  report(where: string, message: string): void {
    this.#round.add(where);
    if (this.#last.get(where) === message) return;
    this.#last.set(where, message);
    this.#o.logger.error('Could not process manifest', { path: where, error: message });
    this.#o.onProblem?.(where, message);
  }

  /** Forgets places fixed or gone, so a recurrence is reported again. */
  endRound(): void {
    for (const where of [...this.#last.keys()])
      if (!this.#round.has(where)) this.#last.delete(where);
  }
}

export class FileSource {
  readonly #o: FileSourceOptions;
  readonly #problems: ProblemLog;
  #wake: (() => void) | undefined;
  #woken = false;
  #watcher: { readonly w: FSWatcher; readonly ino: number; dead: boolean } | undefined;
  readonly #decoded = new Map<string, { data: string; result: DecodedPod | ManifestError }>();

  constructor(options: FileSourceOptions) {
    this.#o = { ...options, path: options.path.replace(/\/+$/, '') || '/' };
    this.#problems = new ProblemLog(options);
  }

  async run(signal: AbortSignal): Promise<void> {
    try {
      while (!signal.aborted) {
        await this.#rewatch();
        await this.list();
        await this.#wait(signal);
        if (isAborted(signal)) break;
        if (this.#woken) {
          this.#woken = false;
          await this.#o.clock.sleep(this.#o.settleMs ?? 100, signal).catch(() => undefined);
        }
      }
    } finally {
      this.#watcher?.w.close();
      this.#watcher = undefined;
    }
  }

  /**
   * inotify on the path: any change in the directory (or to the file) wakes the loop.
   * Watched again when the path was replaced (another inode: a directory re-created, a
   * file an editor saved by rename) or the watch failed; not there: the period re-reads.
   */
  async #rewatch(): Promise<void> {
    const path = this.#o.path;
    const ino = await stat(path).then(
      (s) => s.ino,
      () => undefined,
    );
    const current = this.#watcher;
    if (current !== undefined && current.ino === ino && !current.dead) return;
    current?.w.close();
    this.#watcher = undefined;
    if (ino === undefined) return;
    try {
      const w = watch(path, { persistent: false }, () => {
        this.#woken = true;
        this.#wake?.();
      });
      const entry = { w, ino, dead: false };
      w.on('error', () => {
        entry.dead = true;
        w.close();
      });
      this.#watcher = entry;
    } catch {
      // Gone meanwhile: the next round tries again.
    }
  }

  async #wait(signal: AbortSignal): Promise<void> {
    if (this.#woken) return;
    const stop = new AbortController();
    const both = AbortSignal.any([signal, stop.signal]);
    const woken = new Promise<void>((resolve) => {
      this.#wake = resolve;
    });
    try {
      await Promise.race([
        this.#o.clock.sleep(this.#o.periodMs, both).catch(() => undefined),
        woken,
      ]);
    } finally {
      this.#wake = undefined;
      stop.abort();
    }
  }

  /** Reads the path once and hands over its pods (upstream's listConfig). */
  async list(): Promise<void> {
    const { path, logger } = this.#o;
    let info;
    try {
      info = await stat(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        logger.error('Unable to read config path', { path, error: String(err) });
        return;
      }
      // An empty update still marks the source as seen.
      this.#o.onUpdate([]);
      logger.debug('Static pod path does not exist, ignoring', { path });
      return;
    }
    this.#problems.beginRound();
    if (info.isDirectory()) {
      const pods = await this.#fromDirectory(path);
      this.#problems.endRound();
      this.#o.onUpdate(pods);
    } else if (info.isFile()) {
      const pod = await this.#fromFile(path, undefined);
      this.#problems.endRound();
      if (pod !== undefined) this.#o.onUpdate([pod]);
    } else
      logger.error('Unable to read config path', {
        path,
        error: 'path is not a directory or file',
      });
  }

  async #fromDirectory(dir: string): Promise<Pod[]> {
    const { logger } = this.#o;
    let names: string[];
    let root: string;
    try {
      names = (await readdir(dir)).filter((n) => !n.startsWith('.')).sort();
      root = await realpath(dir);
    } catch (err) {
      logger.error('Unable to read config path', { path: dir, error: String(err) });
      return [];
    }
    const byName = new Map<string, { pod: Pod; file: string }>();
    for (const name of names) {
      const file = join(dir, name);
      const pod = await this.#fromFile(file, root).catch(() => undefined);
      if (pod === undefined) continue;
      const key = podFullName(pod);
      const earlier = byName.get(key);
      if (earlier !== undefined) {
        this.#problems.report(
          earlier.file,
          `duplicate pod name "${pod.metadata?.name ?? ''}": also defined in ${file}, which is used instead`,
        );
      }
      byName.set(key, { pod, file });
    }
    const present = new Set(names.map((n) => join(dir, n)));
    for (const file of [...this.#decoded.keys()])
      if (!present.has(file)) this.#decoded.delete(file);
    return [...byName.values()].map((e) => e.pod);
  }

  /**
   * Decodes a manifest, reusing the last result while its bytes are unchanged: every
   * period re-reads every file, and YAML parsing is most of a read's CPU.
   */
  #decode(file: string, data: string): DecodedPod {
    const cached = this.#decoded.get(file);
    if (cached?.data === data) {
      if (cached.result instanceof ManifestError) throw cached.result;
      return cached.result;
    }
    let result: DecodedPod | ManifestError;
    try {
      result = decodeStaticPod(data, { nodeName: this.#o.nodeName, source: file, kind: 'file' });
    } catch (err) {
      if (!(err instanceof ManifestError)) throw err;
      result = err;
    }
    this.#decoded.set(file, { data, result });
    if (result instanceof ManifestError) throw result;
    return result;
  }

  /** One manifest; undefined (and reported) when it cannot be used. */
  async #fromFile(file: string, root: string | undefined): Promise<Pod | undefined> {
    try {
      if (root !== undefined) {
        const real = await realpath(file);
        if (real !== root && !real.startsWith(root + sep))
          throw new ManifestError(`symlink leads outside the manifest directory (to ${real})`);
      }
      const info = await stat(file);
      if (info.isDirectory()) {
        this.#o.logger.debug('Provided manifest path is a directory, not recursing', {
          path: file,
        });
        return undefined;
      }
      if (!info.isFile()) throw new ManifestError('manifest path is not a directory or file');
      const data = await readAtMost(file, MAX_MANIFEST_BYTES);
      const { pod, warnings } = this.#decode(file, data);
      if (warnings.length > 0) this.#problems.report(file, warnings.join(', '));
      return pod;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      const message =
        err instanceof ManifestError ? `${file}: ${err.message}` : `${file}: ${String(err)}`;
      this.#problems.report(file, message);
      return undefined;
    }
  }
}

/** utilio.ReadAtMost: more than `limit` bytes is an error, and is never read whole. */
async function readAtMost(file: string, limit: number): Promise<string> {
  const handle = await open(file, 'r');
  try {
    const chunks: Buffer[] = [];
    let n = 0;
    for (;;) {
      const { bytesRead, buffer } = await handle.read(Buffer.alloc(64 * 1024), 0, 64 * 1024, null);
      if (bytesRead === 0) break;
      n += bytesRead;
      if (n > limit) throw new ManifestError(`the read limit is reached (${limit} bytes)`);
      chunks.push(buffer.subarray(0, bytesRead));
    }
    return Buffer.concat(chunks).toString('utf8');
  } finally {
    await handle.close();
  }
}
