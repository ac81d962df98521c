#!/usr/bin/env bash
# Builds the Go components (Kubernetes, etcd, containerd 2.x, runc, metrics-server, the CSI test
# components) from the Go module proxy into $BERTH_CACHE/bin/<component>-<version>/.
# A component whose cache directory holds a .complete marker is not rebuilt; binaries
# added to a component's list later (kube-proxy, kubeadm) are built alone into the existing directory.
#   hack/build-go.sh [kubernetes|etcd|containerd|runc|metrics-server|csi ...]   (default: all)
. "$(dirname "$0")/lib.sh"

command -v go >/dev/null || die "Go is not installed; install Go >= 1.26 (the build modules need it)."

build_module() { # name version moddir unused pkg...
  local name=$1 version=$2 moddir=$3 out=$4; shift 4
  local dest="$BERTH_CACHE/bin/$name-$version" lock
  mkdir -p "$BERTH_CACHE/bin"
  # Two set-ups at once (two `make` runs) would build into the same $dest.tmp and then
  # remove each other's result: the second waits here, then finds the cache complete.
  exec {lock}>"$dest.lock"
  if ! flock -n "$lock"; then
    log "$name $version: another set-up is building it; waiting"
    flock "$lock"
  fi
  if [ -f "$dest/.complete" ]; then
    # A cache made before a package joined the list lacks its binary: build only those
    # (RENAME'd modules never grow, so their binaries are named after the package).
    local pkg missing=()
    for pkg in "$@"; do [ -n "${RENAME:-}" ] || [ -x "$dest/${pkg##*/}" ] || missing+=("$pkg"); done
    if [ ${#missing[@]} -eq 0 ]; then log "$name $version: cached in $dest"; exec {lock}>&-; return 0; fi
    log "$name $version: cached in $dest, but without ${missing[*]##*/}; building just those"
    rm -rf "$dest.add" && mkdir -p "$dest.add"
    (cd "$moddir" && with_heartbeat "$name download" go mod download)
    log "$name $version: compiling ${missing[*]##*/} (a few minutes on 2 cores)"
    (cd "$moddir" && with_heartbeat "$name build" go build -trimpath -ldflags "$LDFLAGS" -o "$dest.add/" "${missing[@]}")
    mv "$dest.add"/* "$dest/" && rmdir "$dest.add" || die "$name $version: cannot move the new binaries into $dest"
    log "$name $version: added ${missing[*]##*/} to $dest"
    exec {lock}>&-
    return 0
  fi
  mkdir -p "$dest.tmp"
  log "$name $version: downloading modules (first time only)"
  (cd "$moddir" && with_heartbeat "$name download" go mod download)
  log "$name $version: compiling ${*##*/} (cold builds take minutes on 2 cores)"
  (cd "$moddir" && with_heartbeat "$name build" go build -trimpath -ldflags "$LDFLAGS" -o "$dest.tmp/" "$@")
  # `go build` names a binary after its package path, minus a /vN suffix.
  if [ -n "${RENAME:-}" ]; then mv "$dest.tmp/${RENAME%%:*}" "$dest.tmp/${RENAME#*:}"; fi
  # An && list is exempt from set -e: a failed step must stop the set-up here, not
  # report a build that is not in the cache.
  rm -rf "$dest" && mv "$dest.tmp" "$dest" && touch "$dest/.complete" \
    || die "$name $version: cannot move the build from $dest.tmp into $dest"
  log "$name $version: built into $dest"
  exec {lock}>&-
}

build_kubernetes() {
  local v=$KUBERNETES_VERSION major minor
  major=${v#v}; major=${major%%.*}; minor=${v#v"$major".}; minor=${minor%%.*}
  LDFLAGS="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    LDFLAGS+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  build_module kubernetes "$v" "$BERTH_ROOT/hack/go/k8s" "" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kubelet \
    k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubeadm
}

build_etcd() {
  LDFLAGS="-s -w"
  RENAME=server:etcd build_module etcd "$ETCD_VERSION" "$BERTH_ROOT/hack/go/etcd" "" \
    go.etcd.io/etcd/server/v3 go.etcd.io/etcd/etcdctl/v3
}

build_containerd() {
  LDFLAGS="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
  build_module containerd "$CONTAINERD_VERSION" "$BERTH_ROOT/hack/go/containerd" "" \
    github.com/containerd/containerd/v2/cmd/containerd \
    github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
    github.com/containerd/containerd/v2/cmd/ctr
}

# runc from its module with what its Makefile builds in: the seccomp tag (cgo against
# Debian's libseccomp-dev) and the commit it reports; the version is runc's own VERSION file.
build_runc() {
  grep -q "github.com/opencontainers/runc $RUNC_VERSION " "$BERTH_ROOT/hack/go/runc/go.mod" \
    || die "hack/go/runc/go.mod does not pin github.com/opencontainers/runc $RUNC_VERSION (versions.env)"
  pkg-config --exists libseccomp || die "runc needs libseccomp-dev (and pkg-config) to build"
  LDFLAGS="-s -w -X main.gitCommit=$RUNC_VERSION"
  CGO_ENABLED=1 GOFLAGS="$GOFLAGS -tags=seccomp,urfave_cli_no_docs" \
    build_module runc "$RUNC_VERSION" "$BERTH_ROOT/hack/go/runc" "" github.com/opencontainers/runc
}

build_metrics_server() {
  local moddir="$BERTH_ROOT/hack/go/metrics-server"
  # The cache is keyed by versions.env: a go.mod pinning another version would cache a
  # binary under the wrong name.
  grep -q "sigs.k8s.io/metrics-server $METRICS_SERVER_VERSION " "$moddir/go.mod" \
    || die "hack/go/metrics-server/go.mod does not pin sigs.k8s.io/metrics-server $METRICS_SERVER_VERSION (versions.env)"
  # metrics-server reports its version through client-go's version package (as its
  # Makefile sets it), which `kubectl get apiservice` and its /version show.
  LDFLAGS="-s -w -X k8s.io/client-go/pkg/version.gitVersion=$METRICS_SERVER_VERSION -X k8s.io/client-go/pkg/version.gitTreeState=clean"
  build_module metrics-server "$METRICS_SERVER_VERSION" "$moddir" "" \
    sigs.k8s.io/metrics-server/cmd/metrics-server
}

# The key of a module of berth's own code: its sources' hash, so an edit rebuilds it.
# test/harness/csi.ts computes the same (sha256sum over the files, sorted, then of that).
source_key() {
  (cd "$1" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) | LC_ALL=C sort \
    | xargs sha256sum | sha256sum | cut -c1-12)
}

# The CSI components berth's end-to-end tests run (test/harness/csi.ts): the provisioner and
# attacher sidecars, upstream's CSI mock driver with a main of ours, and a stand-in for
# node-driver-registrar (hack/go/csi-*).
build_csi() {
  local name var version pkg
  for name in provisioner attacher; do
    var="CSI_${name^^}_VERSION"; version=${!var}
    case $name in
      provisioner) pkg=github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner ;;
      attacher) pkg=github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher ;;
    esac
    grep -q "^require ${pkg%/cmd/*} $version\b" "$BERTH_ROOT/hack/go/csi-$name/go.mod" \
      || die "hack/go/csi-$name/go.mod does not pin ${pkg%/cmd/*} $version ($var in versions.env)"
    # The sidecars print main.version at start (their Makefiles set it).
    LDFLAGS="-s -w -X main.version=$version"
    build_module "csi-$name" "$version" "$BERTH_ROOT/hack/go/csi-$name" "" "$pkg"
  done
  grep -q "^\sk8s.io/kubernetes $KUBERNETES_VERSION\b" "$BERTH_ROOT/hack/go/csi-mock/go.mod" \
    || die "hack/go/csi-mock/go.mod does not require k8s.io/kubernetes $KUBERNETES_VERSION (versions.env)"
  LDFLAGS="-s -w"
  build_module csi-mock "$KUBERNETES_VERSION-$(source_key "$BERTH_ROOT/hack/go/csi-mock")" \
    "$BERTH_ROOT/hack/go/csi-mock" "" ./cmd/csi-mock ./cmd/csi-registrar
}

targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(etcd containerd runc kubernetes metrics-server csi)
for t in "${targets[@]}"; do
  case $t in
    kubernetes|etcd|containerd|runc) "build_$t" ;;
    metrics-server) build_metrics_server ;;
    csi) build_csi ;;
    *) die "unknown component '$t' (expected kubernetes, etcd, containerd, runc, metrics-server or csi)" ;;
  esac
done
