/**
 * The images upstream's e2e suite runs (test/utils/image/manifest.go of the pinned
 * k8s.io/kubernetes), built here from the same software the upstream images hold, for
 * `make conformance` and the conformance subset of `make test`. Nothing is pulled from
 * the internet: Go programs come from the Go module proxy (hack/go/e2e, pinned by
 * go.sum), the rest from Debian packages.
 *
 *   agnhost 2.66.1     k8s.io/kubernetes/test/images/agnhost, static; with bash (some
 *                      probe specs call it) and busybox's applets, as upstream's
 *                      alpine-based image has
 *   busybox 1.37.0-2   busybox 1.37.0 built static from source (busybox-source.ts: Debian's
 *                      binaries drop non-identifier env names in sh, upstream's keep them)
 *   pause 3.10.2       k8s.io/kubernetes build/pause/linux/pause.c, gcc -static
 *   nginx 1.27.0-2     Debian's nginx with its shared libraries
 *   nonewprivs 1.4     test/images/nonewprivs (nnp, setuid root) on busybox
 *   nonroot 1.5        busybox with USER 1234
 *   coredns            the cluster DNS (hack/conformance/build-go.sh builds it)
 *   glibc-dns-testing 2.1.1
 *                      Debian bookworm minbase with dnsutils, by mmdebstrap, as
 *                      upstream's (bookworm-slim + dnsutils); without upstream's extra
 *                      coredns 1.5.0 download, which no node-facing spec runs
 *
 * Every image is named under CONFORMANCE_REGISTRY, which KUBE_TEST_REPO_LIST maps the
 * suite's registries to (hack/conformance/repo-list.ts); the runtime gets them
 * preloaded and can also pull them from the cluster's conformance registry.
 *
 *   node hack/images/conformance.ts      (builds them, prints one JSON line per image)
 */
