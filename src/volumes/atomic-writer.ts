/**
 * Upstream's AtomicWriter for content volumes (configMap, secret, downwardAPI,
 * projected). A running container must never see a half-written volume, so:
 *
 *   <dir>/..2026_01_02_15_04_05.123456  the payload, written in full first
 *   <dir>/..data -> ..2026_01_02_...    swapped with one rename(2)
 *   <dir>/<top-level name> -> ..data/<top-level name>
 *
 * Readers going through `<name>` see either the old or the new payload. Entries that
 * left the payload and the previous timestamped directory are removed afterwards.
 */
import { randomBytes } from 'node:crypto';
import {
  chmod,
  chown,
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  rename,
  symlink,
  unlink,
  writeFile,
} from 'node:fs/promises';
import * as path from 'node:path';
import { systemClock, type Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import { safeRemoveAll } from './safe-path.ts';
import { VolumeError, type Payload, type PayloadFile } from './types.ts';

const DATA_DIR = '..data';
const DATA_TMP = '..data_tmp';
const DIR_MODE = 0o755;

/**
 * Checks a payload path as upstream's validatePath does: not empty, not absolute, no
 * `..` element and not starting with `..` (which would collide with `..data`).
 */
export function validatePayloadPath(p: string): void {
  const bad = (why: string): VolumeError =>
    new VolumeError('BERTH_VOLUME_PATH_ESCAPE', `invalid path ${JSON.stringify(p)}: ${why}`);
  if (p === '') throw bad('must not be empty');
  if (path.isAbsolute(p)) throw bad('must be relative');
  if (p.includes('\0')) throw bad('must not contain NUL');
  if (p.split('/').includes('..')) throw bad("must not contain '..'");
  if (p.startsWith('..')) throw bad("must not start with '..'");
}

function errno(err: unknown): string | undefined {
  const c = (err as { code?: unknown } | null)?.code;
  return typeof c === 'string' ? c : undefined;
}

function clean(p: string): string {
  return p
    .split('/')
    .filter((s) => s !== '' && s !== '.')
    .join('/');
}

/** `..2006_01_02_15_04_05.` in UTC, upstream's timestamped directory prefix. */
function tsPrefix(ms: number): string {
  const d = new Date(ms);
  const two = (n: number): string => String(n).padStart(2, '0');
  return (
    `..${d.getUTCFullYear()}_${two(d.getUTCMonth() + 1)}_${two(d.getUTCDate())}_` +
    `${two(d.getUTCHours())}_${two(d.getUTCMinutes())}_${two(d.getUTCSeconds())}.`
  );
}

export interface WriteOptions {
  /** Group owning every file (upstream's fsGroup ownership management), plus g+r. */
  readonly fsGroup?: number;
}

export interface AtomicWriterOptions {
  readonly clock?: Clock;
  readonly logger?: Logger;
}

/** Writes payloads into one volume directory; see the file comment for the layout. */
export class AtomicWriter {
  readonly #dir: string;
  readonly #clock: Clock;
  readonly #logger: Logger | undefined;

  constructor(targetDir: string, options: AtomicWriterOptions = {}) {
    this.#dir = targetDir;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger;
  }

  /**
   * Makes the directory hold exactly `payload`. Returns false (and touches nothing)
   * when it already does, true after a swap. Throws BERTH_VOLUME_PATH_ESCAPE for an
   * invalid path, before anything is written.
   */
  async write(payload: Payload, options: WriteOptions = {}): Promise<boolean> {
    const files = new Map<string, PayloadFile>();
    for (const [p, f] of payload) {
      validatePayloadPath(p);
      files.set(clean(p), f);
    }
    this.#checkNoFileIsADirectory(files);
    const oldTs = await this.#currentTsDir();
    if (oldTs !== undefined && (await this.#matches(oldTs, files, options))) return false;

    const tsDir = await this.#writeTsDir(files, options);
    const tsName = path.basename(tsDir);
    const tmp = path.join(this.#dir, DATA_TMP);
    await unlink(tmp).catch((err: unknown) => {
      if (errno(err) !== 'ENOENT') throw err;
    });
    await symlink(tsName, tmp);
    await rename(tmp, path.join(this.#dir, DATA_DIR));

    const newTop = new Set([...files.keys()].map((p) => p.split('/')[0] ?? p));
    await this.#linkTopLevel(newTop);
    if (oldTs !== undefined) {
      const oldTop = await readdir(path.join(this.#dir, oldTs));
      for (const name of oldTop) {
        if (newTop.has(name)) continue;
        const p = path.join(this.#dir, name);
        const st = await lstat(p).catch(() => undefined);
        if (st?.isSymbolicLink() === true) await unlink(p);
      }
      await safeRemoveAll(path.join(this.#dir, oldTs));
    }
    this.#logger?.debug('Wrote volume payload', { dir: this.#dir, files: files.size });
    return true;
  }

  #checkNoFileIsADirectory(files: ReadonlyMap<string, PayloadFile>): void {
    for (const p of files.keys()) {
      const parts = p.split('/');
      for (let i = 1; i < parts.length; i++) {
        const prefix = parts.slice(0, i).join('/');
        if (files.has(prefix)) {
          throw new VolumeError(
            'BERTH_VOLUME_INVALID',
            `invalid payload: ${JSON.stringify(prefix)} is both a file and a directory`,
          );
        }
      }
    }
  }

  /** The name `..data` points to, when it is one of ours. */
  async #currentTsDir(): Promise<string | undefined> {
    let target: string;
    try {
      target = await readlink(path.join(this.#dir, DATA_DIR));
    } catch (err) {
      if (errno(err) === 'ENOENT') return undefined;
      throw err;
    }
    // Only a plain `..<name>` sibling is ours; anything else is rewritten, never read.
    return /^\.\.[^/]+$/.test(target) && target !== DATA_DIR ? target : undefined;
  }

  /** True when the timestamped dir holds exactly these files, bytes, modes and group. */
  async #matches(
    tsName: string,
    files: ReadonlyMap<string, PayloadFile>,
    options: WriteOptions,
  ): Promise<boolean> {
    const root = path.join(this.#dir, tsName);
    const found: string[] = [];
    const walk = async (rel: string): Promise<void> => {
      for (const e of await readdir(path.join(root, rel), { withFileTypes: true })) {
        const r = rel === '' ? e.name : `${rel}/${e.name}`;
        if (e.isDirectory()) await walk(r);
        else found.push(r);
      }
    };
    try {
      await walk('');
    } catch {
      return false;
    }
    if (found.length !== files.size) return false;
    for (const [p, f] of files) {
      const full = path.join(root, p);
      const st = await lstat(full).catch(() => undefined);
      if (st?.isFile() !== true) return false;
      if ((st.mode & 0o7777) !== this.#fileMode(f.mode, options)) return false;
      if (options.fsGroup !== undefined && st.gid !== options.fsGroup) return false;
      if (!(await readFile(full)).equals(f.data)) return false;
    }
    return true;
  }

  #fileMode(mode: number, options: WriteOptions): number {
    // Upstream's SetVolumeOwnership for read-only content: files gain 0440.
    return options.fsGroup === undefined ? mode & 0o7777 : (mode & 0o7777) | 0o440;
  }

  async #writeTsDir(
    files: ReadonlyMap<string, PayloadFile>,
    options: WriteOptions,
  ): Promise<string> {
    const name = `${tsPrefix(this.#clock.now())}${randomBytes(6).readUIntBE(0, 6)}`;
    const tsDir = path.join(this.#dir, name);
    await mkdir(tsDir, { mode: 0o700 });
    const dirMode = options.fsGroup === undefined ? DIR_MODE : DIR_MODE | 0o2000;
    const own = async (p: string): Promise<void> => {
      if (options.fsGroup !== undefined) await chown(p, -1, options.fsGroup);
    };
    const made = new Set<string>();
    for (const [p, f] of files) {
      const parts = p.split('/');
      for (let i = 1; i < parts.length; i++) {
        const d = path.join(tsDir, ...parts.slice(0, i));
        if (made.has(d)) continue;
        await mkdir(d).catch((err: unknown) => {
          if (errno(err) !== 'EEXIST') throw err;
        });
        await own(d);
        await chmod(d, dirMode);
        made.add(d);
      }
      const full = path.join(tsDir, p);
      // 'wx': the directory is fresh, so an existing file means something is wrong.
      await writeFile(full, f.data, { flag: 'wx', mode: 0o600 });
      await own(full);
      // chmod after write: the exact mode, whatever the process umask is.
      await chmod(full, this.#fileMode(f.mode, options));
    }
    await own(tsDir);
    await chmod(tsDir, dirMode);
    return tsDir;
  }

  async #linkTopLevel(names: ReadonlySet<string>): Promise<void> {
    for (const name of names) {
      const p = path.join(this.#dir, name);
      const want = `${DATA_DIR}/${name}`;
      const st = await lstat(p).catch(() => undefined);
      if (st === undefined) {
        await symlink(want, p);
        continue;
      }
      if (st.isSymbolicLink() && (await readlink(p)) === want) continue;
      throw new VolumeError(
        'BERTH_VOLUME_INVALID',
        `Cannot create ${p}: it exists and is not the link ${want}`,
      );
    }
  }
}
