#!/usr/bin/env bash
# Installs what distlock needs and the machine lacks, then checks that every
# tool is there and names each one that is still missing.
#
#   scripts/install-deps.sh demo   redis-server: make demo
#   scripts/install-deps.sh bench  also PostgreSQL, MariaDB and ZooKeeper with
#                                  a Java runtime: make bench and make torture
#   scripts/install-deps.sh test   also staticcheck, script, bash, PostgreSQL
#                                  and MariaDB servers (sqllock), and ZooKeeper
#                                  with a Java runtime (zklock): make test
#                                  (the default)
#
# Server packages come from apt-get when run as root on Debian or Ubuntu;
# otherwise the script says what to install. staticcheck comes from
# `go install` (the Go module proxy). Safe to run again.
set -euo pipefail

usage() { echo "usage: $0 [demo|bench|test]" >&2; exit 64; }
[ $# -le 1 ] || usage
what="${1:-test}"

# Each tool and the Debian package that provides it. Standalone, Sentinel
# and Cluster servers all run redis-server; the CLI's terminal tests run
# under script(1) and bash.
case "$what" in
  demo) tools=(redis-server) ;;
  bench) tools=(redis-server initdb mariadbd java zookeeper) ;;
  test) tools=(redis-server script bash staticcheck initdb mariadbd java zookeeper) ;;
  *) usage ;;
esac
package_of() {
  case "$1" in
    redis-server) echo redis-server ;;
    script) echo bsdutils ;;
    bash) echo bash ;;
    initdb) echo postgresql ;;
    mariadbd) echo mariadb-server ;;
    java) echo default-jre-headless ;;
    zookeeper) echo zookeeper ;;
  esac
}

STATICCHECK_VERSION=v0.8.2
gobin() { echo "$(go env GOPATH)/bin"; }

# have TOOL: where the tool is, or nothing. staticcheck also counts where
# go install puts it: the Makefile looks there too.
have() {
  # ZooKeeper is a set of jars that the tests run with java (see
  # internal/launch/zookeeper.go), not a command.
  if [ "$1" = zookeeper ]; then
    local jar="${DISTLOCK_ZOOKEEPER_JARS:-/usr/share/java}/zookeeper.jar"
    [ -f "$jar" ] && echo "$jar"
    return
  fi
  if command -v "$1" 2>/dev/null; then
    return 0
  fi
  if [ "$1" = staticcheck ] && command -v go >/dev/null 2>&1 && [ -x "$(gobin)/staticcheck" ]; then
    echo "$(gobin)/staticcheck"
    return 0
  fi
  # Debian keeps the database servers off a user's PATH.
  local p
  for p in /usr/lib/postgresql/*/bin/"$1" /usr/sbin/"$1"; do
    if [ "$1" != staticcheck ] && [ -x "$p" ]; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

pkgs=()
for t in "${tools[@]}"; do
  if [ "$t" != staticcheck ] && ! have "$t" >/dev/null; then
    pkgs+=("$(package_of "$t")")
  fi
done
if [ ${#pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: installing ${pkgs[*]} with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    # A failure is reported below, tool by tool.
    if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null; }; then
      echo "install-deps: apt-get install ${pkgs[*]} failed" >&2
    fi
    # The packages may start servers on 6379, 5432 and 3306; the tests and
    # the demo never use them.
  else
    echo "install-deps: not installing ${pkgs[*]}: that needs root and apt-get" >&2
  fi
fi

if [[ " ${tools[*]} " == *" staticcheck "* ]] && ! have staticcheck >/dev/null; then
  if command -v go >/dev/null 2>&1; then
    echo "install-deps: installing staticcheck $STATICCHECK_VERSION with go install"
    go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" ||
      echo "install-deps: go install staticcheck failed" >&2
  else
    echo "install-deps: not installing staticcheck: the go command is not on PATH" >&2
  fi
fi

missing=()
for t in "${tools[@]}"; do
  if ! have "$t" >/dev/null; then
    missing+=("$t")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  for t in "${missing[@]}"; do
    case "$t" in
      staticcheck) how="go install honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" ;;
      *) how="sudo apt-get install $(package_of "$t")" ;;
    esac
    echo "install-deps: missing: $t is not on PATH; install it with: $how" >&2
  done
  exit 1
fi
found=()
for t in "${tools[@]}"; do
  found+=("$t=$(have "$t")")
done
echo "install-deps: ok for $what: ${found[*]}"
