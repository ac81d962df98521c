/**
 * The control-plane images `kubeadm init` runs, built from the project's cached
 * binaries (hack/build-go.sh, hack/conformance/build-go.sh) and Debian packages, under
 * exactly the references `kubeadm config images list` prints, so kubeadm finds them in
 * the runtime and pulls nothing.
 *
 *   kube-apiserver, kube-controller-manager, kube-scheduler   the cached v1.37.x binary
 *                                     in /usr/local/bin, as upstream's images have it
 *   kube-proxy     the binary plus Debian's iptables (nf_tables backend, as this host's:
 *                  two backends on one host would hide each other's rules) and its
 *                  xtables extensions
 *   etcd           etcd and etcdctl in /usr/local/bin, at kubeadm's DefaultEtcdVersion
 *                  (hack/go/kubeadm-etcd; the harness's etcd is ETCD_VERSION)
 *   coredns        /coredns at kubeadm's CoreDNSVersion (hack/go/kubeadm-coredns)
 *   pause          k8s.io/kubernetes build/pause/linux/pause.c, gcc -static
 *
 * etcd and CoreDNS are built here, static, from their build modules (the Go module
 * proxy, pinned by go.sum); the Kubernetes binaries come from the cache. Each image's
 * tag must name the version of the binary it holds: a tag that the pinned modules or
 * KUBERNETES_VERSION do not match is refused, naming the module to change.
 *
 *   node hack/images/kubeadm.ts <image reference>...   (prints one JSON line per image)
 */
import { createHash } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../test/harness/exec.ts';
import { cacheDir, pinnedVersions, REPO_ROOT } from '../../test/harness/binaries.ts';
import { writeOciLayout, type ImageConfig } from './oci.ts';
import { baseFiles, installBinary } from './rootfs.ts';

export interface KubeadmImage {
  /** The reference kubeadm asked for, e.g. registry.k8s.io/kube-apiserver:v1.37.2. */
  readonly ref: string;
  readonly layout: string;
  readonly archive: string;
}

/** Bump when a recipe's populate() changes. */
const RECIPES_REVISION = '1';
const PATH_ENV = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const XTABLES_DIR = '/usr/lib/x86_64-linux-gnu/xtables';
const IPTABLES_TOOLS = [
  'iptables',
  'iptables-save',
  'iptables-restore',
  'ip6tables',
  'ip6tables-save',
  'ip6tables-restore',
];

interface Recipe {
  /** What the cache key depends on besides the reference. */
  readonly inputs: readonly string[];
  readonly config: ImageConfig;
  populate(rootfs: string): Promise<void>;
}

function version(key: string): string {
  const v = pinnedVersions()[key];
  if (v === undefined) throw new Error(`Cannot build kubeadm's images: versions.env has no ${key}`);
  return v;
}

async function mtime(path: string): Promise<string> {
  const s = await stat(path).catch(() => {
    throw new Error(`Cannot build kubeadm's images: ${path} is missing (run make deps)`);
  });
  return String(s.mtimeMs);
}

function splitRef(ref: string): { repo: string; name: string; tag: string } {
  const at = ref.lastIndexOf(':');
  if (at <= ref.lastIndexOf('/')) throw new Error(`Cannot build image ${ref}: it has no tag`);
  const repo = ref.slice(0, at);
  return { repo, name: repo.slice(repo.lastIndexOf('/') + 1), tag: ref.slice(at + 1) };
}

function requireTag(ref: string, tag: string, want: string, hint: string): void {
  if (tag !== want)
    throw new Error(`Cannot build ${ref}: the project's binary is ${want}, not ${tag}; ${hint}`);
}

async function kubeBinaryRecipe(
  name: string,
  extra?: (rootfs: string) => Promise<void>,
): Promise<Recipe> {
  const binary = join(cacheDir(), 'bin', `kubernetes-${version('KUBERNETES_VERSION')}`, name);
  const inputs = [await mtime(binary)];
  if (extra !== undefined) {
    const { stdout } = await run('dpkg-query', ['-W', '-f=${Version}', 'iptables']);
    inputs.push(stdout);
  }
  return {
    inputs,
    config: { env: [PATH_ENV] },
    async populate(rootfs) {
      await baseFiles(rootfs);
      await installBinary(binary, rootfs, `/usr/local/bin/${name}`);
      await extra?.(rootfs);
    },
  };
}

/** Debian's iptables with the nf_tables backend, and every xtables extension. */
async function installIptables(rootfs: string): Promise<void> {
  await installBinary('/usr/sbin/xtables-nft-multi', rootfs, '/usr/sbin/xtables-nft-multi');
  for (const tool of IPTABLES_TOOLS)
    await symlink('xtables-nft-multi', join(rootfs, 'usr/sbin', tool));
  await mkdir(join(rootfs, XTABLES_DIR), { recursive: true });
  for (const so of await readdir(XTABLES_DIR))
    await installBinary(join(XTABLES_DIR, so), rootfs, join(XTABLES_DIR, so));
}

