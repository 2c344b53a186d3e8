#!/usr/bin/env bash
# Installs what distlock's tests, demo and benchmarks need and the machine
# lacks: redis-server (standalone, Sentinel and Cluster all use it) and
# staticcheck. Server packages come from apt-get when run as root; otherwise
# the script says what to install. Safe to run again.
set -euo pipefail

need_pkgs=()
command -v redis-server >/dev/null 2>&1 || need_pkgs+=(redis-server)
# The CLI's terminal tests run under script(1) and bash.
command -v script >/dev/null 2>&1 || need_pkgs+=(bsdutils)
command -v bash >/dev/null 2>&1 || need_pkgs+=(bash)
# sqllock's tests start private PostgreSQL and MariaDB servers.
command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_pkgs+=(postgresql)
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need_pkgs+=(mariadb-server)

if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: installing ${need_pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
    # The packages may start servers on 6379, 5432 and 3306; the tests never use them.
  else
    echo "install-deps: missing ${need_pkgs[*]}; install with: sudo apt-get install ${need_pkgs[*]}" >&2
    exit 1
  fi
fi

if ! command -v staticcheck >/dev/null 2>&1 && [ ! -x "$(go env GOPATH)/bin/staticcheck" ]; then
  echo "install-deps: installing staticcheck"
  go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi
echo "install-deps: ok ($(redis-server --version | cut -d' ' -f3))"
