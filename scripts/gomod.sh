#!/usr/bin/env bash
# Runs a go command that edits a module's go.mod and go.sum (go mod tidy,
# go get) in modules that require a version of this repository's modules
# not yet tagged.
#
#   scripts/gomod.sh MODULE_DIR [GO_ARGS...]    (default: mod tidy)
#   e.g. scripts/gomod.sh etcdlock get go.etcd.io/etcd/client/v3@v3.7.4
#
# go mod tidy and go get resolve a module's requirements without go.work,
# so before the release that the other modules require is tagged, they
# cannot find it. This packs the published modules of the work tree
# (scripts/published) at that version (the one go.work replaces) into a
# module proxy in a temporary directory, runs `go GO_ARGS` in MODULE_DIR
# with that proxy ahead of the usual ones (GOWORK=off, a temporary module
# cache, so the untagged version never enters yours), then drops the lines
# of this repository's modules from MODULE_DIR/go.sum: their sums come when
# the version is tagged (RELEASING.md).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
[ $# -ge 1 ] || { sed -n '5,6p' "$0" >&2; exit 64; }
dir="$1"
shift
[ $# -gt 0 ] || set -- mod tidy
[ -f "$repo/$dir/go.mod" ] || { echo "gomod: $dir has no go.mod" >&2; exit 64; }

version="$(sed -n 's|^[[:space:]]*github.com/distlock-go/distlock v\([^ ]*\) => \./$|v\1|p' "$repo/go.work")"
[ -n "$version" ] || { echo "gomod: go.work replaces no version of the root module" >&2; exit 1; }

tmp="$(mktemp -d "${TMPDIR:-/tmp}/distlock-gomod.XXXXXX")"
trap 'chmod -R u+w "$tmp" 2>/dev/null || true; rm -rf "$tmp"' EXIT

(cd "$here/publishcheck" && GOWORK=off GOFLAGS=-mod=readonly go build -o "$tmp/pack" .)
# Packing problems (replace directives) are the publish check's business.
mapfile -t published < <(grep -v '^#' "$here/published")
(cd "$repo" && "$tmp/pack" -version "$version" -out "$tmp/proxy" "${published[@]}" >/dev/null) || true

cache="$(go env GOMODCACHE)/cache/download"
upstream="$(go env GOPROXY)"
(cd "$repo/$dir" &&
  GOWORK=off GOMODCACHE="$tmp/modcache" GOFLAGS=-mod=mod \
  GOPROXY="file://$tmp/proxy,file://$cache,$upstream" \
  GONOSUMDB="github.com/distlock-go/distlock${GONOSUMDB:+,$GONOSUMDB}" \
  go "$@")
sed -i '\|^github.com/distlock-go/distlock[/ ]|d' "$repo/$dir/go.sum"
