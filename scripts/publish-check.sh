#!/usr/bin/env bash
# The publish check: installs the published modules the way a user will
# after a release, without the network.
#
#   scripts/publish-check.sh [REPO]
#
# scripts/publishcheck packs every published module of REPO (default: this
# repository; the list is scripts/published) at a test version into a
# module proxy in a temporary directory, with the modules' requirements of
# one another at a release version rewritten to the test version. Then, in empty modules outside the
# repository, with that proxy and the local module cache as the only module
# sources (GOWORK=off, so no go.work and no replace of this tree helps):
#   - go get each module and build a program with it: the root with memlock
#     (and run it), the root with redislock, etcdlock, otel, gocronlock;
#   - go install the CLI and run `distlock --version`.
# Every step runs; the check fails if any failed, naming each one.
#
# The modules it packs are extracted into the module cache ($(go env
# GOMODCACHE)) under the test version and removed before and after the
# run; third-party modules come from the cache as they are. The version is
# named after the content it packs: the go command takes what the module
# cache holds at a version to be immutable (it indexes it once), and the
# same content gets the same version, so the build cache serves the
# packages that did not change. Runs take turns on a lock file in the
# module cache. A
# module the cache lacks fails the check: run `go mod download` in the
# modules (or any build of them) once with the network to fill it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${1:-$here/..}" && pwd)"
mapfile -t published < <(grep -v '^#' "$here/published")
root_path=github.com/distlock-go/distlock

prefix=v0.0.0-publishcheck
# The sources packed (and the packer's): the files git would publish.
# A copy of this script kept outside any repository packs REPO the same
# way: its packer's files are then every file of its directory.
files() {
  if git -C "$1" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$1" ls-files -z --cached --others --exclude-standard
  else
    (cd "$1" && find . -type f -print0)
  fi
}
sum="$(for d in "$repo" "$here/publishcheck"; do
  files "$d" | (cd "$d" && xargs -0 sha256sum 2>/dev/null)
done | sha256sum)"
version="$prefix.h${sum:0:16}"
modcache="$(go env GOMODCACHE)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/distlock-publish.XXXXXX")"

forget() {
  local d p list
  for d in "${published[@]}"; do
    p="$root_path"; [ "$d" = . ] || p="$root_path/$d"
    # Module cache files are read-only.
    chmod -R u+w "$modcache/$p@$prefix".* 2>/dev/null || true
    rm -rf "$modcache/$p@$prefix".* "$modcache/cache/download/$p/@v/$prefix".*
    # The go command lists the versions it keeps; a list of ours alone goes.
    list="$modcache/cache/download/$p/@v/list"
    if [ -f "$list" ]; then
      sed -i "/^$prefix\./d" "$list"
      [ -s "$list" ] || rm -f "$list"
    fi
  done
  # And the directories that held only them.
  find "$modcache/${root_path%/*}" "$modcache/cache/download/${root_path%/*}" \
    -depth -type d -empty -delete 2>/dev/null || true
}
cleanup() {
  forget
  chmod -R u+w "$tmp" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$modcache/cache"
exec 9>"$modcache/cache/distlock-publish-check.lock"
flock 9
forget

failures=()
fail() { failures+=("$1"); echo "publish check: FAIL: $1" >&2; }
# uncached OUTPUT: whether a go command failed for a module that the
# module cache lacks, not for a fault of the modules packed.
uncached=
uncached() {
  case "$1" in *"file://$modcache/cache/download/"*"no such file or directory"*) uncached=1 ;; esac
  return 0
}

echo "publish check: packing ${published[*]} of $repo at $version"
(cd "$here/publishcheck" && GOWORK=off GOFLAGS=-mod=readonly go build -o "$tmp/pack" .)
if ! (cd "$repo" && "$tmp/pack" -version "$version" -out "$tmp/proxy" "${published[@]}"); then
  fail "packing (see above)"
fi

