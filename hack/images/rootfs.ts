/**
 * Pieces the test image recipes share: Debian packages fetched with apt into the build
 * cache, a binary copied into a root filesystem with the shared libraries it links,
 * busybox with one link per applet, and the few /etc files every image needs.
 */
import { chmod, copyFile, mkdir, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { run } from '../../test/harness/exec.ts';
import { cacheDir } from '../../test/harness/binaries.ts';

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/**
 * A Debian suite apt can fetch from besides the machine's own: its own lists and
 * cache under the build cache, so the machine's apt configuration is never touched.
 */
export interface AptSuite {
  readonly name: string;
  /** One sources.list line. */
  readonly source: string;
}

/** Trixie's source packages (upstream tarballs and Debian's patches). */
export const TRIXIE_SOURCES: AptSuite = {
  name: 'trixie-src',
  source:
    'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main',
};

function aptOptions(dir: string): string[] {
  return [
    '-o',
    `Dir::Etc::SourceList=${join(dir, 'sources.list')}`,
    '-o',
    'Dir::Etc::SourceParts=/dev/null',
    '-o',
    `Dir::State::Lists=${join(dir, 'lists')}`,
    '-o',
    `Dir::Cache=${join(dir, 'cache')}`,
    '-o',
    'Dir::State::status=/dev/null',
  ];
}

async function aptSuiteOptions(suite: AptSuite): Promise<string[]> {
  const base = join(cacheDir(), 'debs', suite.name);
  await mkdir(join(base, 'lists', 'partial'), { recursive: true });
  await mkdir(join(base, 'cache', 'archives', 'partial'), { recursive: true });
  await writeFile(join(base, 'sources.list'), `${suite.source}\n`);
  const options = aptOptions(base);
  if ((await readdir(join(base, 'lists'))).length <= 2) {
    await run('apt-get', [...options, 'update', '-qq'], { timeoutMs: 300_000 });
  }
  return options;
}

/**
 * Downloads the source package `pkg` of `suite` (its .dsc, upstream tarball and Debian
 * tarball, unpacked by nobody) into the build cache; returns the directory and version.
 */
export async function debSource(
  pkg: string,
  suite: AptSuite,
): Promise<{ dir: string; version: string }> {
  const options = await aptSuiteOptions(suite);
  const { stdout } = await run('apt-cache', [...options, 'showsrc', pkg]);
  const version = /^Version:\s*(\S+)/m.exec(stdout)?.[1];
  if (version === undefined)
    throw new Error(`Cannot build a test image: apt has no source for ${pkg}`);
  const dir = join(
    cacheDir(),
    'debs',
    suite.name,
    `${pkg}_${version.replace(/[^A-Za-z0-9_.+-]/g, '_')}`,
  );
  if (await exists(join(dir, '.complete'))) return { dir, version };
  await run('rm', ['-rf', dir]);
  await mkdir(dir, { recursive: true });
  await run('apt-get', [...options, 'source', '--download-only', `${pkg}=${version}`], {
    cwd: dir,
    timeoutMs: 300_000,
  });
  await writeFile(join(dir, '.complete'), '');
  return { dir, version };
}

/**
 * Downloads `pkg` (the suite's candidate, or the machine's apt when `suite` is absent)
 * into the build cache and unpacks it; returns the unpacked tree and the version.
 * A package already unpacked there is reused.
 */
export async function debPackage(
  pkg: string,
  suite?: AptSuite,
): Promise<{ dir: string; version: string }> {
  const base = join(cacheDir(), 'debs', suite?.name ?? 'machine');
  const options = suite !== undefined ? await aptSuiteOptions(suite) : [];
  const { stdout } = await run('apt-cache', [...options, 'policy', pkg]);
  const version = /Candidate:\s*(\S+)/.exec(stdout)?.[1];
  if (version === undefined || version === '(none)') {
    throw new Error(`Cannot build a test image: apt has no candidate for ${pkg}`);
  }
  const safe = version.replace(/[^A-Za-z0-9_.+-]/g, '_');
  const dir = join(base, `${pkg}_${safe}`);
  if (await exists(join(dir, '.complete'))) return { dir, version };
  const download = join(base, 'download');
  await mkdir(download, { recursive: true });
  await run('apt-get', [...options, 'download', `${pkg}=${version}`], {
    cwd: download,
    timeoutMs: 300_000,
  });
  const files = (await readdir(download)).filter((f) => f.startsWith(`${pkg}_`));
  const deb = files.find((f) => f.endsWith('.deb'));
  if (deb === undefined) throw new Error(`Cannot build a test image: apt did not fetch ${pkg}`);
  await run('rm', ['-rf', dir]);
  await run('dpkg-deb', ['-x', join(download, deb), dir]);
  await writeFile(join(dir, '.complete'), '');
  return { dir, version };
}

/** The shared libraries `binary` loads (ldd), including the dynamic loader. */
async function sharedLibraries(binary: string): Promise<string[]> {
  const { stdout } = await run('ldd', [binary], { okCodes: [0, 1] });
  const out: string[] = [];
  for (const line of stdout.split('\n')) {
    const m = /=>\s*(\/\S+)/.exec(line) ?? /^\s*(\/\S+)\s+\(/.exec(line);
    if (m?.[1] !== undefined) out.push(m[1]);
  }
  return out;
}

/** Copies `binary` to `rootfs`/`target` with every shared library it needs, at the same paths. */
export async function installBinary(binary: string, rootfs: string, target: string): Promise<void> {
  await mkdir(join(rootfs, dirname(target)), { recursive: true });
  // A busybox applet link of the same name would make copyFile overwrite busybox.
  await rm(join(rootfs, target), { force: true });
  await copyFile(binary, join(rootfs, target));
  await chmod(join(rootfs, target), 0o755);
  for (const lib of await sharedLibraries(binary)) {
    const dest = join(rootfs, lib);
    if (await exists(dest)) continue;
    await mkdir(dirname(dest), { recursive: true });
    await copyFile(lib, dest);
  }
}

/** busybox at /bin/busybox with a link per applet (as the upstream busybox image has). */
export async function installBusybox(busybox: string, rootfs: string): Promise<void> {
  await mkdir(join(rootfs, 'bin'), { recursive: true });
  await copyFile(busybox, join(rootfs, 'bin/busybox'));
  await chmod(join(rootfs, 'bin/busybox'), 0o755);
  const { stdout } = await run(busybox, ['--list']);
  for (const applet of stdout.split('\n').filter((a) => a !== '' && a !== 'busybox')) {
    if (await exists(join(rootfs, 'bin', applet))) continue;
    await symlink('busybox', join(rootfs, 'bin', applet));
  }
}

/** The directories and /etc files (passwd, group, hosts placeholder) every image needs. */
export async function baseFiles(
  rootfs: string,
  extra: { passwd?: readonly string[]; group?: readonly string[] } = {},
): Promise<void> {
  // mkdtemp made the root 0700; processes running as non-root must traverse "/".
  await chmod(rootfs, 0o755);
  for (const dir of ['bin', 'etc', 'tmp', 'root', 'home', 'var', 'usr/bin', 'usr/sbin'])
    await mkdir(join(rootfs, dir), { recursive: true });
  await chmod(join(rootfs, 'tmp'), 0o1777);
  await writeFile(
    join(rootfs, 'etc/passwd'),
    [
      'root:x:0:0:root:/root:/bin/sh',
      ...(extra.passwd ?? []),
      'nobody:x:65534:65534:nobody:/home:/bin/false',
      '',
    ].join('\n'),
  );
  await writeFile(
    join(rootfs, 'etc/group'),
    ['root:x:0:', ...(extra.group ?? []), 'nogroup:x:65534:', ''].join('\n'),
  );
}
