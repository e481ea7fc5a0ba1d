#!/usr/bin/env bash
#
# bench/seq-rw.sh BUILD [LAYOUT] [MB] — one sequential write and read on a
# fresh volume made by brickfsd (the bench's layouts: "distribute 3",
# "replica 3", "disperse 6 redundancy 2", ...; default "distribute 3"):
# dd of MB MiB (default 1024, bs=1M, conv=fsync) into one file, the page
# cache dropped, dd of it back. Prints both rates, and for the read the CPU
# time per MiB of the mount and of each brick (/proc/PID/stat) with each
# brick's minor page faults per MiB, and the load average
# (docs/design/performance-notes.md note 53).
# Environment: SEQ_SET="KEY=VALUE ..." volume options set before the
# start; SEQ_MOPTS="opt=val,..." extra mount options.
set -euo pipefail
BUILD=${1:?usage: bench/seq-rw.sh BUILD [LAYOUT] [MB]}; LAYOUT=${2:-distribute 3}; MB=${3:-1024}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
export BFS_BUILD=$BUILD
# shellcheck source=tests/lib/cluster.sh
source "$(dirname "$0")/../tests/lib/cluster.sh"
# shellcheck source=tests/lib/mgmt.sh
source "$(dirname "$0")/../tests/lib/mgmt.sh"
if [ -n "${SEQ_MOPTS:-}" ]; then
  eval "$(declare -f mount_vol | sed "s/\${extra:+,\$extra}/\${extra:+,\$extra},$SEQ_MOPTS/")"
fi
bench_volume "$LAYOUT" "${SEQ_SET:-}"
cpu_us() { awk '{ printf "%d\n", ($14 + $15) * 1000000 / 100 }' "/proc/$1/stat"; }
minflt() { awk '{ print $10 }' "/proc/$1/stat"; }
sync; echo 3 >/proc/sys/vm/drop_caches
t0=$(bfs_now_us); dd if=/dev/zero of="$T/m/seq" bs=1M count="$MB" conv=fsync status=none; t1=$(bfs_now_us)
sync; echo 3 >/proc/sys/vm/drop_caches
c0=(); f0=(); for p in "$mpid" "${bp[@]}"; do c0+=("$(cpu_us "$p")"); f0+=("$(minflt "$p")"); done
t2=$(bfs_now_us); dd if="$T/m/seq" of=/dev/null bs=1M status=none; t3=$(bfs_now_us)
c1=(); f1=(); for p in "$mpid" "${bp[@]}"; do c1+=("$(cpu_us "$p")"); f1+=("$(minflt "$p")"); done
s="write $(( MB * 1048576 / (t1 - t0) )) MB/s read $(( MB * 1048576 / (t3 - t2) )) MB/s;"
s+=" read CPU us/MiB mount $(( (c1[0] - c0[0]) / MB ))"
for ((i = 1; i < ${#c0[@]}; i++)); do
  s+=" b$((i - 1)) $(( (c1[i] - c0[i]) / MB ))us/$(( (f1[i] - f0[i]) / MB ))flt"
done
echo "$s load $(cut -d' ' -f1 /proc/loadavg)"