/** A build module under hack/go: the version it pins of `module`, and its cache inputs. */
async function buildModule(
  name: string,
  module: string,
): Promise<{ dir: string; version: string; inputs: string[]; hint: string }> {
  const dir = join(REPO_ROOT, 'hack/go', name);
  const goMod = await readFile(join(dir, 'go.mod'), 'utf8');
  const version = new RegExp(`^\\s*${module.replaceAll('.', '\\.')} (v\\S+)`, 'm').exec(goMod)?.[1];
  if (version === undefined)
    throw new Error(`Cannot build kubeadm's images: hack/go/${name}/go.mod pins no ${module}`);
  const { stdout: goVersion } = await run('go', ['version']);
  const goSum = createHash('sha256')
    .update(await readFile(join(dir, 'go.sum')))
    .digest('hex');
  return {
    dir,
    version,
    inputs: [goVersion, goSum],
    hint: `pin it in hack/go/${name} (go get ${module}@<version>)`,
  };
}

/** A static build of `pkg` from the build module in `dir` (its modules pinned by go.sum). */
async function goBuild(dir: string, pkg: string, out: string): Promise<void> {
  await run('go', ['build', '-trimpath', '-ldflags', '-s -w', '-o', out, pkg], {
    cwd: dir,
    env: { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-mod=readonly -buildvcs=false' },
    // A cold module download and build take minutes on 2 cores.
    timeoutMs: 1_200_000,
  });
}

async function recipeFor(ref: string): Promise<Recipe> {
  const { name, tag } = splitRef(ref);
  const k8s = version('KUBERNETES_VERSION');
  const k8sHint = `build kubeadm and the images from the same KUBERNETES_VERSION (versions.env)`;
  switch (name) {
    case 'kube-apiserver':
    case 'kube-controller-manager':
    case 'kube-scheduler':
      requireTag(ref, tag, k8s, k8sHint);
      return kubeBinaryRecipe(name);
    case 'kube-proxy':
      requireTag(ref, tag, k8s, k8sHint);
      return kubeBinaryRecipe(name, installIptables);
    case 'etcd': {
      const mod = await buildModule('kubeadm-etcd', 'go.etcd.io/etcd/server/v3');
      // registry.k8s.io/etcd tags are "<version>-<image revision>".
      requireTag(ref, tag, `${mod.version.slice(1)}-0`, mod.hint);
      return {
        inputs: mod.inputs,
        config: { env: [PATH_ENV] },
        async populate(rootfs) {
          await baseFiles(rootfs);
          await mkdir(join(rootfs, 'usr/local/bin'), { recursive: true });
          await goBuild(mod.dir, 'go.etcd.io/etcd/server/v3', join(rootfs, 'usr/local/bin/etcd'));
          await goBuild(
            mod.dir,
            'go.etcd.io/etcd/etcdctl/v3',
            join(rootfs, 'usr/local/bin/etcdctl'),
          );
        },
      };
    }
    case 'coredns': {
      const mod = await buildModule('kubeadm-coredns', 'github.com/coredns/coredns');
      requireTag(ref, tag, mod.version, mod.hint);
      return {
        inputs: mod.inputs,
        // Root, as upstream's image: kubeadm's Deployment binds :53 with NET_BIND_SERVICE.
        config: { entrypoint: ['/coredns'] },
        async populate(rootfs) {
          await baseFiles(rootfs);
          await goBuild(mod.dir, 'github.com/coredns/coredns', join(rootfs, 'coredns'));
        },
      };
    }
    case 'pause': {
      const { stdout } = await run('go', ['env', 'GOMODCACHE']);
      const source = join(stdout.trim(), `k8s.io/kubernetes@${k8s}`, 'build/pause/linux/pause.c');
      return {
        inputs: [k8s, tag],
        config: { entrypoint: ['/pause'], user: '65535:65535' },
        async populate(rootfs) {
          await chmod(rootfs, 0o755);
          await run('gcc', [
            '-static',
            '-O2',
            `-DVERSION=${tag}`,
            '-o',
            join(rootfs, 'pause'),
            source,
          ]);
          await run('strip', [join(rootfs, 'pause')]);
        },
      };
    }
    default:
      throw new Error(`Cannot build ${ref}: no recipe for an image named ${name}`);
  }
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

async function build(ref: string): Promise<KubeadmImage> {
  const recipe = await recipeFor(ref);
  const key = createHash('sha256')
    .update(`${RECIPES_REVISION}\n${ref}\n${recipe.inputs.join('\n')}`)
    .digest('hex')
    .slice(0, 12);
  const { name } = splitRef(ref);
  const layout = join(cacheDir(), 'images', `kubeadm-${name}_${key}`);
  const image: KubeadmImage = { ref, layout, archive: `${layout}.tar` };
  if ((await exists(join(layout, 'index.json'))) && (await exists(image.archive))) return image;
  await mkdir(join(cacheDir(), 'images'), { recursive: true });
  const rootfs = await mkdtemp(join(tmpdir(), `berth-image-${name}-`));
  try {
    await recipe.populate(rootfs);
    await writeOciLayout(rootfs, layout, ref, recipe.config);
  } finally {
    await rm(rootfs, { recursive: true, force: true });
  }
  return image;
}

/** Builds (or finds in the cache) the images at these references, in order. */
export async function buildKubeadmImages(refs: readonly string[]): Promise<KubeadmImage[]> {
  const out: KubeadmImage[] = [];
  for (const ref of refs) out.push(await build(ref));
  return out;
}

if (import.meta.main) {
  for (const image of await buildKubeadmImages(process.argv.slice(2)))
    console.log(JSON.stringify(image));
}