# Everything below sees only the packed modules and the module cache.
export GOPROXY="file://$tmp/proxy,file://$modcache/cache/download"
export GOSUMDB=off GOFLAGS=-mod=mod GOWORK=off GOTOOLCHAIN=local
export GONOSUMDB= GONOPROXY= GOPRIVATE= GOINSECURE=

# user NAME MODULE... : a new module $tmp/NAME that has go got each MODULE
# at the test version, with main.go read from stdin.
user() {
  local name="$1" dir="$tmp/$1" m out
  shift
  mkdir -p "$dir"
  cat > "$dir/main.go"
  (cd "$dir" && go mod init "example.com/$name" >/dev/null 2>&1)
  for m in "$@"; do
    if ! out="$(cd "$dir" && go get "$m@$version" 2>&1)"; then
      echo "$out" >&2
      uncached "$out"
      fail "$name: go get $m@$version"
      return 1
    fi
  done
  if ! out="$(cd "$dir" && go build -o "$tmp/bin/$name" . 2>&1)"; then
    echo "$out" >&2
    uncached "$out"
    fail "$name: go build with $*"
    return 1
  fi
  echo "publish check: $name: go get $*, go build: ok"
}

if user memlock "$root_path" <<'GO'; then
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/memlock"
)

func main() {
	ctx := context.Background()
	l, err := distlock.New(memlock.New()).Mutex("publish-check").Lock(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := l.Unlock(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("locked and unlocked")
}
GO
  if out="$("$tmp/bin/memlock" 2>&1)"; then
    echo "publish check: memlock: $out"
  else
    fail "memlock: the program failed: $out"
  fi
fi

user redislock "$root_path" <<'GO' || true
package main

import (
	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/redislock"
	"github.com/redis/go-redis/v9"
)

func main() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	_ = distlock.New(redislock.New(rdb))
}
GO

user etcdlock "$root_path/etcdlock" <<'GO' || true
package main

import (
	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func main() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}})
	if err != nil {
		panic(err)
	}
	defer cli.Close()
	_ = distlock.New(etcdlock.New(cli))
}
GO

user otel "$root_path/otel" <<'GO' || true
package main

import (
	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/memlock"
	distlockotel "github.com/distlock-go/distlock/otel"
)

func main() {
	obs, err := distlockotel.NewObserver()
	if err != nil {
		panic(err)
	}
	_ = distlock.New(memlock.New(), distlock.WithObserver(obs))
}
GO

user gocronlock "$root_path/gocronlock" <<'GO' || true
package main

import (
	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/gocronlock"
	"github.com/distlock-go/distlock/memlock"
	"github.com/go-co-op/gocron/v2"
)

func main() {
	locker := gocronlock.NewLocker(distlock.New(memlock.New()))
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
	if err != nil {
		panic(err)
	}
	_ = s.Shutdown()
}
GO

# The CLI, as the README installs it, outside any module.
if out="$(cd "$tmp" && GOBIN="$tmp/bin" go install "$root_path/cmd/distlock@$version" 2>&1)"; then
  got="$("$tmp/bin/distlock" --version 2>&1)" || true
  case "$got" in
    "distlock $version "*) echo "publish check: go install cmd/distlock: ok: $got" ;;
    *) fail "distlock --version printed \"$got\", not distlock $version" ;;
  esac
else
  echo "$out" >&2
  uncached "$out"
  fail "go install $root_path/cmd/distlock@$version"
fi

if [ ${#failures[@]} -gt 0 ]; then
  echo "publish check: ${#failures[@]} failed:" >&2
  printf '  - %s\n' "${failures[@]}" >&2
  if [ -n "$uncached" ]; then
    echo "publish check: the module cache lacks a third-party module named above, which the check does not download: fill the cache once with the network (go mod download in each published module's directory) and run it again" >&2
  fi
  exit 1
fi
echo "publish check: every published module installs at $version"
