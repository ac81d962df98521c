/**
 * Mounting for volumes: tmpfs for memory-backed volumes and bind mounts for subPaths.
 * The real implementation runs mount(8)/umount(8) with argv arrays (never a shell: the
 * paths come from pod specs) and reads mount points from /proc/self/mountinfo.
 */
import { execFile } from 'node:child_process';
import { readFile, realpath } from 'node:fs/promises';
import * as path from 'node:path';
import { VolumeError } from './types.ts';

export interface BindOptions {
  readonly readOnly: boolean;
}

export interface MountEntry {
  /** Absolute mount point. */
  readonly mountPoint: string;
  readonly fsType: string;
  /** The mount source column (e.g. `tmpfs`, a device). */
  readonly source: string;
}

export interface Mounter {
  /** Mounts a fresh tmpfs on `target` (an existing directory); `sizeBytes` -> size=. */
  mountTmpfs(target: string, sizeBytes?: number, signal?: AbortSignal): Promise<void>;
  /**
   * Bind-mounts `source` on `target` (which must exist and be of the same kind). The
   * source is taken literally (no canonicalisation), so a `/proc/<pid>/fd/<n>` magic
   * link binds the very inode behind the descriptor.
   */
  bindMount(
    source: string,
    target: string,
    options: BindOptions,
    signal?: AbortSignal,
  ): Promise<void>;
  /** Unmounts the top mount on `target`. Fails when `target` is not a mount point. */
  unmount(target: string, signal?: AbortSignal): Promise<void>;
  isMountPoint(p: string): Promise<boolean>;
  /** Every mount whose mount point is `dir` or below it, deepest first. */
  listMountsUnder(dir: string): Promise<MountEntry[]>;
}

/** Decodes mountinfo's octal escapes (`\040` for a space, `\134` for a backslash). */
function unescapeMountinfo(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** Parses /proc/self/mountinfo text (proc(5)): field 5 is the mount point. */
export function parseMountinfo(text: string): MountEntry[] {
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const left = line.slice(0, sep).split(' ');
    const right = line.slice(sep + 3).split(' ');
    const mp = left[4];
    if (mp === undefined) continue;
    out.push({
      mountPoint: unescapeMountinfo(mp),
      fsType: right[0] ?? '',
      source: unescapeMountinfo(right[1] ?? ''),
    });
  }
  return out;
}

/** True when `p` is `dir` or below it (both absolute and normalised). */
export function isUnder(p: string, dir: string): boolean {
  const d = path.resolve(dir);
  const q = path.resolve(p);
  return q === d || q.startsWith(d.endsWith('/') ? d : `${d}/`);
}

/** Mounts below `dir` from the given mountinfo entries, deepest first. */
export function mountsUnder(entries: readonly MountEntry[], dir: string): MountEntry[] {
  return entries
    .filter((e) => isUnder(e.mountPoint, dir))
    .sort((a, b) => b.mountPoint.length - a.mountPoint.length);
}

export async function readMountinfo(): Promise<MountEntry[]> {
  return parseMountinfo(await readFile('/proc/self/mountinfo', 'utf8'));
}

/** mountinfo lists resolved paths: compare with the realpath when the path exists. */
async function canonical(p: string): Promise<string> {
  return realpath(p).catch(() => path.resolve(p));
}

export interface SystemMounterOptions {
  /** Paths of the binaries (default: found on PATH). */
  readonly mountPath?: string;
  readonly umountPath?: string;
}

/** Mounter over the host's mount(8) and umount(8). */
export class SystemMounter implements Mounter {
  readonly #mount: string;
  readonly #umount: string;

  constructor(options: SystemMounterOptions = {}) {
    this.#mount = options.mountPath ?? 'mount';
    this.#umount = options.umountPath ?? 'umount';
  }

  async mountTmpfs(target: string, sizeBytes?: number, signal?: AbortSignal): Promise<void> {
    const args = ['-t', 'tmpfs'];
    if (sizeBytes !== undefined) args.push('-o', `size=${Math.ceil(sizeBytes)}`);
    args.push('tmpfs', target);
    await this.#run(this.#mount, args, target, signal);
  }

