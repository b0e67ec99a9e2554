#!/usr/bin/env bash
# Fetches a newer Redis or Valkey server than Debian 12's own from Debian's
# archive, caches it, and prints the path of a redis-server that runs it, for
# REDIS_SERVER (./test.sh --server NAME calls this script).
#
#   tests/servers/fetch.sh redis-8.0     trixie's redis-tools 8.0.x
#   tests/servers/fetch.sh valkey-9      sid's valkey-tools 9.x (the newest)
#   tests/servers/fetch.sh valkey-8.1    trixie's valkey-tools 8.1.x
#   tests/servers/fetch.sh redis-6.0     bullseye's redis-tools 6.0.x, older than
#                                        tenure supports (TestServerTooOld)
#
# NAME is a server and a version prefix: trixie's version of that server's
# package if its upstream version starts with the prefix, else the newest
# such in sid or bullseye.
# The packages hold the server as redis-check-rdb / valkey-check-rdb (Debian's
# redis-server package only adds a link to it) and need glibc 2.38 or later,
# newer than Debian 12's 2.36: libc6, libstdc++6 and libgcc-s1 of the same
# suite are unpacked beside it and the server runs through their dynamic loader,
# falling back to the system's libraries for the rest (jemalloc, lzf,
# OpenSSL, systemd, the dependencies of Debian 12's redis-tools, installed
# with apt-get when missing and run as root). Nothing is installed in the
# system's own lists or paths: apt-get runs with a sources list, lists and
# cache of its own under the cache directory.
#
# The cache is $TENURE_SERVER_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/tenure/servers;
# a server fetched once is used again without asking the archive. Anything
# that goes wrong (no such version, no network, a server that does not start)
# ends the script with its reason and a non-zero status: never a silent skip.
set -euo pipefail

die() {
  echo "tests/servers/fetch.sh: $*" >&2
  exit 1
}

