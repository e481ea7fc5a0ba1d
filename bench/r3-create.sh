#!/usr/bin/env bash
#
# bench/r3-create.sh BUILD [FILES] [ROUNDS] — the bench's replica 3 create
# phase alone (smallfile: FILES files of 4 KiB, default 5,000, in 50
# folders, one thread) on a fresh volume made by brickfsd, ROUNDS times
# (page cache dropped before each); prints files/s with the load average,
# CPU µs per file of the mount and of each brick (schedstat: ns exact) and
# the mount's and brick 0's minor faults per file (performance note 48).
# The first round on a fresh volume is the one to compare: ext4 skips
# recently freed inodes after a mass delete, so later rounds (and a run
# right after another's teardown) are slower; alternate builds with 60 s
# between runs.
# Environment: R3_LAYOUT (default "replica 3"; "distribute N"), R3_SET
# ("key=value ..." volume options), R3_PRE / R3_POST (shell run around
# the phase: ${bp[0]} is brick 0's pid, $mpid the mount's), R3_HOOK (at the
# end), PERF=1 (perf record -g of brick 0 and the mount into
# /tmp/r3c-brick.data and /tmp/r3c-mount.data).
set -euo pipefail
BUILD=${1:?usage: bench/r3-create.sh BUILD [FILES] [ROUNDS]}; N=${2:-5000}; ROUNDS=${3:-1}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
export BFS_BUILD=$BUILD
# shellcheck source=tests/lib/cluster.sh
source "$(dirname "$0")/../tests/lib/cluster.sh"
# shellcheck source=tests/lib/mgmt.sh
source "$(dirname "$0")/../tests/lib/mgmt.sh"
bench_volume "${R3_LAYOUT:-replica 3}" "${R3_SET:-}"
NB=${#bp[@]}
minflt() { awk '{print $10}' "/proc/$1/stat"; }
cpu_us() { cat /proc/"$1"/task/*/schedstat | awk '{ s += $1 } END { printf "%d\n", s / 1000 }'; }
for ((r = 1; r <= ROUNDS; r++)); do
  rm -rf "$T/m/small"; sync; echo 3 >/proc/sys/vm/drop_caches
  c0=(); f0=(); for p in "$mpid" "${bp[@]}"; do c0+=("$(cpu_us $p)"); f0+=("$(minflt $p)"); done
  if [ "${PERF:-0}" = 1 ]; then perf record -g -o /tmp/r3c-brick.data -p "${bp[0]}" 2>/dev/null & pb=$!; perf record -g -o /tmp/r3c-mount.data -p "$mpid" 2>/dev/null & pm=$!; sleep 0.5; fi
  [ -n "${R3_PRE:-}" ] && eval "$R3_PRE"
  out=$("$BUILD/bin/smallfile" -p create -n "$N" -d 50 -s 4096 "$T/m/small")
  [ -n "${R3_POST:-}" ] && eval "$R3_POST"
  [ "${PERF:-0}" = 1 ] && { kill -INT $pb $pm; wait $pb $pm || true; }
  c1=(); f1=(); for p in "$mpid" "${bp[@]}"; do c1+=("$(cpu_us $p)"); f1+=("$(minflt $p)"); done
  s="$out load $(cut -d' ' -f1 /proc/loadavg) cpu/file mount $(( (c1[0]-c0[0]) / N ))"
  for ((i = 1; i <= NB; i++)); do s+=" b$((i-1)) $(( (c1[i]-c0[i]) / N ))"; done
  s+=" faults/file mount $(( (f1[0]-f0[0]) * 100 / N ))/100 b0 $(( (f1[1]-f0[1]) * 100 / N ))/100"; echo "$s"
done
[ -n "${R3_HOOK:-}" ] && eval "$R3_HOOK"
