# Shared shell helpers for berth's provisioning scripts. Source, do not run.
# shellcheck shell=bash
set -euo pipefail

BERTH_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../versions.env
. "$BERTH_ROOT/versions.env"

# Built binaries live outside the repository, keyed by version, so a fresh clone
# on a warm machine reuses them.
BERTH_CACHE="${BERTH_CACHE:-/var/cache/berth}"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$(date +%H:%M:%S)" "$*" >&2; exit 1; }

# Runs a long command, printing a heartbeat every 30 s so a cold build is never silent.
with_heartbeat() {
  local label=$1; shift
  local start=$SECONDS
  ( while sleep 30; do log "$label: still working ($((SECONDS - start)) s)"; done ) &
  local hb=$!
  local rc=0
  "$@" || rc=$?
  kill "$hb" 2>/dev/null || true
  wait "$hb" 2>/dev/null || true
  return "$rc"
}
