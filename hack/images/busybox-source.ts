/**
 * busybox 1.37.0 as upstream releases it, built static from Debian trixie's source
 * package (the upstream tarball, fetched from the Debian mirror like any package).
 *
 * Why not Debian's busybox-static binary: Debian patches ash for its installer
 * (revert-9c143ce5… and temp-deb-installer-hack) so that `sh` drops environment
 * variables whose names are not shell identifiers (`data-1`). Upstream's ash keeps and
 * exports them, and so does upstream's busybox 1.37 test image; the envFrom specs
 * (`sh -c env` must print data-1=value-1) depend on it. Of Debian's patches only the
 * build fix for current kernel headers (tc without CBQ) is applied.
 */
import { access, mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { cacheDir } from '../../test/harness/binaries.ts';
import { run } from '../../test/harness/exec.ts';
import { debSource, TRIXIE_SOURCES } from './rootfs.ts';

/** Debian patches applied: only what building on Linux 6.x headers needs. */
const PATCHES = ['busybox-1.36.1-no-cbq.patch'];
/** Bump when the build below changes. */
const REVISION = '1';

/** Builds (or finds in the cache) a static busybox from source; returns it and its version. */
export async function busyboxFromSource(): Promise<{ binary: string; version: string }> {
  const src = await debSource('busybox', TRIXIE_SOURCES);
  const upstreamVersion = src.version.replace(/^\d+:/, '').replace(/-[^-]+$/, '');
  const dir = join(
    cacheDir(),
    'src',
    `busybox-${src.version.replace(/[^A-Za-z0-9_.+-]/g, '_')}-r${REVISION}`,
  );
  const binary = join(dir, 'busybox');
  const version = `${upstreamVersion} (source, Debian ${src.version} without its ash env patches)`;
  const built = await access(binary).then(
    () => true,
    () => false,
  );
  if (built) return { binary, version };
  const work = `${dir}.tmp`;
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true });
  const files = await readdir(src.dir);
  const orig = files.find((f) => f.includes('.orig.tar'));
  const debian = files.find((f) => f.includes('.debian.tar'));
  if (orig === undefined || debian === undefined) {
    throw new Error(`Cannot build busybox: ${src.dir} lacks the upstream or Debian tarball`);
  }
  await run('tar', ['-xf', join(src.dir, orig), '-C', work, '--strip-components=1']);
  await run('tar', ['-xf', join(src.dir, debian), '-C', work]);
  for (const patch of PATCHES) {
    await run('patch', ['-p1', '-i', join(work, 'debian/patches', patch)], { cwd: work });
  }
  await run('make', ['defconfig'], { cwd: work, timeoutMs: 300_000 });
  await run('sed', ['-i', 's/^# CONFIG_STATIC is not set/CONFIG_STATIC=y/', '.config'], {
    cwd: work,
  });
  await run('make', ['-j2', 'busybox'], { cwd: work, timeoutMs: 1_800_000 });
  await mkdir(dir, { recursive: true });
  await run('cp', [join(work, 'busybox'), binary]);
  await rm(work, { recursive: true, force: true });
  return { binary, version };
}
