/**
 * Where the cluster's programs are: the Go components in the version-keyed build
 * cache (hack/build-go.sh), the rest from Debian's packages.
 */
import { accessSync, constants, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const REPO_ROOT = new URL('../..', import.meta.url).pathname;

export function pinnedVersions(): Readonly<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const line of readFileSync(join(REPO_ROOT, 'versions.env'), 'utf8').split('\n')) {
    const m = /^([A-Z0-9_]+)=(\S+)/.exec(line);
    if (m?.[1] !== undefined && m[2] !== undefined) out[m[1]] = m[2];
  }
  return out;
}

export const cacheDir = (): string => process.env['BERTH_CACHE'] ?? '/var/cache/berth';

function version(key: string): string {
  const v = pinnedVersions()[key];
  if (v === undefined) throw new Error(`Cannot locate binaries: versions.env has no ${key}`);
  return v;
}

function executable(path: string, hint: string): string {
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`Cannot find ${path}: ${hint}`);
  }
  return path;
}

const BUILD_HINT = 'run `make deps` (hack/build-go.sh builds it into the cache)';
const APT_HINT = 'run `make deps` (installs Debian packages)';

export interface Binaries {
  readonly etcd: string;
  readonly kubeApiserver: string;
  readonly kubeControllerManager: string;
  readonly kubeScheduler: string;
  readonly kubectl: string;
  readonly kubelet: string;
  /** Checked on first use: only clusters with kubeProxy need it. */
  readonly kubeProxy: string;
  readonly containerd2: string;
  readonly containerd2Shim: string;
  readonly ctr2: string;
  readonly containerd1: string;
  readonly ctr1: string;
  readonly runc: string;
  /**
   * runc >= 1.2 built from its module (idmapped mounts, for user-namespaced pods; Debian's
   * 1.1.5 has none). Checked on first use: only clusters with a userns handler need it.
   */
  readonly runcUserns: string;
  readonly registry: string;
  readonly htpasswd: string;
  readonly cniBinDir: string;
}

export function binaries(): Binaries {
  const k8s = join(cacheDir(), 'bin', `kubernetes-${version('KUBERNETES_VERSION')}`);
  const etcd = join(cacheDir(), 'bin', `etcd-${version('ETCD_VERSION')}`);
  const cd2 = join(cacheDir(), 'bin', `containerd-${version('CONTAINERD_VERSION')}`);
  const runc = join(cacheDir(), 'bin', `runc-${version('RUNC_VERSION')}`);
  return {
    etcd: executable(join(etcd, 'etcd'), BUILD_HINT),
    kubeApiserver: executable(join(k8s, 'kube-apiserver'), BUILD_HINT),
    kubeControllerManager: executable(join(k8s, 'kube-controller-manager'), BUILD_HINT),
    kubeScheduler: executable(join(k8s, 'kube-scheduler'), BUILD_HINT),
    kubectl: executable(join(k8s, 'kubectl'), BUILD_HINT),
    kubelet: executable(join(k8s, 'kubelet'), BUILD_HINT),
    get kubeProxy() {
      return executable(join(k8s, 'kube-proxy'), BUILD_HINT);
    },
    containerd2: executable(join(cd2, 'containerd'), BUILD_HINT),
    containerd2Shim: executable(join(cd2, 'containerd-shim-runc-v2'), BUILD_HINT),
    ctr2: executable(join(cd2, 'ctr'), BUILD_HINT),
    containerd1: executable('/usr/bin/containerd', APT_HINT),
    ctr1: executable('/usr/bin/ctr', APT_HINT),
    runc: executable('/usr/bin/runc', APT_HINT),
    get runcUserns() {
      return executable(join(runc, 'runc'), BUILD_HINT);
    },
    registry: executable('/usr/bin/docker-registry', APT_HINT),
    htpasswd: executable('/usr/bin/htpasswd', APT_HINT),
    cniBinDir: join(executable('/usr/lib/cni/bridge', APT_HINT), '..'),
  };
}
