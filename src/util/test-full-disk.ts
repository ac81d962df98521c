/**
 * Test support (unit tests only): a directory whose filesystem is full, without mounting
 * one. Every write under `dir` through node:fs/promises (`writeFile`, and `writeFile` /
 * `write` on a handle from `open`) writes the first half of its data and then fails with
 * ENOSPC, as a write(2) that runs out of blocks does: the file is left truncated, which
 * is what atomic writes (temporary file, rename) must keep away from the real name.
 * New directories and symlinks under `dir` fail with ENOSPC too. Reads, renames and
 * removals work (they need no new blocks).
 *
 * It works by replacing the functions on node:fs/promises and re-syncing the builtin
 * ESM bindings (`syncBuiltinESMExports`), so modules that imported `open` or
 * `writeFile` by name see the full disk; `restore()` puts them back. Only one at a time.
 */
import fsp, { type FileHandle } from 'node:fs/promises';
import { syncBuiltinESMExports } from 'node:module';
import { resolve, sep } from 'node:path';

export interface FullDisk {
  /** How many operations failed with ENOSPC so far. */
  readonly failures: number;
  /** Space is back: the real functions again. Idempotent. */
  restore(): void;
}

type Fsp = typeof fsp;

function enospc(syscall: string, path: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`ENOSPC: no space left on device, ${syscall} '${path}'`), {
    code: 'ENOSPC',
    errno: -28,
    syscall,
    path,
  });
}

function halfOf(data: unknown): Uint8Array {
  const bytes =
    typeof data === 'string'
      ? Buffer.from(data)
      : data instanceof Uint8Array
        ? data
        : new Uint8Array(0);
  return bytes.subarray(0, Math.floor(bytes.length / 2));
}

function writes(flags: unknown): boolean {
  if (flags === undefined) return false;
  if (typeof flags === 'string') return /[wa+]/.test(flags);
  if (typeof flags === 'number')
    return (flags & (fsp.constants.O_WRONLY | fsp.constants.O_RDWR)) !== 0;
  return false;
}

let active = false;

/**
 * Makes the filesystem under `dir` full until `restore()`; or, given a predicate, every
 * absolute path it accepts (one file of a directory: its temporary files too).
 */
export function fillDisk(dir: string | ((path: string) => boolean)): FullDisk {
  if (active) throw new Error('Cannot fill a second disk: restore the first');
  active = true;
  const root = typeof dir === 'string' ? resolve(dir) : '';
  const under = (p: unknown): boolean => {
    if (typeof p !== 'string') return false;
    const abs = resolve(p);
    if (typeof dir !== 'string') return dir(abs);
    return abs === root || abs.startsWith(root + sep);
  };
  const real = {
    open: fsp.open,
    writeFile: fsp.writeFile,
    mkdir: fsp.mkdir,
    symlink: fsp.symlink,
  };
  let failures = 0;
  const fail = (syscall: string, path: string): NodeJS.ErrnoException => {
    failures++;
    return enospc(syscall, path);
  };

  const full = (handle: FileHandle, path: string): FileHandle => {
    const write = async (data: unknown): Promise<never> => {
      await handle.write(halfOf(data));
      throw fail('write', path);
    };
    return new Proxy(handle, {
      get(target, prop, receiver) {
        if (prop === 'writeFile' || prop === 'write' || prop === 'appendFile') return write;
        const value: unknown = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
      },
    });
  };

  const patched: Partial<Fsp> = {
    open: (async (path: Parameters<Fsp['open']>[0], flags?: string | number, mode?: number) => {
      const handle = await real.open(path, flags, mode);
      return under(path) && writes(flags) ? full(handle, String(path)) : handle;
    }) as Fsp['open'],
    writeFile: (async (file: Parameters<Fsp['writeFile']>[0], data: unknown, options?: unknown) => {
      if (!under(file)) {
        return real.writeFile(file, data as string, options as Parameters<Fsp['writeFile']>[2]);
      }
      await real.writeFile(file, halfOf(data), options as Parameters<Fsp['writeFile']>[2]);
      throw fail('write', typeof file === 'string' ? file : '(handle)');
    }) as Fsp['writeFile'],
    mkdir: (async (path: Parameters<Fsp['mkdir']>[0], options?: Parameters<Fsp['mkdir']>[1]) => {
      if (under(path)) {
        const exists = await fsp.stat(path).then(
          () => true,
          () => false,
        );
        if (!exists) throw fail('mkdir', String(path));
      }
      return real.mkdir(path, options);
    }) as Fsp['mkdir'],
    symlink: (async (target: string, path: Parameters<Fsp['symlink']>[1], type?: string) => {
      if (under(path)) throw fail('symlink', String(path));
      return real.symlink(target, path, type);
    }) as Fsp['symlink'],
  };
  Object.assign(fsp, patched);
  syncBuiltinESMExports();
  let restored = false;
  return {
    get failures() {
      return failures;
    },
    restore() {
      if (restored) return;
      restored = true;
      Object.assign(fsp, real);
      syncBuiltinESMExports();
      active = false;
    },
  };
}