  async bindMount(
    source: string,
    target: string,
    options: BindOptions,
    signal?: AbortSignal,
  ): Promise<void> {
    // --no-canonicalize: mount(8) would otherwise realpath() the source, turning the
    // fd magic link back into a path a container could swap.
    await this.#run(this.#mount, ['--no-canonicalize', '--bind', source, target], target, signal);
    if (options.readOnly) {
      try {
        await this.#run(
          this.#mount,
          ['--no-canonicalize', '-o', 'remount,bind,ro', target],
          target,
          signal,
        );
      } catch (err) {
        // Never leave a writable bind behind a failed read-only request.
        await this.#run(this.#umount, [target], target).catch(() => undefined);
        throw err;
      }
    }
  }

  async unmount(target: string, signal?: AbortSignal): Promise<void> {
    await this.#run(this.#umount, [target], target, signal);
  }

  async isMountPoint(p: string): Promise<boolean> {
    const abs = await canonical(p);
    return (await readMountinfo()).some((e) => e.mountPoint === abs);
  }

  async listMountsUnder(dir: string): Promise<MountEntry[]> {
    return mountsUnder(await readMountinfo(), await canonical(dir));
  }

  #run(file: string, args: string[], target: string, signal?: AbortSignal): Promise<void> {
    // execFile spawns even for an aborted signal and only then kills the child, which
    // may already have mounted: check first. An abort mid-run can still leave the
    // mount in place; teardown lists the mount table, so it is not lost.
    if (signal?.aborted === true) return Promise.reject(abortReason(signal));
    return new Promise((resolve, reject) => {
      execFile(
        file,
        args,
        { signal, env: { ...process.env, LC_ALL: 'C' } },
        (err, _stdout, stderr) => {
          if (err === null) {
            resolve();
            return;
          }
          if (err.name === 'AbortError') {
            // The caller's reason, as every other abortable call in berth rejects with.
            reject(abortReason(signal));
            return;
          }
          const detail = stderr.trim() === '' ? err.message : stderr.trim();
          reject(
            new VolumeError(
              'BERTH_VOLUME_MOUNT_FAILED',
              `Cannot run ${path.basename(file)} on ${target}: ${detail}`,
              { cause: err },
            ),
          );
        },
      );
    });
  }
}

export interface FakeMount {
  readonly kind: 'tmpfs' | 'bind';
  readonly target: string;
  readonly source: string;
  readonly readOnly: boolean;
  readonly sizeBytes?: number;
}

/**
 * An in-memory mounter for unit tests: records mounts (stacked per target, as the
 * kernel does) without touching the filesystem. `failNext` makes the next call fail.
 */
function abortReason(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new DOMException('aborted', 'AbortError');
}

/** Runs `f` and turns what it throws into a rejection, as an async mounter would. */
function settle(f: () => void): Promise<void> {
  try {
    f();
    return Promise.resolve();
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
}

export class FakeMounter implements Mounter {
  readonly mounts: FakeMount[] = [];
  readonly calls: string[] = [];
  #fail: VolumeError | undefined;

  /** The next mount or unmount call fails with this error. */
  failNext(err: VolumeError): void {
    this.#fail = err;
  }

  #check(op: string, target: string): void {
    this.calls.push(`${op} ${target}`);
    const f = this.#fail;
    if (f !== undefined) {
      this.#fail = undefined;
      throw f;
    }
  }

  mountTmpfs(target: string, sizeBytes?: number, signal?: AbortSignal): Promise<void> {
    return settle(() => {
      signal?.throwIfAborted();
      const t = path.resolve(target);
      this.#check('tmpfs', t);
      this.mounts.push({
        kind: 'tmpfs',
        target: t,
        source: 'tmpfs',
        readOnly: false,
        ...(sizeBytes === undefined ? {} : { sizeBytes }),
      });
    });
  }

  bindMount(
    source: string,
    target: string,
    options: BindOptions,
    signal?: AbortSignal,
  ): Promise<void> {
    return settle(() => {
      signal?.throwIfAborted();
      const t = path.resolve(target);
      this.#check('bind', t);
      this.mounts.push({ kind: 'bind', target: t, source, readOnly: options.readOnly });
    });
  }

  unmount(target: string, signal?: AbortSignal): Promise<void> {
    return settle(() => {
      signal?.throwIfAborted();
      const t = path.resolve(target);
      this.#check('unmount', t);
      const i = this.mounts.map((m) => m.target).lastIndexOf(t);
      if (i < 0)
        throw new VolumeError('BERTH_VOLUME_MOUNT_FAILED', `Cannot unmount ${t}: not mounted`);
      this.mounts.splice(i, 1);
    });
  }

  isMountPoint(p: string): Promise<boolean> {
    const t = path.resolve(p);
    return Promise.resolve(this.mounts.some((m) => m.target === t));
  }

  listMountsUnder(dir: string): Promise<MountEntry[]> {
    const entries = this.mounts.map((m) => ({
      mountPoint: m.target,
      fsType: m.kind === 'tmpfs' ? 'tmpfs' : 'bind',
      source: m.source,
    }));
    return Promise.resolve(mountsUnder(entries, dir));
  }
}
