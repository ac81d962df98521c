#!/usr/bin/env bash
# Installs everything berth's builds and tests need on a Debian 12 machine, as root,
# and builds what must be built. Idempotent: a warm machine finishes in seconds.
#   1. Debian packages (runtime, registry, CNI, toolchain bits)
#   2. Go >= 1.26 (the machine's, else the official toolchain from the Go module proxy)
#   3. Node 24 via npm (the `node` package pinned in package.json), npm ci
#   4. Kubernetes, etcd, containerd 2.x, runc, metrics-server and the CSI test components
#      (sidecars, mock driver, registrar) from the Go module proxy (hack/build-go.sh)
#   5. The test images (hack/images/build.ts)
#   6. berth's sources with types stripped, for bin/berth (hack/build-js.ts)
. "$(dirname "$0")/lib.sh"
cd "$BERTH_ROOT"

[ "$(id -u)" = 0 ] || die "berth's set-up needs root (it installs packages and runs a container runtime)."
[ -r /etc/debian_version ] || die "berth's set-up supports Debian 12 only (no /etc/debian_version)."

APT_PACKAGES=(
  containerd runc containernetworking-plugins iptables iproute2 # runtimes and CNI
  util-linux                                                    # flock: the kube-proxy lock
  docker-registry apache2-utils openssl                         # registry with htpasswd, PKI
  busybox-static gcc libc6-dev mmdebstrap                       # test images
  libseccomp-dev pkg-config                                     # runc >= 1.2 built with seccomp
  ca-certificates curl unzip tar git make                       # tooling
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then missing+=(nodejs npm); fi
if [ ${#missing[@]} -gt 0 ]; then
  log "deps: installing Debian packages: ${missing[*]}"
  # Packages such as containerd would start system services on install; berth runs
  # its own private instances, so keep the system ones off.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  export DEBIAN_FRONTEND=noninteractive
  with_heartbeat "apt-get update" apt-get update -qq || die "apt-get update failed; check the Debian mirror in /etc/apt/sources.list."
  with_heartbeat "apt-get install" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed; run it by hand to see why."
  rm -f /usr/sbin/policy-rc.d
else
  log "deps: Debian packages present"
fi

# Go: the build modules need >= 1.26.
GO_WANT=1.26.8
go_ok() { command -v go >/dev/null && go version | grep -qE 'go1\.(2[6-9]|[3-9][0-9])'; }
if ! go_ok; then
  goroot="$BERTH_CACHE/go-$GO_WANT"
  if [ ! -x "$goroot/bin/go" ]; then
    log "deps: Go >= 1.26 not found; fetching go$GO_WANT from the Go module proxy"
    tmp=$(mktemp -d)
    curl -fsSL -o "$tmp/go.zip" "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go$GO_WANT.linux-amd64.zip" \
      || die "cannot download the Go toolchain from the Go module proxy"
    (cd "$tmp" && unzip -q go.zip) && mkdir -p "$BERTH_CACHE" && rm -rf "$goroot" \
      && mv "$tmp/golang.org/toolchain@v0.0.1-go$GO_WANT.linux-amd64" "$goroot" && chmod +x "$goroot"/bin/* "$goroot"/pkg/tool/*/*
    rm -rf "$tmp"
  fi
  export PATH="$goroot/bin:$PATH"
  go_ok || die "Go $GO_WANT from the module proxy does not run"
fi
log "deps: $(go version)"

# Node 24 comes from the npm registry as a dev dependency; the system node only runs npm.
stamp=node_modules/.berth-lock-hash
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -x node_modules/.bin/node ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "deps: npm ci (Node 24 and the project's packages)"
  with_heartbeat "npm ci" npm ci --no-audit --no-fund --loglevel=error || die "npm ci failed; see the npm log above."
  echo "$want" > "$stamp"
fi
node_modules/.bin/node -e 'if (+process.versions.node.split(".")[0] < 24) process.exit(1)' \
  || die "node_modules/.bin/node is not Node 24; remove node_modules and run make deps again."
log "deps: Node $(node_modules/.bin/node --version) (pinned), system node $(node --version)"

"$BERTH_ROOT/hack/build-go.sh"
log "deps: building test images"
node_modules/.bin/node hack/images/build.ts >/dev/null
log "deps: berth as JavaScript (hack/build-js.ts)"
node_modules/.bin/node --no-warnings=ExperimentalWarning hack/build-js.ts >/dev/null || die "hack/build-js.ts failed; see its error above."
log "deps: ready"
