#!/usr/bin/env bash
# The README's test command: installs what the tests need when it is missing,
# then runs the tests of every module of go.work (the library, cmd/tenure,
# examples, fencing, tracing/test and bench) with the race detector.
#
#   ./test.sh                          every test
#   ./test.sh -run TestAcquire -v      arguments are go test flags
#   ./test.sh -run TestAcquire -- ./lease
#                                      packages after -- replace every module's
#   ./test.sh --server valkey-9 ...    first, on another server: redis-8.0,
#                                      valkey-9, valkey-8.1 (tests/servers/fetch.sh
#                                      fetches and caches it from Debian's
#                                      archive); debian is Debian 12's 7.0
#
# The tests start their own redis-server (tests/redistest) and, in the
# fencing module, their own PostgreSQL (fencing/pgtest): Debian's packages
# redis-server and postgresql, or the binaries $REDIS_SERVER and
# $POSTGRES_BIN_DIR name. When one is missing, root gets it installed with
# apt-get, without the package starting its service (the tests use none);
# anyone else is told the apt-get command to run, since this script never
# runs sudo behind their back. .ci/run calls this script. It is a script,
# not a make target, because a fresh Debian machine with Go has no make.
set -euo pipefail
cd "$(dirname "$0")"

die() {
  echo "$0: $*" >&2
  exit 1
}

# executable is true for an executable regular file.
executable() { [ -f "$1" ] && [ -x "$1" ]; }

# on_path prints the executable called $1 on PATH, as Go's exec.LookPath
# finds it; bash's command -v alone would also print a file without the
# execute bit when there is nothing better.
on_path() {
  local p
  p=$(command -v "$1") && executable "$p" && echo "$p"
}

# redis_bin prints the redis-server the tests will start, found as
# tests/redistest.Binary finds it.
redis_bin() {
  if [ -n "${REDIS_SERVER:-}" ]; then
    echo "$REDIS_SERVER"
  else
    on_path redis-server
  fi
}

# pg_bin_dir prints the directory of initdb and postgres the tests will use,
# found as fencing/pgtest.BinDir finds it: $POSTGRES_BIN_DIR, else the newest
# of Debian's /usr/lib/postgresql/*/bin, else that of initdb on PATH.
pg_bin_dir() {
  if [ -n "${POSTGRES_BIN_DIR:-}" ]; then
    echo "$POSTGRES_BIN_DIR"
    return
  fi
  local dirs dir
  mapfile -t dirs < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -rV)
  dir=$(on_path initdb) && dirs+=("$(dirname "$dir")")
  for dir in "${dirs[@]}"; do
    if executable "$dir/initdb" && executable "$dir/postgres"; then
      echo "$dir"
      return
    fi
  done
  return 1
}

# missing_packages prints the Debian packages of the servers not found.
missing_packages() {
  redis_bin >/dev/null || echo redis-server
  pg_bin_dir >/dev/null || echo postgresql
}

# install installs Debian packages as root, keeping their services stopped
# with a policy-rc.d that says no, unless one is there already (container
# images have one), which is left alone.
policy=
install() {
  echo "== installing $* from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    trap 'rm -f "$policy"' EXIT
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
  fi
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  if [ -n "$policy" ]; then
    rm -f "$policy"
    trap - EXIT
  fi
}

# --server NAME, first: a server other than Debian 12's redis-server,
# fetched once and cached by tests/servers/fetch.sh, which fails with its
# reason when the server cannot be had: the tests never fall back quietly
# to another server.
if [ "${1:-}" = --server ]; then
  [ $# -ge 2 ] || die "--server needs a name: debian, redis-8.0, valkey-9, valkey-8.1"
  case "$2" in
  debian | redis-7.0) ;;
  *)
    [ -z "${REDIS_SERVER:-}" ] || die "--server $2 and REDIS_SERVER=$REDIS_SERVER: choose one"
    REDIS_SERVER=$(tests/servers/fetch.sh "$2") || die "--server $2: the server could not be had (above)"
    export REDIS_SERVER
    ;;
  esac
  shift 2
fi

on_path go >/dev/null || die "go not found: install Go 1.26 or later (https://go.dev/dl/)"
# A variable set by hand names what the user wants; nothing is installed
# in its place.
if [ -n "${REDIS_SERVER:-}" ] && ! executable "$REDIS_SERVER"; then
  die "REDIS_SERVER=$REDIS_SERVER is not an executable file"
fi
if [ -n "${POSTGRES_BIN_DIR:-}" ] &&
  ! { executable "$POSTGRES_BIN_DIR/initdb" && executable "$POSTGRES_BIN_DIR/postgres"; }; then
  die "POSTGRES_BIN_DIR=$POSTGRES_BIN_DIR has no executable initdb and postgres"
fi

mapfile -t missing < <(missing_packages)
if [ "${#missing[@]}" -gt 0 ]; then
  if ! on_path apt-get >/dev/null; then
    die "not installed: ${missing[*]}, and there is no apt-get to install them with: install them, or set REDIS_SERVER to a redis-server binary and POSTGRES_BIN_DIR to the directory holding initdb and postgres"
  fi
  if [ "$(id -u)" != 0 ]; then
    die "not installed: ${missing[*]} (the tests start their own servers); install with
  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}
and run $0 again"
  fi
  install "${missing[@]}"
  mapfile -t missing < <(missing_packages)
  [ "${#missing[@]}" = 0 ] || die "still not found after installing: ${missing[*]}"
fi

redis=$(redis_bin)
pgbin=$(pg_bin_dir)
echo "== $("$redis" --version)"
echo "== $("$pgbin/postgres" --version) ($pgbin)"
go version

flags=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  flags+=("$1")
  shift
done
# go.work makes ./... the root module only; this pattern spans every module.
pkgs=(github.com/tenure-go/tenure/...)
if [ $# -gt 0 ]; then
  shift
  [ $# -eq 0 ] || pkgs=("$@")
fi
echo "== go test -race ${flags[*]:+${flags[*]} }${pkgs[*]}"
exec go test -race "${flags[@]}" "${pkgs[@]}"
