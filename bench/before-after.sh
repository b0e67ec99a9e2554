#!/bin/sh
# before-after.sh REV [ROUNDS]: scenario 2 (contended handoff: acquisitions
# a second, the wait's p99) for tenure against the library of commit REV
# and against the working tree, in one run: this bench's sources are built
# twice, once on each library (REV's checked out beside, in a temporary git
# worktree), and the two binaries run alternately ROUNDS times (default 3)
# on the same machine, each against a redis-server of its own, with
# redislock-1ms beside tenure in every run as a reference within the run.
# Each run prints its lines; the summary at the end is every tenure line of
# each build, which the reader compares run by run.
#
# The older build has the tag olderlib (api_older.go), for what this bench
# uses of the library that REV may lack.
#
# Run from bench/: sh before-after.sh 33b741b
set -eu
rev=${1:?usage: before-after.sh REV [ROUNDS]}
rounds=${2:-3}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/before" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git -C "$root" worktree add --detach -q "$tmp/before" "$rev"
# This bench's sources, on REV's library.
rm -rf "$tmp/before/bench"
cp -R "$root/bench" "$tmp/before/bench"
(cd "$tmp/before/bench" && go build -tags olderlib -o "$tmp/bench-before" .)
(cd "$root/bench" && go build -o "$tmp/bench-after" .)
for i in $(seq 1 "$rounds"); do
	for side in before after; do
		echo "== round $i: $side"
		mkdir -p "$tmp/out-$side-$i"
		"$tmp/bench-$side" -medium -only contended -contended-impls tenure,redislock-1ms \
			-out "$tmp/out-$side-$i" 2>&1 | grep 'contended run' | sed "s/^/$side $i /" | tee -a "$tmp/summary"
	done
done
echo "== summary (tenure)"
grep ' tenure ' "$tmp/summary" | sort -s -k1,1
