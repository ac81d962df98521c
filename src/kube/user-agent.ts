/** How berth names itself to the API server: client-go's User-Agent shape. */

/** berth's own version, reported in the User-Agent. */
const BERTH_VERSION = '0.1.0';
/** The Kubernetes version berth's API use follows. */
const KUBERNETES_VERSION = 'v1.37.2';

const GO_ARCH: Readonly<Record<string, string>> = { x64: 'amd64', ia32: '386', ppc64: 'ppc64le' };

/** `berth/0.1.0 (linux/amd64) kubernetes/v1.37.2`, shaped like client-go's default. */
export function defaultUserAgent(
  platform: string = process.platform,
  arch: string = process.arch,
): string {
  return `berth/${BERTH_VERSION} (${platform}/${GO_ARCH[arch] ?? arch}) kubernetes/${KUBERNETES_VERSION}`;
}
