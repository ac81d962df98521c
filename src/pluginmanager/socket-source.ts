/**
 * Plugin sockets under `<rootDir>/plugins_registry/`, as upstream's plugin watcher finds
 * them: the tree is walked (sockets in subdirectories count), names starting with "."
 * are ignored, only unix sockets register. fs.watch (recursive) signals changes; the
 * manager rescans on a timer too, because watch events can be missed (a directory
 * created and filled between two events, inotify queue overflow).
 */
import { watch, type FSWatcher } from 'node:fs';
import { chmod, lstat, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../util/logger.ts';
import type { SocketSnapshot, SocketSource } from './types.ts';

/** Upstream's directory name under the kubelet root. */
export const PLUGINS_REGISTRY_DIR = 'plugins_registry';
const MAX_DEPTH = 8;

export class FsSocketSource implements SocketSource {
  readonly dir: string;
  readonly #logger: Logger;

  constructor(dir: string, logger: Logger) {
    this.dir = dir;
    this.#logger = logger;
  }

  async prepare(signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    await mkdir(this.dir, { recursive: true, mode: 0o750 });
    // mkdir's mode is masked by the umask, and an existing directory keeps its mode.
    await chmod(this.dir, 0o750);
  }

  async scan(signal: AbortSignal): Promise<SocketSnapshot> {
    const out = new Map<string, string>();
    await this.#walk(this.dir, 0, out, signal);
    return out;
  }

  async #walk(
    dir: string,
    depth: number,
    out: Map<string, string>,
    signal: AbortSignal,
  ): Promise<void> {
    signal.throwIfAborted();
    let names: string[];
    try {
      names = await readdir(dir);
    } catch (err) {
      // The root must be readable; a subdirectory may vanish between readdir and here.
      if (dir === this.dir) throw err;
      this.#logger.debug('Error accessing path', { path: dir, err: String(err) });
      return;
    }
    for (const name of names) {
      if (name.startsWith('.')) continue;
      const path = join(dir, name);
      let st;
      try {
        st = await lstat(path);
      } catch {
        continue;
      }
      if (st.isDirectory()) {
        if (depth < MAX_DEPTH) await this.#walk(path, depth + 1, out, signal);
      } else if (st.isSocket()) {
        out.set(path, `${String(st.ino)}:${String(st.ctimeMs)}`);
      }
    }
  }

  watch(onChange: () => void, signal: AbortSignal): void {
    if (signal.aborted) return;
    let watcher: FSWatcher;
    try {
      watcher = watch(this.dir, { recursive: true, persistent: false }, () => {
        onChange();
      });
    } catch (err) {
      this.#logger.warn('Cannot watch the plugin registry; relying on the periodic rescan', {
        path: this.dir,
        err: String(err),
      });
      return;
    }
    watcher.on('error', (err) => {
      this.#logger.warn('The plugin registry watch failed; relying on the periodic rescan', {
        path: this.dir,
        err: String(err),
      });
      watcher.close();
    });
    signal.addEventListener(
      'abort',
      () => {
        watcher.close();
      },
      { once: true },
    );
  }
}
