/**
 * Builds berth's test images from Debian binaries into $BERTH_CACHE/images/, as OCI
 * layouts and archives. No image comes from the internet.
 *   pause       - images/pause/pause.c, compiled static with Debian's gcc
 *   busybox     - Debian's busybox-static with one link per applet
 *   grpc-health - hack/images/grpc-health (a grpc.health.v1 server for gRPC probe
 *                 tests; /kube-get, an API client using the pod's service-account
 *                 volume; /probe-target, the probe benchmark's HTTP server), built static (CGO_ENABLED=0) with the machine's Go; its
 *                 modules come from the Go module proxy, pinned by go.sum
 *
 *   node hack/images/build.ts        (prints one JSON line per image)
 */
import { createHash } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../test/harness/exec.ts';
import { writeOciLayout, type ImageConfig } from './oci.ts';

export interface BuiltImage {
  /** Short name, e.g. "busybox". */
  readonly name: string;
  /** Repository path and tag within a registry, e.g. "berth/busybox:1.35.0". */
  readonly repoTag: string;
  /** Name used when preloaded into a runtime, e.g. "berth.local/busybox:1.35.0". */
  readonly localRef: string;
  readonly layout: string;
  readonly archive: string;
}

const REPO_ROOT = new URL('../..', import.meta.url).pathname;
import { cacheDir } from '../../test/harness/binaries.ts';
export { cacheDir };

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

async function debVersion(pkg: string): Promise<string> {
  const { stdout } = await run('dpkg-query', ['-W', '-f=${Version}', pkg]).catch(() => {
    throw new Error(`Cannot build images: Debian package ${pkg} is not installed (run make deps)`);
  });
  return stdout.trim();
}

interface ImageRecipe {
  readonly name: string;
  readonly tag: string;
  readonly config: ImageConfig;
  populate(rootfs: string): Promise<void>;
}

async function pauseRecipe(): Promise<ImageRecipe> {
  const source = join(REPO_ROOT, 'images/pause/pause.c');
  const digest = createHash('sha256')
    .update(await readFile(source))
    .digest('hex')
    .slice(0, 12);
  return {
    name: 'pause',
    tag: `1.0-${digest}`,
    config: { entrypoint: ['/pause'], user: '65535:65535' },
    async populate(rootfs) {
      await run('gcc', [
        '-static',
        '-O2',
        '-Wall',
        '-Wextra',
        '-Werror',
        '-o',
        join(rootfs, 'pause'),
        source,
      ]);
      await run('strip', [join(rootfs, 'pause')]);
    },
  };
}

async function busyboxRecipe(): Promise<ImageRecipe> {
  const deb = await debVersion('busybox-static');
  // "1:1.35.0-4+deb12u1+b1" -> "1.35.0-4-deb12u1-b1": a valid tag that still names the build.
  const tag = deb.replace(/^\d+:/, '').replace(/[^A-Za-z0-9_.-]/g, '-');
  return {
    name: 'busybox',
    tag,
    config: { cmd: ['sh'] },
    async populate(rootfs) {
      for (const dir of ['bin', 'etc', 'tmp', 'root', 'home', 'var'])
        await mkdir(join(rootfs, dir));
      await chmod(join(rootfs, 'tmp'), 0o1777);
      await run('cp', ['/bin/busybox', join(rootfs, 'bin/busybox')]);
      const { stdout } = await run('/bin/busybox', ['--list']);
      for (const applet of stdout.split('\n').filter((a) => a !== '' && a !== 'busybox')) {
        await symlink('busybox', join(rootfs, 'bin', applet));
      }
      await writeFile(
        join(rootfs, 'etc/passwd'),
        'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n',
      );
      await writeFile(join(rootfs, 'etc/group'), 'root:x:0:\nnogroup:x:65534:\n');
    },
  };
}

function goBuildOptions(dir: string): {
  cwd: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
} {
  return {
    cwd: dir,
    // Static, so the image needs nothing but the binary; -mod=readonly keeps go.sum
    // the only source of module versions.
    env: { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-mod=readonly -buildvcs=false' },
    // A cold module download and build take minutes on 2 cores.
    timeoutMs: 600_000,
  };
}

async function grpcHealthRecipe(): Promise<ImageRecipe> {
  const dir = join(REPO_ROOT, 'hack/images/grpc-health');
  const { stdout: goVersion } = await run('go', ['version']).catch(() => {
    throw new Error('Cannot build the grpc-health image: Go is not installed (run make deps)');
  });
  // Cached by content: the recipe's revision, the sources, the pinned modules and the
  // toolchain. Bump the revision when populate() changes.
  const hash = createHash('sha256').update('grpc-health recipe 4\n').update(goVersion);
  for (const file of ['main.go', 'kube-get/main.go', 'probe-target/main.go', 'go.mod', 'go.sum'])
    hash.update(await readFile(join(dir, file)));
  return {
    name: 'grpc-health',
    tag: `1.0-${hash.digest('hex').slice(0, 12)}`,
    config: { entrypoint: ['/grpc-health'], user: '65534:65534' },
    async populate(rootfs) {
      // mkdtemp makes the root 0700; the server runs as nobody and must traverse "/".
      await chmod(rootfs, 0o755);
      await run(
        'go',
        ['build', '-trimpath', '-ldflags', '-s -w', '-o', join(rootfs, 'grpc-health'), '.'],
        goBuildOptions(dir),
      );
      // The volume tests' API client: token and CA from the service-account volume.
      await run(
        'go',
        ['build', '-trimpath', '-ldflags', '-s -w', '-o', join(rootfs, 'kube-get'), './kube-get'],
        goBuildOptions(dir),
      );
      // The probe benchmark's target: logs when each probe arrives, forks nothing.
      await run(
        'go',
        [
          'build',
          '-trimpath',
          '-ldflags',
          '-s -w',
          '-o',
          join(rootfs, 'probe-target'),
          './probe-target',
        ],
        goBuildOptions(dir),
      );
    },
  };
}

async function build(recipe: ImageRecipe): Promise<BuiltImage> {
  const key = `${recipe.name}_${recipe.tag}`;
  const layout = join(cacheDir(), 'images', key);
  const image: BuiltImage = {
    name: recipe.name,
    repoTag: `berth/${recipe.name}:${recipe.tag}`,
    localRef: `berth.local/${recipe.name}:${recipe.tag}`,
    layout,
    archive: `${layout}.tar`,
  };
  if ((await exists(join(layout, 'index.json'))) && (await exists(image.archive))) return image;
  await mkdir(join(cacheDir(), 'images'), { recursive: true });
  const rootfs = await mkdtemp(join(tmpdir(), `berth-image-${recipe.name}-`));
  try {
    await recipe.populate(rootfs);
    await writeOciLayout(rootfs, layout, image.localRef, recipe.config);
  } finally {
    await rm(rootfs, { recursive: true, force: true });
  }
  return image;
}

/** Builds (or finds in the cache) every test image. */
export async function buildImages(): Promise<{
  pause: BuiltImage;
  busybox: BuiltImage;
  grpcHealth: BuiltImage;
}> {
  const [pause, busybox, grpcHealth] = await Promise.all([
    pauseRecipe().then(build),
    busyboxRecipe().then(build),
    grpcHealthRecipe().then(build),
  ]);
  return { pause, busybox, grpcHealth };
}

if (import.meta.main) {
  for (const image of Object.values(await buildImages())) console.log(JSON.stringify(image));
}
