#!/usr/bin/env bash
# Tests scripts/install-deps.sh on a PATH of stand-ins: an apt-get that
# reports success but installs nothing, an id that says root, a go whose
# install may or may not produce staticcheck. Nothing is installed for real.
set -euo pipefail

script="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/install-deps.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0

# setup TOOL...: a fresh bin directory holding the basics, the stand-ins,
# and a dummy for each TOOL; GOPATH/bin starts empty.
setup() {
  rm -rf "$tmp/bin" "$tmp/gopath" "$tmp/log" "$tmp/jars"
  mkdir -p "$tmp/bin" "$tmp/gopath/bin"
  : >"$tmp/log"
  for c in bash env dirname cat; do ln -s "$(command -v "$c")" "$tmp/bin/$c"; done
  printf '#!/bin/sh\necho 0\n' >"$tmp/bin/id"
  printf '#!/bin/sh\necho "apt-get $*" >>"%s/log"\n' "$tmp" >"$tmp/bin/apt-get"
  cat >"$tmp/bin/go" <<GO
#!/bin/sh
echo "go \$*" >>"$tmp/log"
case "\$1" in
  env) echo "$tmp/gopath" ;;
  install) [ -z "\${FAKE_GO_INSTALLS:-}" ] || { printf '#!/bin/sh\n' >"$tmp/gopath/bin/staticcheck"; $(command -v chmod) +x "$tmp/gopath/bin/staticcheck"; } ;;
esac
GO
  for t in "$@"; do
    if [ "$t" = zookeeper ]; then # jars, not a command
      mkdir -p "$tmp/jars" && : >"$tmp/jars/zookeeper.jar"
    else
      printf '#!/bin/sh\n' >"$tmp/bin/$t"
    fi
  done
  chmod +x "$tmp/bin"/*
}

# check NAME WANT_STATUS ARGS...: runs the script and compares its status;
# the output is in $tmp/out for the assertions that follow.
check() {
  local name="$1" want="$2" got=0
  shift 2
  PATH="$tmp/bin" DISTLOCK_ZOOKEEPER_JARS="$tmp/jars" bash "$script" "$@" >"$tmp/out" 2>&1 || got=$?
  if [ "$got" != "$want" ]; then
    fail "$name: exit status $got, want $want"
  fi
}
fail() {
  echo "FAIL $1" >&2
  sed 's/^/    /' "$tmp/out" >&2
  failures=$((failures + 1))
}
has() { grep -qF -- "$2" "$tmp/$1"; }

# apt-get "succeeds" but redis-server is still not on PATH: not ok.
setup
check "demo, install leaves redis-server missing" 1 demo
has log "apt-get install -y -qq --no-install-recommends redis-server" || fail "demo: apt-get not asked for redis-server"
has out "missing: redis-server is not on PATH" || fail "demo: the missing redis-server is not named"
! has out "ok" || fail "demo: says ok with redis-server missing"

# The demo needs redis-server only: no staticcheck, no go install.
setup redis-server
check "demo, all there" 0 demo
has out "ok for demo: redis-server=$tmp/bin/redis-server" || fail "demo: no ok line naming redis-server"
! has log "go install" || fail "demo: ran go install"
! has log "apt-get" || fail "demo: ran apt-get with nothing missing"

# test: script, bash and staticcheck too, each named when missing.
setup redis-server
check "test, go install leaves staticcheck missing" 1 test
has log "apt-get install -y -qq --no-install-recommends bsdutils" || fail "test: apt-get not asked for bsdutils"
has log "go install honnef.co/go/tools/cmd/staticcheck@" || fail "test: staticcheck not installed"
has out "missing: script is not on PATH; install it with: sudo apt-get install bsdutils" || fail "test: missing script not named"
has out "missing: staticcheck is not on PATH" || fail "test: missing staticcheck not named"
! has out "missing: redis-server" || fail "test: redis-server named missing though present"

setup redis-server script initdb mariadbd java zookeeper
FAKE_GO_INSTALLS=1 check "test, staticcheck from go install" 0 test
has out "staticcheck=$tmp/gopath/bin/staticcheck" || fail "test: staticcheck in GOPATH/bin not found"

# The default is test.
setup redis-server script staticcheck initdb mariadbd java zookeeper
check "default is test, all there" 0
has out "ok for test: redis-server=$tmp/bin/redis-server script=$tmp/bin/script bash=$tmp/bin/bash staticcheck=$tmp/bin/staticcheck initdb=$tmp/bin/initdb mariadbd=$tmp/bin/mariadbd java=$tmp/bin/java zookeeper=$tmp/jars/zookeeper.jar" || fail "default: ok line"

check "unknown argument" 64 lint
has out "usage:" || fail "unknown argument: no usage"

if [ "$failures" -gt 0 ]; then
  echo "install-deps_test: $failures failed" >&2
  exit 1
fi
echo "install-deps_test: ok"
