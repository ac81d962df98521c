#!/usr/bin/env bash
# Builds what only `make conformance` (and the conformance subset of `make test`) needs,
# from the Go module proxy, cached by version in $BERTH_CACHE/bin like hack/build-go.sh:
#   e2e-<KUBERNETES_VERSION>/e2e.test  upstream's e2e suite (go test -c k8s.io/kubernetes/test/e2e)
#   e2e-<KUBERNETES_VERSION>/ginkgo    the Ginkgo CLI at the suite's own Ginkgo version,
#                                      which runs e2e.test in parallel processes
#   coredns-<COREDNS_VERSION>/coredns  the cluster DNS the specs assume
#   hack/conformance/build-go.sh [e2e|coredns ...]   (default: both)
. "$(dirname "$0")/../lib.sh"

COREDNS_VERSION=v1.15.0
command -v go >/dev/null || die "Go is not installed; run make deps first."

# The version ldflags of hack/build-go.sh's build_kubernetes: the suite compares the
# server's version with its own in a few specs.
k8s_ldflags() {
  local v=$KUBERNETES_VERSION major minor flags="-s -w"
  major=${v#v}; major=${major%%.*}; minor=${v#v"$major".}; minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  printf '%s' "$flags"
}

# cached name version -> 0 when $BERTH_CACHE/bin/<name>-<version> is complete. Takes a
# lock (fd 9) so two set-ups never build into the same directory at once.
locked_dest() {
  local dest=$1
  mkdir -p "$(dirname "$dest")"
  exec 9>"$dest.lock"
  if ! flock -n 9; then log "$(basename "$dest"): another set-up is building it; waiting"; flock 9; fi
}

build_e2e() {
  local dest="$BERTH_CACHE/bin/e2e-$KUBERNETES_VERSION" moddir="$BERTH_ROOT/hack/go/e2e" ldflags
  locked_dest "$dest"
  if [ -f "$dest/.complete" ]; then log "e2e $KUBERNETES_VERSION: cached in $dest"; exec 9>&-; return 0; fi
  grep -q "k8s.io/kubernetes $KUBERNETES_VERSION" "$moddir/go.mod" \
    || die "hack/go/e2e/go.mod does not pin k8s.io/kubernetes $KUBERNETES_VERSION (versions.env)"
  ldflags=$(k8s_ldflags)
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
  log "e2e $KUBERNETES_VERSION: downloading modules"
  (cd "$moddir" && with_heartbeat "e2e download" go mod download)
  log "e2e $KUBERNETES_VERSION: compiling e2e.test (minutes; faster once the Kubernetes binaries are built)"
  (cd "$moddir" && with_heartbeat "e2e.test build" \
    go test -c -trimpath -ldflags "$ldflags" -o "$dest.tmp/e2e.test" k8s.io/kubernetes/test/e2e)
  (cd "$moddir" && with_heartbeat "ginkgo build" \
    go build -trimpath -ldflags "-s -w" -o "$dest.tmp/ginkgo" github.com/onsi/ginkgo/v2/ginkgo)
  rm -rf "$dest" && mv "$dest.tmp" "$dest" && touch "$dest/.complete" \
    || die "e2e: cannot move the build from $dest.tmp into $dest"
  log "e2e $KUBERNETES_VERSION: built into $dest"
  exec 9>&-
}

build_coredns() {
  local dest="$BERTH_CACHE/bin/coredns-$COREDNS_VERSION" moddir="$BERTH_ROOT/hack/go/coredns"
  locked_dest "$dest"
  if [ -f "$dest/.complete" ]; then log "coredns $COREDNS_VERSION: cached in $dest"; exec 9>&-; return 0; fi
  grep -q "github.com/coredns/coredns $COREDNS_VERSION" "$moddir/go.mod" \
    || die "hack/go/coredns/go.mod does not pin github.com/coredns/coredns $COREDNS_VERSION"
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
  log "coredns $COREDNS_VERSION: downloading modules"
  (cd "$moddir" && with_heartbeat "coredns download" go mod download)
  log "coredns $COREDNS_VERSION: compiling"
  # Static: it runs inside a pod whose image holds nothing else.
  (cd "$moddir" && CGO_ENABLED=0 with_heartbeat "coredns build" \
    go build -trimpath -ldflags "-s -w" -o "$dest.tmp/coredns" github.com/coredns/coredns)
  rm -rf "$dest" && mv "$dest.tmp" "$dest" && touch "$dest/.complete" \
    || die "coredns: cannot move the build from $dest.tmp into $dest"
  log "coredns $COREDNS_VERSION: built into $dest"
  exec 9>&-
}

targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(e2e coredns)
for t in "${targets[@]}"; do
  case $t in
    e2e|coredns) "build_$t" ;;
    *) die "unknown component '$t' (expected e2e or coredns)" ;;
  esac
done