[ $# -eq 1 ] || die "usage: $0 redis-X.Y | valkey-X[.Y]"
name=$1
case "$name" in
redis-[0-9]*) server=redis pkg=redis-tools ;;
valkey-[0-9]*) server=valkey pkg=valkey-tools ;;
*) die "unknown server $name: want redis-VERSION or valkey-VERSION (redis-8.0, valkey-9, valkey-8.1)" ;;
esac
prefix=${name#*-}
[[ "$prefix" =~ ^[0-9]+(\.[0-9]+)*$ ]] || die "bad version prefix in $name"
[ "$(uname -m)" = x86_64 ] || die "only x86_64 is supported (the loader's path is x86_64's)"

cache=${TENURE_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tenure/servers}
dir=$cache/$name
wrapper=$dir/redis-server

# The system libraries the server needs from Debian 12 (redis-tools'
# dependencies besides libc6 and libstdc++6).
syslibs=(libatomic1 libjemalloc2 liblzf1 libssl3 libsystemd0)

# run_server runs the cached server with the given arguments.
run_server() { "$wrapper" "$@"; }

# missing_libs prints the libraries the loader cannot find for the server.
missing_libs() {
  local root=$dir/root ld
  ld=$(ls "$root"/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$root"/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 2>/dev/null | head -1 || true)
  ld=${ld:-/lib64/ld-linux-x86-64.so.2}
  "$ld" --library-path "$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu" \
    --list "$root/usr/bin/$server-check-rdb" | awk '/not found/ {print $1}'
}

fetch() {
  command -v apt-get >/dev/null || die "apt-get not found: $name is fetched from Debian's archive"
  command -v dpkg-deb >/dev/null || die "dpkg-deb not found"
  local apt=$cache/.apt tmp
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/etc"
  cat >"$apt/etc/sources.list" <<'EOF'
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bullseye main
EOF
  local o=(-o "Dir::Etc::SourceList=$apt/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Dir::Etc::Preferences=/dev/null
    -o Dir::Etc::PreferencesParts=/dev/null -o APT::Sandbox::User=root -qq)
  apt-get "${o[@]}" update || die "apt-get update of trixie and sid failed"
  # The version: trixie's when its upstream part (after any epoch) starts
  # with the prefix (a stable build), else the newest such in sid or
  # bullseye (Debian 11, for Redis 6.0, older than tenure supports); the C
  # libraries come from the same suite, so that the server finds the glibc
  # it was built against.
  local version suite
  read -r version suite _ < <(apt-cache "${o[@]}" madison "$pkg" |
    awk -F'|' '{gsub(/ /, "", $2); split($3, s, " "); sub(/\/.*/, "", s[2]); print $2, s[2]}' |
    awk -v p="$prefix" '{ v = $1; sub(/^[0-9]+:/, "", v); if (index(v, p) == 1 && (length(v) == length(p) || substr(v, length(p) + 1, 1) ~ /[.~+-]/)) print $1, $2, ($2 == "trixie") }' |
    sort -k3,3nr -k1,1Vr | head -1) || true
  [ -n "${version:-}" ] || die "no $pkg $prefix.* in trixie or sid (apt-cache madison $pkg lists what there is)"
  # The package's own libraries that the system does not have under the
  # same name (Debian 11's Redis 6.0: its Lua modules and OpenSSL 1.1),
  # from the same suite; the system's stand in for the rest (syslibs).
  local extra
  extra=$(apt-cache "${o[@]}" show "$pkg=$version" | sed -n 's/^Depends: //p' | tr ',' '\n' |
    sed -e 's/|.*//' -e 's/(.*)//' -e 's/ //g' |
    grep -vxE 'adduser|systemd.*|libc6|libstdc\+\+6|libgcc-s1|libatomic1|libjemalloc2|liblzf1|libsystemd0|libssl3(t64)?' |
    sed "s|\$|/$suite|" | tr '\n' ' ' || true)
  # A suite older than the system's (bullseye) runs on the system's C
  # libraries and loader; a newer one brings its own.
  local clibs=("libc6/$suite" "libstdc++6/$suite" "libgcc-s1/$suite")
  [ "$suite" != bullseye ] || clibs=()
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  (cd "$tmp" && apt-get "${o[@]}" download "$pkg=$version" "${clibs[@]}" $extra) ||
    die "apt-get download of $pkg=$version and $suite's libc6, libstdc++6, libgcc-s1 failed"
  rm -rf "$dir.new"
  mkdir -p "$dir.new/root"
  local deb
  for deb in "$tmp"/*.deb; do
    dpkg-deb -x "$deb" "$dir.new/root"
  done
  echo "$pkg $version ($suite)" >"$dir.new/VERSION"
  # The server dispatches on its name (redis-check-rdb is also
  # redis-server): a link by the server's name runs it as one. The loader
  # of the same suite runs it (Debian 11's ships in /lib, later ones in
  # /usr/lib), and exec keeps the pid, so that tests/redistest can pause
  # and kill the process it started.
  ln -s "$server-check-rdb" "$dir.new/root/usr/bin/$server-server"
  local ld
  ld=$(cd "$dir.new/root" && ls usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 2>/dev/null | head -1 || true)
  ld=${ld:+\$root/$ld}
  ld=${ld:-/lib64/ld-linux-x86-64.so.2}
  cat >"$dir.new/redis-server" <<EOF
#!/bin/sh
# $name ($pkg $version from $suite), written by tests/servers/fetch.sh.
root='$dir/root'
exec "$ld" --library-path "\$root/usr/lib/x86_64-linux-gnu:\$root/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu" "\$root/usr/bin/$server-server" "\$@"
EOF
  chmod +x "$dir.new/redis-server"
  rm -rf "$dir"
  mv "$dir.new" "$dir"
}

if [ ! -x "$wrapper" ]; then
  fetch >&2
fi
mapfile -t missing < <(missing_libs)
if [ "${#missing[@]}" -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "$name needs ${missing[*]}: install with
  sudo apt-get install -y --no-install-recommends ${syslibs[*]}"
  echo "== installing ${syslibs[*]} for $name" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${syslibs[@]}" >/dev/null ||
    die "apt-get install ${syslibs[*]} failed"
fi
out=$(run_server --version 2>&1) || die "$name does not start: $out"
case "$out" in
"Redis server v=$prefix"* | "Valkey server v=$prefix"*) ;;
*) die "$name is not what was asked: $out" ;;
esac
echo "$wrapper"