import { createHash } from 'node:crypto';
import { chmod, copyFile, mkdir, mkdtemp, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../test/harness/exec.ts';
import { cacheDir, pinnedVersions, REPO_ROOT } from '../../test/harness/binaries.ts';
import { writeOciLayout, type ImageConfig } from './oci.ts';
import { busyboxFromSource } from './busybox-source.ts';
import { baseFiles, debPackage, installBinary, installBusybox } from './rootfs.ts';

/** The registry host every conformance image is named under (never resolved: a mirror). */
export const CONFORMANCE_REGISTRY = 'conformance.berth.local';
/** CoreDNS's version: hack/conformance/build-go.sh builds it (COREDNS_VERSION there). */
export const COREDNS_VERSION = 'v1.15.0';

export interface ConformanceImage {
  readonly name: string;
  /** Every reference the image answers to, e.g. conformance.berth.local/e2e-test-images/agnhost:2.66.1. */
  readonly refs: readonly string[];
  readonly layout: string;
  readonly archive: string;
}

interface Recipe {
  readonly name: string;
  /** Repository paths and tags under CONFORMANCE_REGISTRY; the first names the layout. */
  readonly repoTags: readonly string[];
  /** Everything the result depends on besides repoTags: the cache key. */
  readonly inputs: readonly string[];
  readonly config: ImageConfig;
  populate(rootfs: string): Promise<void>;
}

const E2E_MODULE = join(REPO_ROOT, 'hack/go/e2e');
const PATH_ENV = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** Bump when a populate() changes. */
const RECIPES_REVISION = '1';

function kubernetesModuleDir(): Promise<string> {
  return run('go', ['env', 'GOMODCACHE']).then(({ stdout }) =>
    join(stdout.trim(), `k8s.io/kubernetes@${pinnedVersions()['KUBERNETES_VERSION'] ?? ''}`),
  );
}

async function goBuild(pkg: string, out: string): Promise<void> {
  await run('go', ['build', '-trimpath', '-ldflags', '-s -w', '-o', out, pkg], {
    cwd: E2E_MODULE,
    env: { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-mod=readonly -buildvcs=false' },
    timeoutMs: 900_000,
  });
}

async function recipes(): Promise<Recipe[]> {
  const { stdout: goVersion } = await run('go', ['version']);
  const k8s = pinnedVersions()['KUBERNETES_VERSION'] ?? '';
  const bb = await busyboxFromSource();
  const modDir = await kubernetesModuleDir();
  const bash = '/bin/bash';
  const { stdout: bashVersion } = await run('dpkg-query', ['-W', '-f=${Version}', 'bash']);
  // Upstream's agnhost image carries curl: the lifecycle hook specs' exec hooks call it.
  const { stdout: curlVersion } = await run('dpkg-query', ['-W', '-f=${Version}', 'curl']);
  const nginx = await debPackage('nginx');
  const nginxCommon = await debPackage('nginx-common');
  const coredns = join(cacheDir(), 'bin', `coredns-${COREDNS_VERSION}`, 'coredns');
  const { stdout: dnsutilsPolicy } = await run('apt-cache', ['policy', 'bind9-dnsutils']);
  const dnsutilsVersion = /Candidate:\s*(\S+)/.exec(dnsutilsPolicy)?.[1] ?? '';
  const busyboxBase = async (rootfs: string): Promise<void> => {
    await baseFiles(rootfs);
    await installBusybox(bb.binary, rootfs);
  };
  return [
    {
      name: 'agnhost',
      repoTags: ['e2e-test-images/agnhost:2.66.1', 'e2e-test-images/agnhost:2.55'],
      inputs: [k8s, goVersion, bb.version, bashVersion, curlVersion],
      config: { entrypoint: ['/agnhost'], cmd: ['pause'], env: [PATH_ENV] },
      async populate(rootfs) {
        await baseFiles(rootfs, {
          passwd: ['user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh'],
          group: [
            'user-defined-in-image:x:1000:',
            'group-defined-in-image:x:50000:user-defined-in-image',
          ],
        });
        await mkdir(join(rootfs, 'home/user-defined-in-image'), { recursive: true });
        await installBusybox(bb.binary, rootfs);
        await installBinary(bash, rootfs, '/bin/bash');
        await installBinary('/usr/bin/curl', rootfs, '/usr/bin/curl');
        await goBuild('k8s.io/kubernetes/test/images/agnhost', join(rootfs, 'agnhost'));
        await symlink('agnhost', join(rootfs, 'agnhost-2'));
        await mkdir(join(rootfs, 'uploads'));
        for (const f of ['localhost.crt', 'localhost.key'])
          await copyFile(join(modDir, 'test/images/agnhost/porter', f), join(rootfs, f));
      },
    },
    {
      name: 'busybox',
      repoTags: ['e2e-test-images/busybox:1.37.0-2'],
      inputs: [bb.version],
      config: { cmd: ['sh'], env: [PATH_ENV] },
      populate: busyboxBase,
    },
    {
      name: 'pause',
      repoTags: ['pause:3.10.2'],
      inputs: [k8s],
      config: { entrypoint: ['/pause'], user: '65535:65535' },
      async populate(rootfs) {
        await chmod(rootfs, 0o755);
        const src = join(modDir, 'build/pause/linux/pause.c');
        await run('gcc', ['-static', '-O2', '-DVERSION=3.10.2', '-o', join(rootfs, 'pause'), src]);
        await run('strip', [join(rootfs, 'pause')]);
      },
    },
    {
      name: 'nginx',
      repoTags: ['e2e-test-images/nginx:1.27.0-2', 'e2e-test-images/nginx:1.28.0-2'],
      inputs: [nginx.version, bb.version],
      config: { cmd: ['nginx', '-g', 'daemon off;'], env: [PATH_ENV] },
      async populate(rootfs) {
        await baseFiles(rootfs, {
          passwd: ['nginx:x:101:101:nginx:/var/cache/nginx:/sbin/nologin'],
          group: ['nginx:x:101:nginx'],
        });
        await installBusybox(bb.binary, rootfs);
        await installBinary(join(nginx.dir, 'usr/sbin/nginx'), rootfs, '/usr/sbin/nginx');
        for (const d of [
          'etc/nginx',
          'usr/share/nginx/html',
          'var/log/nginx',
          'var/lib/nginx',
          'var/cache/nginx',
          'run',
        ])
          await mkdir(join(rootfs, d), { recursive: true });
        await copyFile(
          join(nginxCommon.dir, 'etc/nginx/mime.types'),
          join(rootfs, 'etc/nginx/mime.types'),
        );
        await copyFile(
          join(nginxCommon.dir, 'usr/share/nginx/html/index.html'),
          join(rootfs, 'usr/share/nginx/html/index.html'),
        );
        // As upstream's image: logs to the container's stdout and stderr.
        await symlink('/dev/stdout', join(rootfs, 'var/log/nginx/access.log'));
        await symlink('/dev/stderr', join(rootfs, 'var/log/nginx/error.log'));
        await writeFile(join(rootfs, 'etc/nginx/nginx.conf'), NGINX_CONF);
      },
    },
    {
      name: 'nonewprivs',
      repoTags: ['e2e-test-images/nonewprivs:1.4'],
      inputs: [k8s, goVersion, bb.version],
      config: { cmd: ['nnp'], env: [PATH_ENV] },
      async populate(rootfs) {
        await busyboxBase(rootfs);
        await mkdir(join(rootfs, 'usr/local/bin'), { recursive: true });
        await goBuild(
          'k8s.io/kubernetes/test/images/nonewprivs',
          join(rootfs, 'usr/local/bin/nnp'),
        );
        await chmod(join(rootfs, 'usr/local/bin/nnp'), 0o4755);
      },
    },
    {
      name: 'nonroot',
      repoTags: ['e2e-test-images/nonroot:1.5'],
      inputs: [bb.version],
      config: { cmd: ['sh'], env: [PATH_ENV], user: '1234' },
      populate: busyboxBase,
    },
    {
      name: 'coredns',
      repoTags: [`coredns/coredns:${COREDNS_VERSION}`],
      inputs: [
        COREDNS_VERSION,
        (await stat(coredns).catch(() => undefined))?.mtimeMs.toString() ?? '',
      ],
      // Root, as kubeadm runs it: it binds port 53.
      config: { entrypoint: ['/coredns'] },
      async populate(rootfs) {
        await baseFiles(rootfs);
        await copyFile(coredns, join(rootfs, 'coredns'));
        await chmod(join(rootfs, 'coredns'), 0o755);
      },
    },
    {
      name: 'glibc-dns-testing',
      repoTags: ['e2e-test-images/glibc-dns-testing:2.1.1'],
      // The Debian snapshot drifts with the mirror: the dnsutils version stands for it.
      inputs: [dnsutilsVersion],
      config: { cmd: ['bash'], env: [PATH_ENV] },
      async populate(rootfs) {
        // A real glibc userland is the point of this image (the hostnameOverride specs
        // run glibc's `hostname -f`), so it is a Debian system, not busybox.
        await run(
          'mmdebstrap',
          [
            '--quiet',
            '--variant=minbase',
            '--include=dnsutils,hostname',
            '--dpkgopt=path-exclude=/usr/share/{doc,man,locale}/*',
            'bookworm',
            rootfs,
          ],
          { timeoutMs: 900_000 },
        );
      },
    },
  ];
}

const NGINX_CONF = `user nginx;
worker_processes auto;
error_log /var/log/nginx/error.log notice;
pid /run/nginx.pid;
events { worker_connections 1024; }
http {
  include /etc/nginx/mime.types;
  default_type application/octet-stream;
  access_log /var/log/nginx/access.log;
  sendfile on;
  keepalive_timeout 65;
  server {
    listen 80;
    listen [::]:80;
    server_name localhost;
    location / {
      root /usr/share/nginx/html;
      index index.html index.htm;
    }
  }
}
`;

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

async function build(recipe: Recipe): Promise<ConformanceImage> {
  const key = createHash('sha256')
    .update(`${RECIPES_REVISION}\n${recipe.repoTags.join(' ')}\n${recipe.inputs.join('\n')}`)
    .digest('hex')
    .slice(0, 12);
  const layout = join(cacheDir(), 'images', `conformance-${recipe.name}_${key}`);
  const refs = recipe.repoTags.map((t) => `${CONFORMANCE_REGISTRY}/${t}`);
  const image: ConformanceImage = { name: recipe.name, refs, layout, archive: `${layout}.tar` };
  if ((await exists(join(layout, 'index.json'))) && (await exists(image.archive))) return image;
  await mkdir(join(cacheDir(), 'images'), { recursive: true });
  const rootfs = await mkdtemp(join(tmpdir(), `berth-image-${recipe.name}-`));
  try {
    await recipe.populate(rootfs);
    await writeOciLayout(rootfs, layout, refs[0] ?? '', recipe.config);
  } finally {
    await rm(rootfs, { recursive: true, force: true });
  }
  return image;
}

/** Builds (or finds in the cache) every conformance image. CoreDNS must be built first. */
export async function buildConformanceImages(): Promise<ConformanceImage[]> {
  const out: ConformanceImage[] = [];
  // One at a time: the Go builds would fight over the machine's two cores anyway.
  for (const recipe of await recipes()) out.push(await build(recipe));
  return out;
}

if (import.meta.main) {
  for (const image of await buildConformanceImages()) console.log(JSON.stringify(image));
}
